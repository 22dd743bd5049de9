package forrst_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// TestClientBreakerOutage: a Forrst server that answers UNAVAILABLE opens
// the Client's circuit; while it is open, calls fail at once with
// retry.ErrCircuitOpen and the server sees nothing; after OpenFor (in the
// bubble's virtual time) a failed probe opens it again for twice as long,
// and once the server is back a successful probe closes it.
func TestClientBreakerOutage(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var s forrst.Server
	s.Register("inventory.get", func(context.Context, json.RawMessage) (any, error) {
		if down.Load() {
			return nil, forrst.Fail(forrst.CodeUnavailable, "down")
		}
		return map[string]bool{"ok": true}, nil
	})
	var hits atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		s.ServeHTTP(w, r)
	}))
	virtual(t, func(t *testing.T, hc *http.Client, _ *stamps) {
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: 10 * time.Second})
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(3), Breaker: b}
		ctx := context.Background()
		call := func() error { return c.Call(ctx, "inventory.get", nil, nil) }
		refused := func(when string) {
			t.Helper()
			before := hits.Load()
			err := call()
			var re *retry.Error
			if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &re) || re.Attempts != 0 {
				t.Fatalf("%s: %v, want retry.ErrCircuitOpen after 0 attempts", when, err)
			}
			if got := hits.Load() - before; got != 0 {
				t.Fatalf("%s: the server saw %d requests", when, got)
			}
		}

		for i := 0; b.State(srv.URL) != retry.BreakerOpen; i++ {
			if i == 5 {
				t.Fatalf("the circuit did not open after %d failed calls (%d requests)", i, hits.Load())
			}
			wantCallError(t, call(), forrst.CodeUnavailable, 503)
		}
		for range 5 {
			refused("open")
		}

		time.Sleep(10 * time.Second)
		before := hits.Load()
		err := call()
		wantCallError(t, err, forrst.CodeUnavailable, 503)
		if !errors.Is(err, retry.ErrCircuitOpen) || hits.Load()-before != 1 {
			t.Fatalf("failed probe: %v after %d requests, want one request, then the retry refused", err, hits.Load()-before)
		}
		time.Sleep(10 * time.Second)
		refused("open again, 10 s into a 20 s spell")

		down.Store(false)
		time.Sleep(10 * time.Second)
		var out struct{ OK bool }
		if err := c.Call(ctx, "inventory.get", nil, &out); err != nil || !out.OK {
			t.Fatalf("probe once the server is back: %v, %+v", err, out)
		}
		if st := b.State(srv.URL); st != retry.BreakerClosed {
			t.Fatalf("after a successful probe: %v, want closed", st)
		}
	})
}

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
