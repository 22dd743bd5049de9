package forrst_test

// Tests of retry.Info.Allowed: the server's own permission to retry, which
// guidance it sent with "allowed": true, or a Retry-After header, gives, and
// the client's default table does not. The answers come from loopback
// servers: hand-written documents where the test needs a precise one, the
// package's Server end to end.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// The classification of one failed answer, as the client's strategy gets
// it, and as the *CallError reports it.
func TestAllowedOnlyWhenTheServerSaysSo(t *testing.T) {
	// answer writes a failed document with code, retry data ("" for none)
	// and, if retryAfter is set, a Retry-After header.
	answer := func(status int, code, data, retryAfter string, extra ...string) func(int, http.ResponseWriter, *http.Request) {
		return func(_ int, w http.ResponseWriter, _ *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, failDoc(code, data, extra...))
		}
	}
	notForrst := func(status int, retryAfter string) func(int, http.ResponseWriter, *http.Request) {
		return func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "the proxy says no")
		}
	}
	const (
		immediate = `{"allowed":true,"strategy":"immediate"}`
		refused   = `{"allowed":false}`
		exhausted = `{"urn":"urn:forrst:ext:rate-limit","data":{"limit":1,"used":1,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":5,"unit":"second"}}}`
	)
	for _, tc := range []struct {
		name     string
		handler  func(int, http.ResponseWriter, *http.Request)
		noKey    bool
		allowed  bool
		timeout  bool
		fromDoc  bool // a *CallError, not an HTTP failure
		fromSrvr bool // CallError.FromServer
	}{
		{"DEADLINE_EXCEEDED, the server allows, immediate", answer(504, "DEADLINE_EXCEEDED", immediate, ""), false, true, true, true, true},
		{"DEADLINE_EXCEEDED, the extension's example", answer(504, "DEADLINE_EXCEEDED", `{"allowed":true,"strategy":"immediate","max_attempts":1}`, ""), false, true, true, true, true},
		{"DEADLINE_EXCEEDED, no guidance: the table's", answer(504, "DEADLINE_EXCEEDED", "", ""), false, false, true, true, false},
		{"DEADLINE_EXCEEDED, the server allows, no key", answer(504, "DEADLINE_EXCEEDED", immediate, ""), true, false, true, true, true},
		{"UNAVAILABLE, the server allows, exponential", answer(503, "UNAVAILABLE", `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"}}`, ""), false, true, false, true, true},
		{"UNAVAILABLE, no guidance, Retry-After: 0", answer(503, "UNAVAILABLE", "", "0"), false, true, false, true, false},
		{"UNAVAILABLE, no guidance, Retry-After: soon", answer(503, "UNAVAILABLE", "", "soon"), false, false, false, true, false},
		{"UNAVAILABLE, no guidance, window used up", answer(503, "UNAVAILABLE", "", "", exhausted), false, false, false, true, false},
		{"UNAVAILABLE, broken guidance", answer(503, "UNAVAILABLE", `{"allowed":true,"strategy":"sometimes"}`, ""), false, false, false, true, false},
		{"UNAVAILABLE, the server refuses, Retry-After: 0", answer(503, "UNAVAILABLE", refused, "0"), false, false, false, true, true},
		{"NOT_FOUND, the server refuses", answer(404, "NOT_FOUND", refused, ""), false, false, false, true, true},
		{"a proxy's 503, Retry-After: 0", notForrst(503, "0"), false, true, false, false, false},
		{"a proxy's 504, Retry-After: 0", notForrst(504, "0"), false, true, true, false, false},
		{"a proxy's 503 without Retry-After", notForrst(503, ""), false, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := hostile(t, tc.handler)
			var (
				mu    sync.Mutex
				infos []retry.Info
			)
			c := &forrst.Client{URL: srv.URL, Strategy: noWait(1), NoIdempotencyKey: tc.noKey,
				Options: []retry.Option{retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
					mu.Lock()
					infos = append(infos, retry.Classify(err))
					mu.Unlock()
				})}}
			err := c.Call(context.Background(), "f", nil, nil)
			mu.Lock()
			defer mu.Unlock()
			if err == nil || n.Load() != 1 || len(infos) != 1 {
				t.Fatalf("err %v after %d requests, %d failed attempts seen", err, n.Load(), len(infos))
			}
			info := infos[0]
			if info.Allowed != tc.allowed || info.Timeout != tc.timeout {
				t.Errorf("%+v; want Allowed %v, Timeout %v", info, tc.allowed, tc.timeout)
			}
			if info.Allowed && info.Safety != retry.Safe {
				t.Errorf("Allowed on %v", info.Safety)
			}
			var ce *forrst.CallError
			if errors.As(err, &ce) != tc.fromDoc {
				t.Fatalf("err %v: a *CallError %v, want %v", err, ce != nil, tc.fromDoc)
			}
			if ce != nil && (ce.RetryInfo() != info || ce.FromServer != tc.fromSrvr) {
				t.Errorf("CallError: %+v, FromServer %v; the strategy got %+v, want FromServer %v", ce.RetryInfo(), ce.FromServer, info, tc.fromSrvr)
			}
		})
	}
}

