package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// clientFaults: answers that blame the caller are accepts: the server is at
// work.
func clientFaults(t *testing.T, in Integration) {
	// End to end with the integration's own strategy: three client faults
	// in a row leave the next call's server failure its retry.
	t.Run("ZeroConfig", func(t *testing.T) {
		srv := in.Serve(t, func(n int) Answer {
			switch {
			case n <= 3:
				return ClientFault
			case n == 4:
				return Unavailable
			}
			return OK
		})
		in.inTime(t, func(t *testing.T) {
			call := srv.Client(t, Config{})
			for i := range 3 {
				if out := call(context.Background()); out.Answer != ClientFault || out.Attempts != 1 || srv.Calls() != i+1 {
					t.Fatalf("call %d: %+v after %d calls in all, want the client fault once", i+1, out, srv.Calls())
				}
			}
			out := call(context.Background())
			if out.Answer != OK || srv.Calls() != 5 || (out.Attempts >= 0 && out.Attempts != 2) {
				t.Fatalf("after three client faults: %+v after %d calls in all; want success on attempt 2", out, srv.Calls())
			}
		})
	})

	// A breaker counts them as successes: a server that answers every call
	// with a client fault keeps its circuit closed, and every call reaches
	// it.
	t.Run("Breaker", func(t *testing.T) {
		srv := in.Serve(t, always(ClientFault))
		in.inTime(t, func(t *testing.T) {
			var clock retrytest.Clock
			b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.Now})
			call := srv.Client(t, Config{Strategy: simple(3), Breaker: b})
			for i := range 10 {
				if out := call(context.Background()); out.Answer != ClientFault {
					t.Fatalf("call %d: %+v, want the client fault", i+1, out)
				}
			}
			if s := b.State(srv.Scope()); s != retry.BreakerClosed || srv.Calls() != 10 {
				t.Fatalf("after 10 client faults: circuit %v, %d calls; want closed and 10", s, srv.Calls())
			}
		})
	})
}
