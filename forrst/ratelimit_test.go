package forrst_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry/forrst"
)

// rateLimited is a server whose "ping" counts its calls, limited to 2 calls
// a minute per caller named by the X-Caller header.
func rateLimited(calls *atomic.Int32) *forrst.Server {
	s := &forrst.Server{RateLimit: &forrst.RateLimiter{
		Limit:  2,
		Window: time.Minute,
		Caller: func(r *http.Request) string { return r.Header.Get("X-Caller") },
	}}
	s.Register("ping", func(ctx context.Context, args json.RawMessage) (any, error) {
		calls.Add(1)
		return "pong", nil
	})
	return s
}

type rateData struct {
	Limit     int64           `json:"limit"`
	Used      int64           `json:"used"`
	Remaining int64           `json:"remaining"`
	Window    forrst.Duration `json:"window"`
	ResetsIn  forrst.Duration `json:"resets_in"`
	Scope     string          `json:"scope"`
	Warning   string          `json:"warning"`
}

func rateOf(t *testing.T, r reply) rateData {
	t.Helper()
	raw, ok := r.Ext[urnRateLimit]
	if !ok {
		t.Fatalf("no rate-limit extension:\n%s", r.Body)
	}
	var d rateData
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("rate-limit data %s: %v", raw, err)
	}
	return d
}

// Over loopback, in real time: the calls follow each other within a second,
// so the window has 59 or 60 whole seconds left.
func TestRateLimitOnTheWire(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, rateLimited(&calls))
	minute := forrst.Duration{Value: 60, Unit: "second"}

	r := post(t, srv.URL, requestDoc("req_1", "ping", ""), "X-Caller", "alice")
	d := rateOf(t, r)
	if r.Status != 200 || d.Limit != 2 || d.Used != 1 || d.Remaining != 1 || d.Window != minute || d.Scope == "" || d.Warning != "" {
		t.Errorf("first call: status %d, data %+v", r.Status, d)
	}
	if d.ResetsIn.Unit != "second" || d.ResetsIn.Value < 59 || d.ResetsIn.Value > 60 {
		t.Errorf("first call: resets_in %+v, want about 60 seconds", d.ResetsIn)
	}
	r = post(t, srv.URL, requestDoc("req_2", "ping", ""), "X-Caller", "alice")
	if d := rateOf(t, r); r.Status != 200 || d.Used != 2 || d.Remaining != 0 || d.Warning == "" {
		t.Errorf("second call: status %d, data %+v (the last call of a window carries a warning)", r.Status, d)
	}

	r = post(t, srv.URL, requestDoc("req_3", "ping", ""), "X-Caller", "alice")
	checkFailure(t, r, "req_3", 429, "RATE_LIMITED", "")
	d = rateOf(t, r)
	if d.Limit != 2 || d.Used != 2 || d.Remaining != 0 || d.Window != minute {
		t.Errorf("limited call: data %+v", d)
	}
	if d.ResetsIn.Unit != "second" || d.ResetsIn.Value < 59 || d.ResetsIn.Value > 60 {
		t.Fatalf("limited call: resets_in %+v", d.ResetsIn)
	}
	secs := strconv.FormatInt(d.ResetsIn.Value, 10)
	if ra := r.Header.Get("Retry-After"); ra != secs {
		t.Errorf("Retry-After = %q, want resets_in, %s", ra, secs)
	}
	wantJSON(t, "retry data", r.Ext[urnRetry],
		`{"allowed":true,"strategy":"fixed","after":{"value":`+secs+`,"unit":"second"},"max_attempts":3}`)
	var details struct {
		RetryAfter forrst.Duration `json:"retry_after"`
	}
	if err := json.Unmarshal(r.Errors[0].Details, &details); err != nil || details.RetryAfter != d.ResetsIn {
		t.Errorf("details %s: retry_after must equal resets_in (%v)", r.Errors[0].Details, err)
	}

	// Another caller has a window of its own.
	r = post(t, srv.URL, requestDoc("req_4", "ping", ""), "X-Caller", "bob")
	if d := rateOf(t, r); r.Status != 200 || d.Used != 1 || d.Remaining != 1 {
		t.Errorf("another caller: status %d, data %+v", r.Status, d)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the function ran %d times, want 3: a limited call must not run it", n)
	}
}

