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
		taken, passed := sc.taken, sc.passed
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
