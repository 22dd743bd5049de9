package otelretry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/trace"
)

// spanOf records the span each attempt's request carries, as an HTTP
// instrumentation below the retrying transport (otelhttp's Transport) would
// see it: its spans nest under that one.
type spanOf struct {
	base http.RoundTripper
	mu   sync.Mutex
	ids  []trace.SpanID
}

func (s *spanOf) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.ids = append(s.ids, trace.SpanFromContext(req.Context()).SpanContext().SpanID())
	s.mu.Unlock()
	return s.base.RoundTrip(req)
}

// TestHTTPTransport: a GET through httpretry.Transport against a server that
// answers 503 twice, then 200.
func TestHTTPTransport(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	r := newRig(t)
	inst := r.inst(otelretry.WithHTTPConventions())
	seen := &spanOf{base: http.DefaultTransport}
	client := &http.Client{Transport: &httpretry.Transport{
		Base:     seen,
		Strategy: &retry.Simple{Backoff: retry.Constant(0)},
		Scope:    func(*http.Request) string { return "api" },
		Options:  []retry.Option{inst.Option()},
	}}
	ctx, span := r.caller(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	span.End()
	if string(body) != "ok" || hits.Load() != 3 {
		t.Fatalf("body %q after %d requests, want ok after 3", body, hits.Load())
	}

	caller := r.ended("caller")[0]
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	want := []trace.SpanID{caller.SpanContext().SpanID(), attempts[0].SpanContext().SpanID(), attempts[1].SpanContext().SpanID()}
	if len(seen.ids) != 3 {
		t.Fatalf("%d requests sent, want 3", len(seen.ids))
	}
	for i := range want {
		if seen.ids[i] != want[i] {
			t.Errorf("request %d carries span %v, want %v (the caller's for the first, then the attempt's)", i+1, seen.ids[i], want[i])
		}
	}
	for i, a := range attempts {
		if got, want := attr(a, "http.request.resend_count"), []string{"1", "2"}[i]; got != want {
			t.Errorf("attempt span %d: http.request.resend_count = %q, want %s", i+2, got, want)
		}
		if a.Parent().SpanID() != caller.SpanContext().SpanID() {
			t.Errorf("attempt span %d is not a child of the caller's", i+2)
		}
	}
	wantEvents(t, caller,
		"retry.attempt_failed{error.type=transient,retry.attempt=1,retry.error=httpretry: server answered 503 Service Unavailable}",
		"retry.wait{error.type=transient,retry.attempt=1,retry.delay=0}",
		"retry.attempt_failed{error.type=transient,retry.attempt=2,retry.error=httpretry: server answered 503 Service Unavailable}",
		"retry.wait{error.type=transient,retry.attempt=2,retry.delay=0}",
	)
	wantMetrics(t, r.metrics(t), map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=api}":                      "1",
		"retry.client.attempts{error.type=transient,retry.outcome=failure,retry.scope=api}": "2",
		"retry.client.retries{retry.outcome=success,retry.scope=api}":                       "1",
		"retry.client.retries{error.type=transient,retry.outcome=failure,retry.scope=api}":  "1",
		"retry.client.call.retries{retry.outcome=success,retry.scope=api}":                  "1/2",
		"retry.client.retry.delay{error.type=transient,retry.scope=api}":                    "2/0",
		"retry.client.call.retry_delay{retry.outcome=success,retry.scope=api}":              "1/0",
	})
}

// TestForrstClient: a Forrst call through forrst.Client against a real
// forrst.Server on loopback, whose function is UNAVAILABLE twice.
func TestForrstClient(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("orders.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		if runs.Add(1) <= 2 {
			return nil, forrst.Fail(forrst.CodeUnavailable, "not yet")
		}
		return map[string]string{"id": "42"}, nil
	}, forrst.WithGuidance(forrst.CodeUnavailable, forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 4}))
	srv := httptest.NewServer(&s)
	defer srv.Close()

	r := newRig(t)
	inst := r.inst(otelretry.WithHTTPConventions())
	c := &forrst.Client{URL: srv.URL, Strategy: &retry.Simple{Backoff: retry.Constant(0), MaxAttempts: 4},
		Options: []retry.Option{inst.Option()}}
	ctx, span := r.caller(context.Background())
	var got map[string]string
	err := c.Call(ctx, "orders.get", nil, &got)
	span.End()
	if err != nil || got["id"] != "42" {
		t.Fatalf("Call = %v, %v", got, err)
	}
	caller := r.ended("caller")[0]
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, a := range attempts {
		if attr(a, "retry.scope") != srv.URL || attr(a, "http.request.resend_count") != []string{"1", "2"}[i] {
			t.Errorf("attempt span %d: scope %q, resend count %q", i+2, attr(a, "retry.scope"), attr(a, "http.request.resend_count"))
		}
	}
	evs := events(caller)
	if len(evs) != 4 {
		t.Fatalf("caller's events %q, want a failure and a wait per retry", evs)
	}
	m := r.metrics(t)
	for k, v := range map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=" + srv.URL + "}":     "1",
		"retry.client.call.retries{retry.outcome=success,retry.scope=" + srv.URL + "}": "1/2",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
}
