package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerRefusesFirstAttempt: while open, Do and DoValue do not call
// the operation: an *Error with 0 attempts and ErrCircuitOpen, hooks told.
func TestBreakerRefusesFirstAttempt(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1})
	_ = k.call("", errBrk500)
	k.want("", BreakerOpen)
	k.refused("")

	var gaveUp *Error
	called := false
	v, err := DoValue(context.Background(), NewAdaptive(AdaptiveOptions{}), func(context.Context) (int, error) {
		called = true
		return 1, nil
	}, WithBreaker(k.b), OnGiveUp(func(_ context.Context, e *Error) { gaveUp = e }))
	var e *Error
	if called || v != 0 || !errors.As(err, &e) || e.Attempts != 0 || e.Reason != ErrCircuitOpen || e.Err != nil {
		t.Fatalf("DoValue: %v, %v (called %v), want 0 and an *Error with ErrCircuitOpen after 0 attempts", v, err, called)
	}
	if gaveUp != e {
		t.Errorf("OnGiveUp got %v, want the *Error returned", gaveUp)
	}
	if Classify(err).Retryable() {
		t.Error("a refusal classifies as retryable: an outer loop would retry it")
	}
	// Without a first token from the strategy: one attempt, consulted the same.
	if err := Do(context.Background(), &outsider{acquire: errNoFirstToken}, func(context.Context) error {
		t.Fatal("called")
		return nil
	}, WithBreaker(k.b)); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("no first token: %v, want ErrCircuitOpen", err)
	}
}

// TestBreakerRefusesRetry: a retry the breaker refuses ends the loop with
// ErrCircuitOpen and the attempts made so far, the last error wrapped.
func TestBreakerRefusesRetry(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 3})
	s := &Simple{MaxAttempts: 10, Backoff: Constant(0)}
	calls := 0
	err := Do(context.Background(), s, func(context.Context) error {
		calls++
		return errBrk500
	}, WithBreaker(k.b))
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, errBrk500) {
		t.Fatalf("%v, want an *Error after 3 attempts with ErrCircuitOpen and the 500", err)
	}
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
}

// TestBreakerRefusesRetryBeforeItsWait: a retry whose wait would end while
// the circuit is still open is refused at once, not after the wait, and
// OnRetry does not announce it; one that waits past OpenFor is a probe.
func TestBreakerRefusesRetryBeforeItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 2, OpenFor: 5 * time.Second})
		retried := 0
		start := time.Now()
		err := Do(t.Context(), &Simple{MaxAttempts: 5, Backoff: Constant(time.Second)}, func(context.Context) error {
			return errBrk500
		}, WithBreaker(b), OnRetry(func(context.Context, int, time.Duration, error) { retried++ }))
		var e *Error
		if !errors.As(err, &e) || e.Attempts != 2 || e.Reason != ErrCircuitOpen {
			t.Fatalf("%v, want ErrCircuitOpen after 2 attempts", err)
		}
		if waited := time.Since(start); waited != time.Second || retried != 1 {
			t.Fatalf("waited %v with %d retries announced, want 1s (the one retry made) and 1", waited, retried)
		}

		// A wait that outlasts OpenFor ends half-open: the retry is the
		// probe, and its success closes the circuit.
		b = NewBreaker(BreakerOptions{MinAttempts: 1, OpenFor: 5 * time.Second})
		n := 0
		start = time.Now()
		err = Do(t.Context(), &Simple{MaxAttempts: 2, Backoff: Constant(10 * time.Second)}, func(context.Context) error {
			if n++; n == 1 {
				return errBrk500 // opens the circuit
			}
			return nil
		}, WithBreaker(b))
		if err != nil || n != 2 || time.Since(start) != 10*time.Second {
			t.Fatalf("%v after %d attempts and %v, want success on the second after 10s", err, n, time.Since(start))
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("after the probe succeeded: %v, want closed", got)
		}
	})
}

