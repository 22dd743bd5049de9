package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
)

// allowedTimeout: the server's permission to retry a timeout.
func allowedTimeout(t *testing.T, in Integration) {
	// End to end with the integration's own strategy: a timeout the server
	// allows a retry of is retried, and the call succeeds on attempt 2.
	t.Run("ZeroConfig", func(t *testing.T) {
		srv := in.Serve(t, func(n int) Answer {
			if n == 1 {
				return AllowedTimeout
			}
			return OK
		})
		in.inTime(t, func(t *testing.T) {
			out := srv.Client(t, Config{})(context.Background())
			if out.Answer != OK || srv.Calls() != 2 || (out.Attempts >= 0 && out.Attempts != 2) {
				t.Fatalf("%+v after %d calls; want success on attempt 2", out, srv.Calls())
			}
		})
	})

	// The permission is what makes the difference: in a scope where every
	// attempt times out, Adaptive refuses to retry a timeout (the service
	// looks overloaded), and still retries the one the server allowed.
	// Streaks and client-side throttling are off so that only the timeout
	// rule decides.
	t.Run("Adaptive", func(t *testing.T) {
		var allowedAt atomic.Int64 // the call the server allows a retry of; 0 = none yet
		srv := in.Serve(t, func(n int) Answer {
			switch at := int(allowedAt.Load()); {
			case at == 0 || n < at:
				return Timeout
			case n == at:
				return AllowedTimeout
			}
			return OK
		})
		in.inTime(t, func(t *testing.T) {
			call := srv.Client(t, Config{Strategy: retry.NewAdaptive(retry.AdaptiveOptions{Streak: -1, Multiplier: -1})})
			ctx := context.Background()
			for i := range 12 {
				if out := call(ctx); out.Answer != Timeout {
					t.Fatalf("call %d: %+v, want the timeout", i+1, out)
				}
			}
			before := srv.Calls()
			out := call(ctx)
			if out.Answer != Timeout || out.Attempts != 1 || !errors.Is(out.Reason, retry.ErrNotRetryable) || srv.Calls() != before+1 {
				t.Fatalf("a timeout without permission where every attempt times out: %+v after %d calls, want no retry", out, srv.Calls()-before)
			}
			before = srv.Calls()
			allowedAt.Store(int64(before + 1))
			out = call(ctx)
			if out.Answer != OK || srv.Calls() != before+2 || (out.Attempts >= 0 && out.Attempts != 2) {
				t.Fatalf("a timeout with the server's permission there: %+v after %d calls, want success on attempt 2", out, srv.Calls()-before)
			}
		})
	})
}
