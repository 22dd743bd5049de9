package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerOpensAtRateAndMinimum: the circuit opens when the window holds
// MinAttempts counted attempts and the failed share reaches FailureRate,
// not before.
func TestBreakerOpensAtRateAndMinimum(t *testing.T) {
	t.Run("minimum", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{MinAttempts: 10})
		for i := range 9 {
			if err := k.call("", errBrk500); !errors.Is(err, errBrk500) {
				t.Fatalf("failure %d: %v", i+1, err)
			}
		}
		k.want("", BreakerClosed) // 9 of 9 failed, but fewer than 10 attempts
		_ = k.call("", errBrk500)
		k.want("", BreakerOpen)
		k.refused("")
	})
	t.Run("rate", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{MinAttempts: 10, FailureRate: 0.5})
		for range 10 {
			_ = k.call("", nil)
		}
		for range 15 {
			_ = k.call("", errBrk500)
		}
		k.want("", BreakerClosed) // 15 of 25: above the rate, but five failures more than successes
		_ = k.call("", errBrk500)
		k.want("", BreakerOpen) // 16 of 26: six more, as the sequential test asks at 0.5
	})
	t.Run("rate 0.8", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{MinAttempts: 5, FailureRate: 0.8})
		for range 5 {
			_ = k.call("", errBrk500)
		}
		k.want("", BreakerOpen) // 5 of 5: an outage opens at MinAttempts
		k = newBrk(t, BreakerOptions{MinAttempts: 5, FailureRate: 0.8})
		_ = k.call("", nil)
		for range 12 {
			_ = k.call("", errBrk500)
		}
		k.want("", BreakerClosed)     // 12 of 13
		_ = k.call("", errBrkTimeout) // a timeout is a failure too
		k.want("", BreakerClosed)     // 13 of 14
		_ = k.call("", errBrk500)
		k.want("", BreakerOpen) // 14 of 15: 14 ln(0.9/0.7) - ln(0.3/0.1) >= ln 9
	})
	t.Run("window slides", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{MinAttempts: 10, Window: 10 * time.Second})
		for range 9 {
			_ = k.call("", errBrk500)
		}
		k.clock.Advance(11 * time.Second) // they left the window
		_ = k.call("", errBrk500)
		k.want("", BreakerClosed)
	})
	t.Run("rate above 1 never opens", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{MinAttempts: 2, FailureRate: 1.5})
		for range 50 {
			_ = k.call("", errBrk500)
		}
		k.want("", BreakerClosed)
	})
}

// TestBreakerNeitherCounts: an answered client fault, a throttle, the
// caller's own cancellation or deadline, and an error nobody classified
// count as neither success nor failure.
func TestBreakerNeitherCounts(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 4})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	neither := map[string]func() error{
		"client fault": func() error { return k.call("", errBrk404) },
		"throttle":     func() error { return k.call("", errBrk429) },
		"server throttle": func() error {
			return k.call("", WithInfo(errors.New("503 slow down"), Info{Safety: Safe, Throttle: true, Fault: FaultServer}))
		},
		"unclassified":     func() error { return k.call("", errors.New("boom")) },
		"permanent":        func() error { return k.call("", Permanent(errors.New("bad request"))) },
		"context.Canceled": func() error { return k.call("", context.Canceled) },
		"caller's deadline during the attempt": func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			return Do(ctx, &No{}, func(ctx context.Context) error {
				<-ctx.Done()
				return Transient(fmt.Errorf("wrapped: %w", ctx.Err()))
			}, WithBreaker(k.b))
		},
		"caller cancelled during the attempt": func() error {
			ctx, cancel := context.WithCancel(context.Background())
			return Do(ctx, &No{}, func(context.Context) error {
				cancel()
				return errBrk500 // a server fault, but the caller had given up
			}, WithBreaker(k.b))
		},
		"caller cancelled before": func() error {
			return Do(cancelled, &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(k.b))
		},
	}
	for name, call := range neither {
		for range 50 {
			if err := call(); err == nil {
				t.Fatalf("%s: nil error", name)
			}
		}
		k.want("", BreakerClosed)
	}
	// None of them counted as a success either: three failures are three
	// of three counted attempts, and a fourth opens the circuit.
	for range 3 {
		_ = k.call("", errBrk500)
	}
	k.want("", BreakerClosed)
	_ = k.call("", errBrk500)
	k.want("", BreakerOpen)
}