// End to end with a zero-config client (its own retry.Adaptive): a
// DEADLINE_EXCEEDED whose guidance says {"allowed": true, "strategy":
// "immediate"} is retried, and the call succeeds on attempt 2.
func TestZeroConfigRetriesAnAllowedDeadlineExceeded(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "report", forrst.CodeDeadlineExceeded, 1, &runs,
		forrst.WithGuidance(forrst.CodeDeadlineExceeded, forrst.RetryData{Allowed: true, Strategy: forrst.Immediate}))
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc} // no Strategy
		var out struct{ OK bool }
		if err := c.Call(context.Background(), "report", nil, &out); err != nil {
			t.Fatal(err)
		}
		if !out.OK || runs.Load() != 2 || st.count() != 2 {
			t.Errorf("result %+v, runs %d, requests %d; want success on attempt 2", out, runs.Load(), st.count())
		}
	})
}

// End to end with a zero-config client: answers that blame the caller
// (NOT_FOUND, three in a row) show a server at work, so they leave the next
// call's UNAVAILABLE its retry.
func TestZeroConfigClientErrorsDoNotStopTheRetryOfAServerFailure(t *testing.T) {
	var lookups, runs atomic.Int32
	var s forrst.Server
	s.Register("lookup", func(context.Context, json.RawMessage) (any, error) {
		lookups.Add(1)
		return nil, forrst.Fail(forrst.CodeNotFound, "no such item")
	})
	flaky(&s, "inventory.get", forrst.CodeUnavailable, 1, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc} // no Strategy
		for i := range 3 {
			err := c.Call(context.Background(), "lookup", nil, nil)
			wantCallError(t, err, forrst.CodeNotFound, http.StatusNotFound)
			if lookups.Load() != int32(i+1) {
				t.Fatalf("lookup %d: %d runs, want one each", i+1, lookups.Load())
			}
		}
		if err := c.Call(context.Background(), "inventory.get", nil, nil); err != nil {
			t.Fatalf("after three NOT_FOUND answers: %v", err)
		}
		if runs.Load() != 2 || st.count() != 5 {
			t.Errorf("inventory.get ran %d times, %d requests in all; want 2 and 5", runs.Load(), st.count())
		}
	})
}

// The permission is what makes the difference: in a scope where every
// attempt times out, Adaptive refuses to retry a DEADLINE_EXCEEDED that
// came without guidance (the client's table allows it, the server said
// nothing), and still retries the one whose guidance the server sent.
// Streaks and client-side throttling are off so that only the timeout rule
// decides.
func TestAllowedTimeoutIsRetriedWhereOthersAreNot(t *testing.T) {
	var allow atomic.Bool
	srv, n := hostile(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		switch {
		case !allow.Load():
			w.WriteHeader(504)
			_, _ = io.WriteString(w, failDoc("DEADLINE_EXCEEDED", ""))
		case r.Header.Get("Retry-Attempt") == "":
			w.WriteHeader(504)
			_, _ = io.WriteString(w, failDoc("DEADLINE_EXCEEDED", `{"allowed":true,"strategy":"immediate"}`))
		default:
			_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"req_x","result":{"ok":true}}`)
		}
	})
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc,
			Strategy: retry.NewAdaptive(retry.AdaptiveOptions{Streak: -1, Multiplier: -1})}
		for range 12 {
			wantCallError(t, c.Call(context.Background(), "report", nil, nil), forrst.CodeDeadlineExceeded, 504)
		}
		before := n.Load()
		err := c.Call(context.Background(), "report", nil, nil)
		if !errors.Is(err, retry.ErrNotRetryable) || n.Load() != before+1 {
			t.Fatalf("DEADLINE_EXCEEDED without guidance where every attempt times out: %v after %d requests, want no retry", err, n.Load()-before)
		}
		allow.Store(true)
		before = n.Load()
		if err := c.Call(context.Background(), "report", nil, nil); err != nil || n.Load() != before+2 {
			t.Fatalf("DEADLINE_EXCEEDED with the server's guidance there: %v after %d requests, want success on attempt 2", err, n.Load()-before)
		}
	})
}
