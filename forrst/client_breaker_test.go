package forrst_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// TestClientBreakerJudgesTheCodeNotOnlyTheStatus: a server (or a gateway)
// that answers every call with HTTP 200 and a document whose error is
// UNAVAILABLE is failing, and the circuit opens, as for the 503 a Forrst
// server sends with it; an error code of the application's in a 200 (one
// the Forrst codes do not list) blames nobody, and the circuit stays
// closed.
func TestClientBreakerJudgesTheCodeNotOnlyTheStatus(t *testing.T) {
	for _, tc := range []struct {
		code  string
		opens bool
	}{
		{"UNAVAILABLE", true},
		{"INTERNAL_ERROR", true},
		{"INSUFFICIENT_FUNDS", false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			srv, _ := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, failDoc(tc.code, `{"allowed":false}`))
			})
			b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4})
			c := &forrst.Client{URL: srv.URL, Strategy: noWait(1), Breaker: b}
			for range 10 {
				err := c.Call(context.Background(), "f", nil, nil)
				var ce *forrst.CallError
				if !errors.As(err, &ce) && !errors.Is(err, retry.ErrCircuitOpen) {
					t.Fatalf("%v, want the *CallError or a refusal", err)
				}
			}
			if opened := b.State(srv.URL) == retry.BreakerOpen; opened != tc.opens {
				t.Fatalf("after 10 answers of %s with HTTP 200: circuit %v, want open %v", tc.code, b.State(srv.URL), tc.opens)
			}
		})
	}
}