// TestBreakerAttemptsOwnDeadlineFails: an attempt that ends with a
// deadline of its own while the caller waits (a context.WithTimeout inside
// the operation) is a timeout, a failure, however the operation marked it:
// a service that never answers opens the circuit.
func TestBreakerAttemptsOwnDeadlineFails(t *testing.T) {
	for _, mark := range []func(error) error{func(err error) error { return err }, Transient} {
		k := newBrk(t, BreakerOptions{MinAttempts: 4})
		for range 4 {
			_ = k.call("", mark(fmt.Errorf("wrapped: %w", context.DeadlineExceeded)))
		}
		k.want("", BreakerOpen)
	}
}

// TestBreakerVerdict: how a failed attempt is judged.
func TestBreakerVerdict(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want verdict
	}{
		{"server fault", ctx, errBrk500, verdictFailure},
		{"unsafe server fault", ctx, WithInfo(errBrk500, Info{Safety: Unsafe, Fault: FaultServer}), verdictFailure},
		{"timeout", ctx, errBrkTimeout, verdictFailure},
		{"attempt timeout", ctx, &attemptTimeoutError{err: context.DeadlineExceeded}, verdictFailure},
		{"attempt timeout, marked Transient", ctx, &attemptTimeoutError{err: Transient(context.DeadlineExceeded)}, verdictFailure},
		{"the attempt's own deadline, marked Transient", ctx, &attemptTimeoutError{err: Transient(context.DeadlineExceeded), own: true}, verdictFailure},
		{"the caller's deadline, marked Transient", ctx, Transient(context.DeadlineExceeded), verdictNone},
		{"refused connection", ctx, dial, verdictFailure},
		{"transient", ctx, Transient(errors.New("x")), verdictFailure},
		{"client fault", ctx, errBrk404, verdictNone},
		{"throttle", ctx, errBrk429, verdictNone},
		{"canceled", ctx, context.Canceled, verdictNone},
		{"unclassified", ctx, errors.New("x"), verdictNone},
		{"caller gave up", done, errBrk500, verdictNone},
	}
	for _, tt := range tests {
		if got := verdictOf(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: verdict %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBreakerProbes: after OpenFor, Probes attempts go through and others
// are refused; all succeed: closed.
func TestBreakerProbes(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1, OpenFor: time.Second, Probes: 2})
	_ = k.call("", errBrk500)
	k.want("", BreakerOpen)
	k.clock.Advance(999 * time.Millisecond)
	k.want("", BreakerOpen)
	k.refused("")
	k.clock.Advance(time.Millisecond)
	k.want("", BreakerHalfOpen)

	// Two probes in flight at once; a third call is refused meanwhile.
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			errs[i] = Do(context.Background(), &No{}, func(context.Context) error {
				started <- struct{}{}
				<-release
				return nil
			}, WithBreaker(k.b))
		})
	}
	<-started
	<-started
	k.want("", BreakerHalfOpen)
	k.refused("")
	close(release)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	k.want("", BreakerClosed)
}

// TestBreakerProbeFailureDoubles: a failed probe opens the circuit again
// for twice the previous OpenFor, at most MaxOpenFor; closing resets it
// and the window.
func TestBreakerProbeFailureDoubles(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 3, OpenFor: time.Second, MaxOpenFor: 5 * time.Second})
	for range 3 {
		_ = k.call("", errBrk500)
	}
	k.want("", BreakerOpen)
	for _, spell := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		k.clock.Advance(spell - time.Millisecond)
		k.refused("")
		k.clock.Advance(time.Millisecond)
		k.want("", BreakerHalfOpen)
		if err := k.call("", errBrk500); !errors.Is(err, errBrk500) {
			t.Fatalf("probe: %v, want its failure", err)
		}
		k.want("", BreakerOpen) // for twice as long, up to 5 s
	}
	k.clock.Advance(5 * time.Second)
	if err := k.call("", nil); err != nil {
		t.Fatal(err)
	}
	k.want("", BreakerClosed)

	// A fresh window: the failures before the circuit opened are gone
	// (the window is 10 s and only 17 s passed, most of it open).
	for range 2 {
		_ = k.call("", errBrk500)
	}
	k.want("", BreakerClosed)
	_ = k.call("", errBrk500)
	k.want("", BreakerOpen)
	// OpenFor was reset: one second again.
	k.clock.Advance(time.Second)
	k.want("", BreakerHalfOpen)
}