// TestBreakerZeroValue: the zero Breaker works, with the defaults: 20
// attempts, half failed and six failures more than successes, open for at
// most a second, one probe.
func TestBreakerZeroValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Breaker
		call := func(err error) error {
			return Do(t.Context(), &No{}, func(context.Context) error { return err }, WithBreaker(&b))
		}
		for range 10 {
			_ = call(nil)
		}
		for range 15 {
			_ = call(errBrk500)
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("15 of 25 failed: %v", got)
		}
		_ = call(errBrk500)
		if got := b.State(""); got != BreakerOpen {
			t.Fatalf("16 of 26 failed: %v", got)
		}
		// 26 attempts in 10 s: the spell the scope takes to make five
		// attempts is 1.9 s, capped at DefaultBreakerOpenFor.
		time.Sleep(time.Second - time.Nanosecond)
		if err := call(nil); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("before 1 s: %v", err)
		}
		time.Sleep(time.Nanosecond)
		if got := b.State(""); got != BreakerHalfOpen {
			t.Fatalf("after 1 s: %v", got)
		}
		if err := call(nil); err != nil {
			t.Fatal(err)
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("after the probe: %v", got)
		}
	})
}

// TestBreakerLongPoll: with LongPoll, a refusal waits until the circuit
// lets probes through, never past the deadline: until it, if sooner.
func TestBreakerLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 1, OpenFor: 5 * time.Second})
		_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b))
		start := time.Now()
		err := Do(t.Context(), &No{}, func(context.Context) error { return nil }, WithBreaker(b), LongPoll())
		if !errors.Is(err, ErrCircuitOpen) || time.Since(start) != 5*time.Second {
			t.Fatalf("%v after %v, want ErrCircuitOpen after 5s", err, time.Since(start))
		}
		_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b)) // the probe fails: 10 s
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start = time.Now()
		err = Do(ctx, &No{}, func(context.Context) error { return nil }, WithBreaker(b), LongPoll())
		if !errors.Is(err, ErrCircuitOpen) || time.Since(start) != 2*time.Second {
			t.Fatalf("%v after %v, want ErrCircuitOpen at the 2s deadline", err, time.Since(start))
		}
	})
}

