package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// breaker runs a server through an outage behind a client with a Breaker:
// the circuit opens, calls then fail fast with retry.ErrCircuitOpen and
// reach the server only as probes, a failed probe opens it again for twice
// as long, and successful probes close it. Another server's circuit stays
// closed throughout.
func breaker(t *testing.T, in Integration) {
	var down atomic.Bool
	srv := in.Serve(t, func(int) Answer {
		if down.Load() {
			return Unavailable
		}
		return OK
	})
	other := in.Serve(t, always(OK)) // a scope of its own
	in.inTime(t, func(t *testing.T) {
		var clock retrytest.Clock
		b := retry.NewBreaker(retry.BreakerOptions{
			MinAttempts: 4, FailureRate: 0.5, Window: time.Minute,
			OpenFor: time.Second, MaxOpenFor: 10 * time.Second, Probes: 2,
			Now: clock.Now,
		})
		cfg := Config{Strategy: simple(3), Breaker: b}
		call, callOther := srv.Client(t, cfg), other.Client(t, cfg)
		ctx := context.Background()
		scope := srv.Scope()
		refused := func(when string) {
			t.Helper()
			before := srv.Calls()
			out := call(ctx)
			var re *retry.Error
			if out.Answer != None || out.Attempts != 0 || !errors.Is(out.Reason, retry.ErrCircuitOpen) ||
				!errors.Is(out.Err, retry.ErrCircuitOpen) || !errors.As(out.Err, &re) || re.Attempts != 0 {
				t.Fatalf("%s: %+v; want a refusal, a *retry.Error of retry.ErrCircuitOpen and no attempt", when, out)
			}
			if got := srv.Calls(); got != before {
				t.Fatalf("%s: the server saw %d calls while the circuit was open", when, got-before)
			}
		}
		answered := func(when string, want Answer) Outcome {
			t.Helper()
			out := call(ctx)
			if out.Answer != want {
				t.Fatalf("%s: %+v, want %v", when, out, want)
			}
			return out
		}

		for range 3 {
			answered("healthy", OK)
		}

		// The outage: calls fail until the circuit opens.
		down.Store(true)
		for i := 0; b.State(scope) != retry.BreakerOpen; i++ {
			if i == 10 {
				t.Fatalf("the circuit did not open after %d failed calls (%d attempts)", i, srv.Calls())
			}
			answered("during the outage", Unavailable)
		}
		for range 5 {
			refused("open")
		}
		if out := callOther(ctx); out.Answer != OK || other.Calls() != 1 {
			t.Fatalf("another server while this one's circuit is open: %+v after %d calls", out, other.Calls())
		}

		// OpenFor passes while the server is still down: one probe goes
		// through, fails, and the circuit opens again, for 2 s this time.
		clock.Advance(time.Second)
		if s := b.State(scope); s != retry.BreakerHalfOpen {
			t.Fatalf("after OpenFor: %v, want half-open", s)
		}
		before := srv.Calls()
		if out := answered("failed probe", Unavailable); out.Attempts != 1 || !errors.Is(out.Reason, retry.ErrCircuitOpen) ||
			(out.Err != nil && !errors.Is(out.Err, retry.ErrCircuitOpen)) {
			t.Fatalf("failed probe: %+v; want the failure after 1 attempt, the retry refused by the circuit", out)
		}
		if got := srv.Calls() - before; got != 1 {
			t.Fatalf("failed probe: the server saw %d calls, want 1", got)
		}
		clock.Advance(time.Second)
		refused("open again, 1 s into a 2 s spell")

		// The server comes back; after the doubled spell, two probes close it.
		down.Store(false)
		clock.Advance(time.Second)
		for range 2 {
			answered("probe", OK)
		}
		if s := b.State(scope); s != retry.BreakerClosed {
			t.Fatalf("after 2 successful probes: %v, want closed", s)
		}
		before = srv.Calls()
		for range 3 {
			answered("closed again", OK)
		}
		if got := srv.Calls() - before; got != 3 {
			t.Fatalf("closed again: the server saw %d of 3 calls", got)
		}
	})
}

// breakerSharedWithTheCaller runs an application's loop, with a Breaker,
// around a client of the integration that consults the same Breaker: each
// request the server saw is one verdict, however many loops share the
// breaker. With MinAttempts 4, three outer attempts against a server that
// always fails reach it three times (one request each, by the rule of one
// layer) and leave the circuit closed with three failures counted; the
// fourth request opens it. Counted by both loops, the second outer attempt
// opened it and the third was refused.
func breakerSharedWithTheCaller(t *testing.T, in Integration) {
	srv := in.Serve(t, always(Unavailable))
	in.inTime(t, func(t *testing.T) {
		var clock retrytest.Clock
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, Window: time.Minute, Now: clock.Now})
		call := srv.Client(t, Config{Breaker: b})
		scope := srv.Scope()
		outer := func() error {
			return retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
				return call(ctx).appErr()
			}, retry.WithBreaker(b), retry.Scope(scope))
		}
		err := outer()
		if got := srv.Calls(); got != 3 || errors.Is(err, retry.ErrCircuitOpen) || b.State(scope) != retry.BreakerClosed {
			t.Fatalf("three outer attempts: %d requests, %v, circuit %v; want 3 requests, each counted once, and a closed circuit", got, err, b.State(scope))
		}
		_ = outer()
		if got := srv.Calls(); got != 4 || b.State(scope) != retry.BreakerOpen {
			t.Fatalf("a fourth request: %d requests in all, circuit %v; want it to open the circuit after the 4th", got, b.State(scope))
		}
	})
}