// TestBreakerProbeNeitherFreesItsPlace: a probe that ends as neither (a
// client fault, a throttle, the caller's cancellation) decides nothing and
// lets another probe through.
func TestBreakerProbeNeitherFreesItsPlace(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1, OpenFor: time.Second})
	_ = k.call("", errBrk500)
	k.clock.Advance(time.Second)
	for _, err := range []error{errBrk404, errBrk429, errors.New("unclassified")} {
		if got := k.call("", err); !errors.Is(got, err) {
			t.Fatalf("probe: %v, want %v", got, err)
		}
		k.want("", BreakerHalfOpen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_ = Do(ctx, &No{}, func(context.Context) error { cancel(); return errBrk500 }, WithBreaker(k.b))
	k.want("", BreakerHalfOpen)
	if err := k.call("", nil); err != nil {
		t.Fatal(err)
	}
	k.want("", BreakerClosed)
}

// TestBreakerAbandonedProbe: a probe that never reports (its operation
// panicked, or hangs) does not wedge the circuit: its place is handed out
// again OpenFor after it was taken, and its late verdict decides nothing.
func TestBreakerAbandonedProbe(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1, OpenFor: time.Second})
	_ = k.call("", errBrk500)
	k.clock.Advance(time.Second)

	func() {
		defer func() { _ = recover() }()
		_ = Do(context.Background(), &No{}, func(context.Context) error { panic("probe lost") }, WithBreaker(k.b))
	}()
	k.want("", BreakerHalfOpen)
	k.refused("") // the lost probe holds the place...
	k.clock.Advance(time.Second)

	// ...until OpenFor passed: a new probe goes, and hangs.
	hung, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- Do(context.Background(), &No{}, func(context.Context) error {
			close(hung)
			<-release
			return errBrk500 // a late failure
		}, WithBreaker(k.b))
	}()
	<-hung
	k.refused("")
	k.clock.Advance(time.Second)
	if err := k.call("", nil); err != nil { // the next round's probe
		t.Fatal(err)
	}
	k.want("", BreakerClosed)
	close(release)
	<-done
	k.want("", BreakerClosed) // the hung probe's round had ended
}

// TestBreakerScopesIndependent: one scope's circuit opening refuses no
// call in another.
func TestBreakerScopesIndependent(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 2})
	for range 2 {
		_ = k.call("a", errBrk500)
	}
	k.want("a", BreakerOpen)
	k.want("b", BreakerClosed)
	k.want("", BreakerClosed)
	for range 2 {
		if err := k.call("b", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 7 {
		_ = k.call("b", errBrk500)
	}
	k.want("b", BreakerClosed) // 7 of 9 failed, five more than succeeded
	_ = k.call("", errBrk500)
	k.want("", BreakerClosed) // 1 attempt: each scope counts its own
	k.refused("a")
	_ = k.call("b", errBrk500)
	k.want("b", BreakerOpen) // 8 of 10
	k.want("", BreakerClosed)
}

// TestBreakerAttemptTimeoutCounts: an attempt cut short by AttemptTimeout
// is a timeout, and counts as a failure.
func TestBreakerAttemptTimeoutCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 2})
		for range 2 {
			_ = Do(t.Context(), &No{}, func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			}, WithBreaker(b), AttemptTimeout(time.Second))
		}
		if got := b.State(""); got != BreakerOpen {
			t.Fatalf("after two attempt timeouts: %v, want open", got)
		}
	})
}

// An open spell of centuries, set or reached by doubling, saturates: the
// circuit stays open, where the end of the spell wrapped into the past and
// let the next call through.
func TestBreakerHugeSpellsStayOpen(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	for name, opts := range map[string]BreakerOptions{
		"OpenFor the longest Duration": {MinAttempts: 1, OpenFor: math.MaxInt64},
		"doubled past the longest":     {MinAttempts: 1, OpenFor: 2 * century, MaxOpenFor: math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBreaker(opts)
				fail := func(context.Context) error { return errBrk500 }
				_ = Do(t.Context(), &No{}, fail, WithBreaker(b))
				if opts.OpenFor < math.MaxInt64 {
					time.Sleep(opts.OpenFor)
					_ = Do(t.Context(), &No{}, fail, WithBreaker(b)) // the probe fails: the spell doubles
				}
				if s := b.State(""); s != BreakerOpen {
					t.Fatalf("state %v, want open", s)
				}
				if err := Do(t.Context(), &No{}, func(context.Context) error { return nil }, WithBreaker(b)); !errors.Is(err, ErrCircuitOpen) {
					t.Fatalf("a call went through the open circuit: %v", err)
				}
			})
		})
	}
}