// TestBreakerConcurrent: many goroutines through one breaker (run it with
// -race). While the circuit is open no operation runs; half-open, exactly
// Probes do; their successes close it; the probe bookkeeping stays
// consistent throughout.
func TestBreakerConcurrent(t *testing.T) {
	const (
		workers = 32
		probes  = 3
	)
	clock := newHandClock()
	b := NewBreaker(BreakerOptions{MinAttempts: 50, Probes: probes, OpenFor: time.Second, Now: clock.Now})
	var calls atomic.Int64
	run := func(op func(context.Context) error, n int) []error {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for range workers {
			wg.Go(func() {
				for range n {
					err := Do(context.Background(), &Simple{MaxAttempts: 2, Backoff: Constant(0)}, func(ctx context.Context) error {
						calls.Add(1)
						return op(ctx)
					}, WithBreaker(b))
					_ = b.State("")
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errs
	}
	consistent := func() {
		t.Helper()
		sc := b.scopes.peek("")
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if sc.passed < 0 || len(sc.out)+sc.passed > probes {
			t.Fatalf("probe places: %d taken, %d passed, of %d", len(sc.out), sc.passed, probes)
		}
	}

	// Healthy with a few failures: stays closed.
	var n atomic.Int64
	run(func(context.Context) error {
		if n.Add(1)%5 == 0 {
			return errBrk500
		}
		return nil
	}, 100)
	if got := b.State(""); got != BreakerClosed {
		t.Fatalf("20%% failures: %v", got)
	}
	// An outage, once the successes have left the window: opens, and the
	// calls after it are refused.
	clock.Advance(11 * time.Second)
	errs := run(func(context.Context) error { return errBrk500 }, 20)
	if got := b.State(""); got != BreakerOpen {
		t.Fatalf("outage: %v", got)
	}
	if !errors.Is(errs[len(errs)-1], ErrCircuitOpen) {
		t.Fatalf("last call of the outage: %v, want ErrCircuitOpen", errs[len(errs)-1])
	}
	consistent()
	before := calls.Load()
	for _, err := range run(func(context.Context) error { return nil }, 20) {
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("while open: %v", err)
		}
	}
	if calls.Load() != before {
		t.Fatalf("%d operations ran while the circuit was open", calls.Load()-before)
	}
	// Half-open: exactly `probes` operations run, all at once, the others
	// are refused; then the probes succeed and close it.
	clock.Advance(time.Second)
	release := make(chan struct{})
	var inFlight atomic.Int64
	go func() {
		for inFlight.Load() < probes {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // let the refusals happen
		consistent()
		close(release)
	}()
	before = calls.Load()
	refusals := 0
	for _, err := range run(func(context.Context) error {
		inFlight.Add(1)
		<-release
		return nil
	}, 1) {
		if errors.Is(err, ErrCircuitOpen) {
			refusals++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load() - before; got != probes || refusals != workers-probes {
		t.Fatalf("half-open: %d operations ran, %d refused; want %d and %d", got, refusals, probes, workers-probes)
	}
	if got := b.State(""); got != BreakerClosed {
		t.Fatalf("after the probes: %v", got)
	}
	consistent()
	// Closed again, and every call goes through.
	for _, err := range run(func(context.Context) error { return nil }, 50) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestBreakerAllocations: a closed breaker allocates nothing.
func TestBreakerAllocations(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	s := NewStandard(StandardOptions{})
	for _, opts := range [][]Option{
		{WithBreaker(NewBreaker(BreakerOptions{})), Unmarked()},
		{WithBreaker(NewBreaker(BreakerOptions{})), Scope("svc"), Unmarked()},
	} {
		_ = Do(ctx, s, succeed, opts...)
		if got := testing.AllocsPerRun(1000, func() { _ = Do(ctx, s, succeed, opts...) }); got != 0 {
			t.Errorf("%v allocations per call with a closed breaker, want 0", got)
		}
	}
	// A refusal costs what any give-up does: the *Error.
	fail := func(context.Context) error { return errBrk500 }
	giveUp := testing.AllocsPerRun(1000, func() { _ = Do(ctx, &No{}, fail, Unmarked()) })
	b := NewBreaker(BreakerOptions{MinAttempts: 1, OpenFor: time.Hour})
	_ = Do(ctx, &No{}, fail, WithBreaker(b))
	opts := []Option{WithBreaker(b), Unmarked()}
	if got := testing.AllocsPerRun(1000, func() { _ = Do(ctx, s, succeed, opts...) }); got > giveUp {
		t.Errorf("%v allocations per refusal, want at most %v, a give-up's", got, giveUp)
	}
}

// TestBreakerOptionAndState: WithBreaker(nil) is the zero Option; the
// states' names.
func TestBreakerOptionAndState(t *testing.T) {
	if _, b, ok := begin(nil, []Option{WithBreaker(nil)}); !ok || b != nil {
		t.Error("WithBreaker(nil) is not the zero Option")
	}
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open", 7: "BreakerState(7)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

// TestBreakerAllowRules: a loop of one's own through Allow, Done and Delay
// meets every rule of the breaker, in virtual time: it opens at the rate
// once the window holds MinAttempts and the sequential test agrees,
// refuses while open and says for how long, lets Probes through after
// OpenFor, doubles OpenFor when a probe fails, closes when they succeed;
// the verdicts that count as neither do not count.
func TestBreakerAllowRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		b := NewBreaker(BreakerOptions{MinAttempts: 4, OpenFor: 2 * time.Second, MaxOpenFor: 5 * time.Second, Probes: 2})
		attempt := func(err error) error {
			tk, refusal := b.Allow("svc")
			if refusal != nil {
				return refusal
			}
			tk.Done(ctx, err)
			return nil
		}
		state := func(want BreakerState, delay time.Duration) {
			t.Helper()
			if got := b.State("svc"); got != want {
				t.Fatalf("State = %v, want %v", got, want)
			}
			if got := b.Delay("svc"); got != delay {
				t.Fatalf("Delay = %v, want %v", got, delay)
			}
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		for range 10 { // neither: none of them counts
			for _, err := range []error{errBrk404, errBrk429, errors.New("unclassified"), context.Canceled} {
				if refusal := attempt(err); refusal != nil {
					t.Fatal(refusal)
				}
			}
			tk, _ := b.Allow("svc")
			tk.Done(cancelled, errBrk500) // the caller had given up
		}
		state(BreakerClosed, 0)
		_ = attempt(nil)
		_ = attempt(errBrk500)
		_ = attempt(errBrkTimeout)
		state(BreakerClosed, 0) // 2 of 3: too few attempts
		for range 4 {
			_ = attempt(errBrk500)
		}
		state(BreakerClosed, 0) // 6 of 7: five failures more than successes
		_ = attempt(errBrk500)
		state(BreakerOpen, 2*time.Second) // 7 of 8: six more, as the sequential test asks

		if err := attempt(nil); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("while open: %v, want ErrCircuitOpen", err)
		}
		time.Sleep(1500 * time.Millisecond)
		state(BreakerOpen, 500*time.Millisecond)
		time.Sleep(500 * time.Millisecond)
		state(BreakerHalfOpen, 0)

		// Two probes, and nothing else, go through; one fails: open for
		// twice as long.
		p1, err1 := b.Allow("svc")
		p2, err2 := b.Allow("svc")
		if _, err3 := b.Allow("svc"); err1 != nil || err2 != nil || !errors.Is(err3, ErrCircuitOpen) {
			t.Fatalf("half-open: %v, %v, %v; want two probes and a refusal", err1, err2, err3)
		}
		p1.Done(ctx, nil)
		state(BreakerHalfOpen, 0)
		p2.Done(ctx, errBrk500)
		state(BreakerOpen, 4*time.Second)
		time.Sleep(4 * time.Second)
		_ = attempt(errBrk500)
		state(BreakerOpen, 5*time.Second) // 8 s, capped at MaxOpenFor

		// Probes that succeed close it, with a fresh window: three failures
		// are too few to open it again.
		time.Sleep(5 * time.Second)
		_ = attempt(nil)
		state(BreakerHalfOpen, 0)
		_ = attempt(nil)
		state(BreakerClosed, 0)
		for range 3 {
			_ = attempt(errBrk500)
		}
		state(BreakerClosed, 0)
		_ = attempt(errBrk500)
		state(BreakerOpen, 2*time.Second) // OpenFor back to its start
		if got := b.State("other"); got != BreakerClosed {
			t.Fatalf("another scope: %v", got)
		}
	})
}

// TestBreakerAllowIsDo: Allow, Done and Delay are Do's consultation. Two
// breakers, one consulted through Do with WithBreaker and one through a
// loop of the test's own, see the same random calls (successes, the
// service's failures, throttles, client faults; retries with waits) in
// virtual time, and agree on every refusal, on the attempts made and on
// their states throughout.
func TestBreakerAllowIsDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		opts := BreakerOptions{MinAttempts: 5, Window: 4 * time.Second, OpenFor: 500 * time.Millisecond, MaxOpenFor: 2 * time.Second, Probes: 2}
		viaDo, own := NewBreaker(opts), NewBreaker(opts)
		rng := rand.New(rand.NewPCG(1, 2))
		// Healthy spells and outages in turn, each with some of every kind.
		healthy := []error{nil, nil, nil, nil, nil, nil, nil, nil, errBrk500, errBrk429, errBrk404}
		outage := []error{nil, errBrk500, errBrk500, errBrkTimeout, errBrk429, errBrk404}
		const wait = 300 * time.Millisecond
		s := &Simple{MaxAttempts: 3, Backoff: Constant(wait)}
		for call := range 3000 {
			// The outcomes of this call's attempts, the same for both.
			outcomes := healthy
			if call/200%2 == 1 {
				outcomes = outage
			}
			var errs [3]error
			for i := range errs {
				errs[i] = outcomes[rng.IntN(len(outcomes))]
			}
			type outcome struct {
				n    int           // attempts; -n-1 if refused after n
				took time.Duration // until the call returned
			}
			done := make(chan outcome)
			start := time.Now()
			go func() {
				n := 0
				err := Do(ctx, s, func(context.Context) error { n++; return errs[n-1] }, WithBreaker(viaDo), Unmarked())
				if errors.Is(err, ErrCircuitOpen) {
					n = -n - 1
				}
				done <- outcome{n, time.Since(start)}
			}()
			n := ownLoop(ctx, own, s, errs[:])
			mine := outcome{n, time.Since(start)}
			if got := <-done; got != mine {
				t.Fatalf("call %d: Do made %d attempts in %v, the own loop %d in %v (negative: refused after -n-1)", call, got.n, got.took, mine.n, mine.took)
			}
			if a, b := viaDo.State(""), own.State(""); a != b {
				t.Fatalf("call %d: Do's breaker %v, the own loop's %v", call, a, b)
			}
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
	})
}

// ownLoop is Do's loop for strategy s, written with Allow, Done and Delay:
// the attempts it made, or -n-1 if the breaker refused after n.
func ownLoop(ctx context.Context, b *Breaker, s *Simple, errs []error) int {
	if b.Delay("") > 0 {
		return -1
	}
	for n := 0; ; n++ {
		tk, err := b.Allow("")
		if err != nil {
			return -n - 1
		}
		err = errs[n]
		tk.Done(ctx, err)
		if err == nil {
			return n + 1
		}
		wait, refused := s.Next(n, 0, err)
		if refused != nil {
			return n + 1
		}
		if b.Delay("") > wait {
			return -n - 2
		}
		time.Sleep(wait)
	}
}

// TestBreakerDelayIsRefuses: Delay says what the loop's own early refusal
// reads, for any wait: a retry whose wait ends before the circuit lets
// probes through is refused.
func TestBreakerDelayIsRefuses(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1, OpenFor: time.Second})
	_ = k.call("s", errBrk500)
	for step := range 25 {
		d := k.b.Delay("s")
		for _, wait := range []time.Duration{0, time.Nanosecond, 100 * time.Millisecond, 999 * time.Millisecond, time.Second} {
			if got, want := k.b.at("s").refuses(wait), d > wait; got != want {
				t.Fatalf("step %d: Delay %v, refuses(%v) = %v", step, d, wait, got)
			}
		}
		k.clock.Advance(50 * time.Millisecond)
	}
}

// TestBreakerAllowNil: a nil Breaker allows everything; the zero ticket
// reports to nothing; Delay and State create no scope; a nil context is
// the background one.
func TestBreakerAllowNil(t *testing.T) {
	var b *Breaker
	tk, err := b.Allow("x")
	if err != nil || tk != (BreakerTicket{}) {
		t.Fatalf("nil breaker: %v, %v", tk, err)
	}
	tk.Done(context.Background(), errBrk500)
	tk.Done(nil, errBrk500) //nolint:staticcheck // a nil context must not panic
	if b.Delay("x") != 0 || b.State("x") != BreakerClosed {
		t.Fatal("a nil breaker is not closed")
	}

	b = NewBreaker(BreakerOptions{MinAttempts: 1})
	if b.Delay("new") != 0 || b.State("new") != BreakerClosed || b.scopes.peek("new") != nil {
		t.Fatal("Delay or State created a scope, or it is not closed")
	}
	tk, _ = b.Allow("new")
	tk.Done(nil, errBrk500) //nolint:staticcheck // a nil context: the failure counts
	if b.State("new") != BreakerOpen {
		t.Fatalf("a failure reported with a nil context: %v, want open", b.State("new"))
	}
}

// TestBreakerAllowConcurrent: goroutines consult one breaker through
// Allow and Done while others read Delay and State (run it with -race).
// Half-open, exactly Probes tickets are given at once, and the probe
// bookkeeping stays consistent.
func TestBreakerAllowConcurrent(t *testing.T) {
	const (
		workers = 16
		probes  = 3
	)
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		b := NewBreaker(BreakerOptions{MinAttempts: 10, Probes: probes, OpenFor: time.Second})
		var fail atomic.Bool
		run := func(rounds int) (granted, refusedN int64) {
			var g, r atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range rounds {
						if w%4 == 0 {
							_, _ = b.Delay(""), b.State("")
							continue
						}
						tk, err := b.Allow("")
						if err != nil {
							r.Add(1)
							continue
						}
						g.Add(1)
						var outcome error
						if fail.Load() || i%7 == 0 {
							outcome = errBrk500
						}
						tk.Done(ctx, outcome)
					}
				})
			}
			wg.Wait()
			return g.Load(), r.Load()
		}
		if _, refused := run(100); refused != 0 || b.State("") != BreakerClosed {
			t.Fatalf("1 failure in 7: %d refused, %v", refused, b.State(""))
		}
		time.Sleep(11 * time.Second) // the successes leave the window
		fail.Store(true)
		run(50)
		if b.State("") != BreakerOpen || b.Delay("") != time.Second {
			t.Fatalf("an outage: %v, Delay %v; want open for 1s", b.State(""), b.Delay(""))
		}
		time.Sleep(time.Second)

		// Half-open: all the workers ask at once; probes get tickets.
		var (
			wg      sync.WaitGroup
			tickets = make(chan BreakerTicket, workers)
			refused atomic.Int64
		)
		for range workers {
			wg.Go(func() {
				if tk, err := b.Allow(""); err == nil {
					tickets <- tk
				} else {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		close(tickets)
		if len(tickets) != probes || refused.Load() != workers-probes {
			t.Fatalf("half-open: %d tickets, %d refused; want %d and %d", len(tickets), refused.Load(), probes, workers-probes)
		}
		for tk := range tickets {
			wg.Go(func() { tk.Done(ctx, nil) })
		}
		wg.Wait()
		sc := b.scopes.peek("")
		sc.mu.Lock()
		taken, passed := len(sc.out), sc.passed
		sc.mu.Unlock()
		if b.State("") != BreakerClosed || taken != 0 || passed != 0 {
			t.Fatalf("after the probes: %v, %d taken, %d passed", b.State(""), taken, passed)
		}
	})
}

// TestBreakerAllowAllocations: a closed breaker's Allow and Done allocate
// nothing.
func TestBreakerAllowAllocations(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	b := NewBreaker(BreakerOptions{})
	for _, scope := range []string{"", "svc"} {
		tk, _ := b.Allow(scope)
		tk.Done(ctx, nil)
		if got := testing.AllocsPerRun(1000, func() {
			tk, err := b.Allow(scope)
			if err == nil {
				tk.Done(ctx, nil)
			}
			_ = b.Delay(scope)
		}); got != 0 {
			t.Errorf("scope %q: %v allocations per attempt, want 0", scope, got)
		}
	}
}

// A LongPoll poller refused by a half-open circuit whose probe is out waits
// until the probe's place is handed out again, or until its deadline if
// sooner, rather than spinning against the circuit while the probe runs.
func TestBreakerLongPollWaitsForTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const openFor = 5 * time.Second
		b := NewBreaker(BreakerOptions{MinAttempts: 1, OpenFor: openFor})
		_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b))
		time.Sleep(openFor)
		release := make(chan struct{})
		probed := make(chan struct{})
		go func() {
			defer close(probed)
			_ = Do(t.Context(), &No{}, func(context.Context) error { <-release; return nil }, WithBreaker(b))
		}()
		synctest.Wait() // the probe holds the one place
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := Do(ctx, &No{}, func(context.Context) error { return nil }, WithBreaker(b), LongPoll())
		waited := time.Since(start)
		close(release)
		<-probed
		if !errors.Is(err, ErrCircuitOpen) || waited != 3*time.Second {
			t.Fatalf("a LongPoll poller refused while the probe runs returned %v after %v, want ErrCircuitOpen at its 3 s deadline", err, waited)
		}
	})
}