// In virtual time, with the server's clock in the bubble: the window's
// arithmetic, exactly.
func TestRateLimitWindowInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		s := rateLimited(&calls)
		sec := func(n int64) forrst.Duration { return forrst.Duration{Value: n, Unit: "second"} }
		call := func(id string) reply { return serveDirect(t, s, requestDoc(id, "ping", ""), "X-Caller", "alice") }

		if d := rateOf(t, call("r1")); d.Used != 1 || d.ResetsIn != sec(60) {
			t.Errorf("t=0: %+v", d)
		}
		time.Sleep(20 * time.Second)
		if d := rateOf(t, call("r2")); d.Used != 2 || d.Remaining != 0 || d.ResetsIn != sec(40) {
			t.Errorf("t=20s: %+v", d)
		}
		time.Sleep(15 * time.Second)
		r := call("r3")
		checkFailure(t, r, "r3", 429, "RATE_LIMITED", "")
		if d := rateOf(t, r); d.ResetsIn != sec(25) || d.Remaining != 0 {
			t.Errorf("t=35s: %+v", d)
		}
		if ra := r.Header.Get("Retry-After"); ra != "25" {
			t.Errorf("t=35s: Retry-After = %q, want 25", ra)
		}
		// The guidance waits for the window, not the table's 60 s.
		wantJSON(t, "t=35s: retry data", r.Ext[urnRetry],
			`{"allowed":true,"strategy":"fixed","after":{"value":25,"unit":"second"},"max_attempts":3}`)

		time.Sleep(24*time.Second + 500*time.Millisecond)
		r = call("r4")
		checkFailure(t, r, "r4", 429, "RATE_LIMITED", "")
		if d := rateOf(t, r); d.ResetsIn != sec(1) {
			t.Errorf("t=59.5s: resets_in %+v, want 1 s (rounded up)", d.ResetsIn)
		}
		if ra := r.Header.Get("Retry-After"); ra != "1" {
			t.Errorf("t=59.5s: Retry-After = %q, want 1", ra)
		}

		time.Sleep(500 * time.Millisecond) // the window ends at t=60s
		r = call("r5")
		if d := rateOf(t, r); r.Status != 200 || d.Used != 1 || d.Remaining != 1 || d.ResetsIn != sec(60) {
			t.Errorf("t=60s: status %d, %+v", r.Status, d)
		}
		if n := calls.Load(); n != 3 {
			t.Errorf("the function ran %d times, want 3", n)
		}
	})
}

// Without a Caller function, callers are told apart by their address.
func TestRateLimitDefaultCallerIsTheAddress(t *testing.T) {
	s := &forrst.Server{RateLimit: &forrst.RateLimiter{Limit: 1, Window: time.Hour}}
	s.Register("ping", func(ctx context.Context, args json.RawMessage) (any, error) { return "pong", nil })
	call := func(addr string) int {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(requestDoc("r", "ping", "")))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Code
	}
	if got := call("192.0.2.1:1000"); got != 200 {
		t.Errorf("first caller: %d", got)
	}
	if got := call("192.0.2.1:2000"); got != 429 {
		t.Errorf("same address, other port: %d, want 429", got)
	}
	if got := call("192.0.2.2:1000"); got != 200 {
		t.Errorf("other address: %d, want 200", got)
	}
}

func TestRateLimitZeroRejectsEverything(t *testing.T) {
	var calls atomic.Int32
	s := &forrst.Server{RateLimit: &forrst.RateLimiter{Limit: 0, Window: time.Minute}}
	s.Register("ping", func(ctx context.Context, args json.RawMessage) (any, error) { calls.Add(1); return "pong", nil })
	srv := newServer(t, s)
	r := post(t, srv.URL, requestDoc("r", "ping", ""))
	checkFailure(t, r, "r", 429, "RATE_LIMITED", "")
	if d := rateOf(t, r); d.Limit != 0 || d.Remaining != 0 {
		t.Errorf("data %+v", d)
	}
	if calls.Load() != 0 {
		t.Error("the function ran")
	}
}
