package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/retrytest"
)

var (
	errBrk500     = WithInfo(errors.New("500"), Info{Safety: Safe, Fault: FaultServer})
	errBrk404     = WithInfo(errors.New("404"), Info{Fault: FaultClient})
	errBrk429     = WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
	errBrkTimeout = WithInfo(errors.New("timed out"), Info{Safety: Safe, Timeout: true})
)

// brk is a Breaker on a hand clock, with the calls the tests make through
// it: one attempt each (No), so that each call is one verdict.
type brk struct {
	t     *testing.T
	b     *Breaker
	clock *handClock
	calls int // operations called
}

func newBrk(t *testing.T, opts BreakerOptions) *brk {
	c := newHandClock()
	opts.Now = c.Now
	return &brk{t: t, b: NewBreaker(opts), clock: c}
}

// call makes one call of one attempt in scope whose operation returns err,
// and returns the call's error.
func (k *brk) call(scope string, err error) error {
	return Do(context.Background(), &No{}, func(context.Context) error {
		k.calls++
		return err
	}, WithBreaker(k.b), Scope(scope))
}

// probing opens the empty scope's circuit with 20 failures and waits out
// the default open spell, so that the next attempts are its probes.
func (k *brk) probing() {
	k.t.Helper()
	for range 20 {
		_ = k.call("", errBrk500)
	}
	k.want("", BreakerOpen)
	k.clock.Advance(DefaultBreakerOpenFor)
}
func (k *brk) want(scope string, want BreakerState) {
	k.t.Helper()
	if got := k.b.State(scope); got != want {
		k.t.Fatalf("State(%q) = %v, want %v", scope, got, want)
	}
}

// refused checks that a call in scope is refused without calling the
// operation.
func (k *brk) refused(scope string) {
	k.t.Helper()
	before := k.calls
	err := k.call(scope, nil)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrCircuitOpen) || e.Attempts != 0 || e.Err != nil {
		k.t.Fatalf("call in %q: %v, want an *Error with ErrCircuitOpen after 0 attempts", scope, err)
	}
	if k.calls != before {
		k.t.Fatalf("call in %q: the operation was called while the circuit was open", scope)
	}
}

// handClock is a clock tests move by hand: the kit's.
type handClock = retrytest.Clock

func newHandClock() *handClock { return retrytest.NewClock(time.Unix(1_700_000_000, 0)) }

var (
	errAdaptive503     = WithInfo(errors.New("503"), Info{Safety: Safe, Fault: FaultServer})
	errAdaptive429     = WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
	errAdaptiveTimeout = WithInfo(errors.New("timed out"), Info{Safety: Safe, Timeout: true, Fault: FaultServer})
	noRefusal          = func() float64 { return 0.999999 } // client-side throttling refuses only at probability 1
)

// failOnce runs one failed attempt of a new request in scope and reports
// whether its retry was granted, spending the granted token.
func failOnce(t *testing.T, a *Adaptive, scope string, err error) error {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	next, refused := a.RefreshToken(tok, err)
	if refused == nil {
		_ = a.ReleaseToken(next)
	}
	return refused
}
func passOnce(t *testing.T, a *Adaptive, scope string) {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
}