// TestBreakerRefusedFor: RefusedFor is what a poller of its own waits,
// and what LongPoll waits: Delay while the circuit is open, the probe's
// time while half-open with its one place taken (where Delay is 0), 0
// once Allow lets an attempt through again; it creates no scope.
func TestBreakerRefusedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const openFor = 5 * time.Second
		var nilB *Breaker
		b := NewBreaker(BreakerOptions{MinAttempts: 1, OpenFor: openFor})
		if nilB.RefusedFor("s") != 0 || b.RefusedFor("s") != 0 || b.scopes.peek("s") != nil {
			t.Fatal("RefusedFor of a nil breaker, or of a scope not seen, is not 0, or created the scope")
		}
		_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b), Scope("s"))
		if got, d := b.RefusedFor("s"), b.Delay("s"); got != openFor || d != openFor {
			t.Fatalf("open: RefusedFor %v, Delay %v; want both %v", got, d, openFor)
		}
		time.Sleep(openFor)
		probe, err := b.Allow("s")
		if err != nil {
			t.Fatalf("half-open: the probe was refused: %v", err)
		}
		if _, err := b.Allow("s"); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("half-open with the probe out: a second attempt was let through (%v)", err)
		}
		if got, d := b.RefusedFor("s"), b.Delay("s"); got <= 0 || d != 0 {
			t.Fatalf("half-open with the probe out: RefusedFor %v, Delay %v; want RefusedFor > 0, Delay 0", got, d)
		}
		time.Sleep(b.RefusedFor("s"))
		if got := b.RefusedFor("s"); got != 0 {
			t.Fatalf("after RefusedFor's wait: RefusedFor %v, want 0", got)
		}
		if tk, err := b.Allow("s"); err != nil {
			t.Fatalf("after RefusedFor's wait Allow refused: %v", err)
		} else {
			tk.Release()
		}
		probe.Done(t.Context(), nil) // late: its place was handed out again
	})
}