// Failures of attempts that began before the circuit opened, reported after
// its probe closed it again (requests that hung when the service stalled
// and time out after it recovered), say nothing of the service now: they
// do not reopen it. Through Do's and DoValue's shortcuts, through the loop
// (DoValue with options), and through a BreakerTicket, as the integrations
// hold one.
func TestBreakerStaleFailuresDoNotReopen(t *testing.T) {
	stalled := map[string]func(b *Breaker, release <-chan struct{}){
		"Do": func(b *Breaker, release <-chan struct{}) {
			_ = Do(context.Background(), &No{}, func(context.Context) error { <-release; return errBrkTimeout }, WithBreaker(b))
		},
		"DoValue": func(b *Breaker, release <-chan struct{}) {
			_, _ = DoValue(context.Background(), &No{}, func(context.Context) (int, error) { <-release; return 0, errBrkTimeout }, WithBreaker(b))
		},
		"DoValue in a loop": func(b *Breaker, release <-chan struct{}) {
			_, _ = DoValue(context.Background(), &Simple{MaxAttempts: 1}, func(context.Context) (int, error) { <-release; return 0, errBrkTimeout }, WithBreaker(b), OnRetry(func(context.Context, int, time.Duration, error) {}))
		},
		"a ticket": func(b *Breaker, release <-chan struct{}) {
			ticket, err := b.Allow("")
			if err != nil {
				panic(err)
			}
			<-release
			ticket.Done(context.Background(), errBrkTimeout)
		},
	}
	for name, stall := range stalled {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBreaker(BreakerOptions{}) // the defaults: 20 attempts, half failed, open 5 s
				release := make(chan struct{})
				var wg sync.WaitGroup
				for range 20 {
					wg.Go(func() { stall(b, release) })
				}
				synctest.Wait() // 20 attempts hang in a closed circuit
				for range 20 {
					_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b))
				}
				if s := b.State(""); s != BreakerOpen {
					t.Fatalf("after 20 failures: %v, want open", s)
				}
				time.Sleep(5 * time.Second)
				if err := Do(t.Context(), &No{}, func(context.Context) error { return nil }, WithBreaker(b)); err != nil {
					t.Fatalf("the probe: %v", err)
				}
				close(release)
				wg.Wait()
				if s := b.State(""); s != BreakerClosed {
					t.Fatalf("the hung attempts' late timeouts left the recovered circuit %v, want closed", s)
				}
				// Failures of attempts begun since still count.
				for range 20 {
					_ = Do(t.Context(), &No{}, func(context.Context) error { return errBrk500 }, WithBreaker(b))
				}
				if s := b.State(""); s != BreakerOpen {
					t.Fatalf("20 fresh failures left it %v, want open", s)
				}
			})
		})
	}
}

// TestBreakerDefaultSpellFollowsTheRate: at its defaults an open circuit
// stays open for the time its scope takes to make five attempts at the
// rate its window saw, from 10 ms to 1 s, and a failed probe opens it for
// as long again: it does not double, so that a service that is back is
// seen within five attempts' time however long it was down. A set
// MaxOpenFor doubles it, up to MaxOpenFor.
func TestBreakerDefaultSpellFollowsTheRate(t *testing.T) {
	for _, tc := range []struct {
		failures int
		opts     BreakerOptions
		spells   []time.Duration
	}{
		// The circuit opens on its MinAttempts-th failure, all at once:
		// its window holds that many attempts.
		{failures: 500, opts: BreakerOptions{MinAttempts: 500}, spells: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}},
		{failures: 25, opts: BreakerOptions{MinAttempts: 25}, spells: []time.Duration{time.Second, time.Second}},                             // 2 s, capped
		{failures: 100000, opts: BreakerOptions{MinAttempts: 100000}, spells: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}}, // 0.5 ms, floored
		{failures: 500, opts: BreakerOptions{MinAttempts: 500, MaxOpenFor: 300 * time.Millisecond}, spells: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}},
	} {
		synctest.Test(t, func(t *testing.T) {
			b := NewBreaker(tc.opts)
			for range tc.failures {
				tk, err := b.Allow("")
				if err != nil {
					break
				}
				tk.Done(t.Context(), errBrk500)
			}
			for i, want := range tc.spells {
				if got := b.Delay(""); got != want {
					t.Fatalf("%d failures, %+v: spell %d is %v, want %v", tc.failures, tc.opts, i+1, got, want)
				}
				time.Sleep(want)
				tk, err := b.Allow("")
				if err != nil || !tk.Probe() {
					t.Fatalf("%d failures: after spell %d: %v, want a probe", tc.failures, i+1, err)
				}
				tk.Done(t.Context(), errBrk500)
			}
		})
	}
}
