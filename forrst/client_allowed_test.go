package forrst_test

// Tests of retry.Info.Allowed: the server's own permission to retry, which
// guidance it sent with "allowed": true, or a Retry-After header, gives, and
// the client's default table does not. The answers come from loopback
// servers: hand-written documents where the test needs a precise one, the
// package's Server end to end.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
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