// TestBreakerTicketReportedTwiceDecidesOnce: a probe's ticket decides once.
// A Release deferred in case the attempt is not made, run after the
// attempt's Done or after WithTicket's loop reported it, frees no second
// place (ten such probes once let eleven through at once with Probes 1),
// and one probe's success reported twice does not close a circuit that asks
// for two.
func TestBreakerTicketReportedTwiceDecidesOnce(t *testing.T) {
	t.Run("Release after the verdict", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{})
		k.probing()
		for i := range 10 {
			func() {
				tk, err := k.b.Allow("")
				if err != nil || !tk.Probe() {
					t.Fatalf("probe %d: %v, a probe's: %v", i, err, tk.Probe())
				}
				defer tk.Release() // in case the attempt is not made
				if i%2 == 0 {
					tk.Done(context.Background(), errBrk404) // neither: the place is freed
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				_ = Do(ctx, &No{}, func(ctx context.Context) error { cancel(); return ctx.Err() }, WithBreaker(k.b), WithTicket(tk))
			}()
		}
		out := 0
		for range 20 {
			if tk, err := k.b.Allow(""); err == nil && tk.Probe() {
				out++
			}
		}
		if out != 1 {
			t.Fatalf("%d probes let through at once with Probes 1", out)
		}
	})
	t.Run("a success reported twice", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{Probes: 2})
		k.probing()
		tk, err := k.b.Allow("")
		if err != nil || !tk.Probe() {
			t.Fatalf("%v, a probe's: %v", err, tk.Probe())
		}
		tk.Done(context.Background(), nil)
		tk.Done(context.Background(), nil)
		k.want("", BreakerHalfOpen)
		second, err := k.b.Allow("")
		if err != nil || !second.Probe() {
			t.Fatalf("the second probe: %v, a probe's: %v", err, second.Probe())
		}
		second.Done(context.Background(), nil)
		k.want("", BreakerClosed)
	})
}

// TestBreakerNestedLoopsCountEachRequestOnce: an application's retry.Do
// with WithBreaker(b) around an inner retry.Do with the same b: the outer
// attempt whose failure is the inner loop's counts nothing more. With
// MinAttempts 4, three outer attempts make three requests and leave the
// circuit closed; counted by both loops, the second opened it and the
// third was refused. Three loops that retry, all with b: each request is
// still counted once.
func TestBreakerNestedLoopsCountEachRequestOnce(t *testing.T) {
	for _, depth := range []int{2, 3} {
		perOuter := 1 // requests per outer attempt
		if depth == 3 {
			perOuter = 2 // the middle loop makes two attempts
		}
		b := NewBreaker(BreakerOptions{MinAttempts: 3*perOuter + 1, Window: time.Minute})
		requests := 0
		inner := func(ctx context.Context) error {
			return Do(ctx, &No{}, func(context.Context) error {
				requests++
				return errBrk500
			}, WithBreaker(b))
		}
		op := func(ctx context.Context) error {
			if err := inner(ctx); err != nil {
				return Transient(err) // the application's own judgement
			}
			return nil
		}
		if depth == 3 {
			middle := op
			op = func(ctx context.Context) error {
				if err := Do(ctx, &Simple{MaxAttempts: 2, Backoff: Constant(0)}, middle, WithBreaker(b)); err != nil {
					return Transient(err)
				}
				return nil
			}
		}
		err := Do(context.Background(), &Simple{MaxAttempts: 3, Backoff: Constant(0)}, op, WithBreaker(b))
		if requests != 3*perOuter || errors.Is(err, ErrCircuitOpen) || b.State("") != BreakerClosed {
			t.Fatalf("%d loops: %d requests, %v, circuit %v; want %d requests, each counted once", depth, requests, err, b.State(""), 3*perOuter)
		}
		_ = inner(context.Background())
		if b.State("") != BreakerOpen {
			t.Fatalf("%d loops: one request more left the circuit %v, want open", depth, b.State(""))
		}
	}
}
