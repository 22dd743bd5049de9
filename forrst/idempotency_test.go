package forrst_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry/forrst"
)

type idemData struct {
	Key               string `json:"key"`
	Status            string `json:"status"`
	OriginalRequestID string `json:"original_request_id"`
	CachedAt          string `json:"cached_at"`
	ExpiresAt         string `json:"expires_at"`
}

func idemOf(t *testing.T, r reply) idemData {
	t.Helper()
	raw, ok := r.Ext[urnIdempotency]
	if !ok {
		t.Fatalf("no idempotency extension:\n%s", r.Body)
	}
	var d idemData
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("idempotency data %s: %v", raw, err)
	}
	return d
}

// charging registers "payments.charge", which counts its runs and answers
// with the run's number.
func charging(s *forrst.Server, runs *atomic.Int32) {
	s.Register("payments.charge", func(ctx context.Context, args json.RawMessage) (any, error) {
		return map[string]any{"charge": runs.Add(1)}, nil
	})
}

func TestIdempotentReplay(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	charging(&s, &runs)
	s.Register("refunds.create", func(ctx context.Context, args json.RawMessage) (any, error) {
		return map[string]any{"refund": runs.Add(1)}, nil
	})
	srv := newServer(t, &s)

	first := post(t, srv.URL, requestDoc("req_1", "payments.charge", `{"amount":1200,"currency":"EUR"}`, keyExt("order_123")))
	if first.Status != 200 {
		t.Fatalf("first call: %d\n%s", first.Status, first.Body)
	}
	wantJSON(t, "first result", first.Members["result"], `{"charge":1}`)
	d := idemOf(t, first)
	if d.Key != "order_123" || d.Status != "processed" || d.OriginalRequestID != "req_1" || d.CachedAt != "" {
		t.Errorf("first call's idempotency data: %+v", d)
	}
	if _, err := time.Parse(time.RFC3339, d.ExpiresAt); err != nil {
		t.Errorf("expires_at %q: %v", d.ExpiresAt, err)
	}

	// The same arguments, spaced and ordered differently.
	again := post(t, srv.URL, requestDoc("req_2", "payments.charge", `{ "currency": "EUR", "amount": 1200 }`, keyExt("order_123")))
	if again.Status != 200 {
		t.Fatalf("repeated call: %d\n%s", again.Status, again.Body)
	}
	wantJSON(t, "replayed result", again.Members["result"], `{"charge":1}`)
	wantJSON(t, "replay id", again.Members["id"], `"req_2"`)
	d = idemOf(t, again)
	if d.Key != "order_123" || d.Status != "cached" || d.OriginalRequestID != "req_1" {
		t.Errorf("replay's idempotency data: %+v", d)
	}
	if _, err := time.Parse(time.RFC3339, d.CachedAt); err != nil {
		t.Errorf("cached_at %q: %v", d.CachedAt, err)
	}
	if _, ok := again.Members["errors"]; ok {
		t.Errorf("a replayed success has errors:\n%s", again.Body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the function ran %d times, want 1", n)
	}

	// The key is scoped to the function: another function runs.
	other := post(t, srv.URL, requestDoc("req_3", "refunds.create", `{"amount":1200,"currency":"EUR"}`, keyExt("order_123")))
	wantJSON(t, "other function", other.Members["result"], `{"refund":2}`)
	if d := idemOf(t, other); d.Status != "processed" || d.OriginalRequestID != "req_3" {
		t.Errorf("other function's idempotency data: %+v", d)
	}
	// And to the version.
	v2 := `{"protocol":` + protocolJSON + `,"id":"req_4","call":{"function":"payments.charge","version":"2","arguments":{"amount":1200,"currency":"EUR"}},"extensions":[` + keyExt("order_123") + `]}`
	wantJSON(t, "other version", post(t, srv.URL, v2).Members["result"], `{"charge":3}`)
	// Without a key, every call runs.
	wantJSON(t, "no key", post(t, srv.URL, requestDoc("req_5", "payments.charge", `{"amount":1200,"currency":"EUR"}`)).Members["result"], `{"charge":4}`)
}

func TestIdempotencyProcessing(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	var s forrst.Server
	s.Register("slow", func(ctx context.Context, args json.RawMessage) (any, error) {
		runs.Add(1)
		entered <- struct{}{}
		<-release
		return "done", nil
	})
	srv := newServer(t, &s)

	var wg sync.WaitGroup
	var first reply
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = post(t, srv.URL, requestDoc("req_1", "slow", `{"a":1}`, keyExt("k1")))
	}()
	<-entered
	r := post(t, srv.URL, requestDoc("req_2", "slow", `{"a":1}`, keyExt("k1")))
	close(release)
	wg.Wait()

	checkFailure(t, r, "req_2", 409, "IDEMPOTENCY_PROCESSING", "")
	wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"second"},"max_attempts":3}`)
	wantJSON(t, "details", r.Errors[0].Details, `{"key":"k1","retry_after":{"value":1,"unit":"second"}}`)
	if first.Status != 200 {
		t.Errorf("the first call: %d\n%s", first.Status, first.Body)
	}
	third := post(t, srv.URL, requestDoc("req_3", "slow", `{"a":1}`, keyExt("k1")))
	if d := idemOf(t, third); third.Status != 200 || d.Status != "cached" || d.OriginalRequestID != "req_1" {
		t.Errorf("after the first finished: status %d, %+v", third.Status, d)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}

func TestIdempotencyConflict(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	charging(&s, &runs)
	srv := newServer(t, &s)
	post(t, srv.URL, requestDoc("req_1", "payments.charge", `{"amount":1200}`, keyExt("order_9")))
	r := post(t, srv.URL, requestDoc("req_2", "payments.charge", `{"amount":9900}`, keyExt("order_9")))
	checkFailure(t, r, "req_2", 409, "IDEMPOTENCY_CONFLICT", "")
	wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
	if d := idemOf(t, r); d.Key != "order_9" || d.Status != "conflict" || d.OriginalRequestID != "req_1" {
		t.Errorf("idempotency data: %+v", d)
	}
	var details struct {
		Key  string `json:"key"`
		Hash string `json:"original_arguments_hash"`
	}
	if err := json.Unmarshal(r.Errors[0].Details, &details); err != nil || details.Key != "order_9" || !strings.HasPrefix(details.Hash, "sha256:") {
		t.Errorf("details %s (%v)", r.Errors[0].Details, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1", n)
	}
}

// A failure the guidance allows retrying is not stored: the retry runs the
// function again. A final failure is stored and replayed like a result.
func TestIdempotencyStoresOnlyFinalOutcomes(t *testing.T) {
	var flaky, missing atomic.Int32
	var s forrst.Server
	s.Register("flaky", func(ctx context.Context, args json.RawMessage) (any, error) {
		if flaky.Add(1) == 1 {
			return nil, forrst.Fail("UNAVAILABLE", "try again")
		}
		return "ok", nil
	})
	s.Register("missing", func(ctx context.Context, args json.RawMessage) (any, error) {
		missing.Add(1)
		return nil, forrst.Fail("NOT_FOUND", "no such order")
	})
	srv := newServer(t, &s)

	r := post(t, srv.URL, requestDoc("req_1", "flaky", "", keyExt("k")))
	checkFailure(t, r, "req_1", 503, "UNAVAILABLE", "")
	r = post(t, srv.URL, requestDoc("req_2", "flaky", "", keyExt("k")))
	if r.Status != 200 || string(r.Members["result"]) != `"ok"` {
		t.Fatalf("retry: %d\n%s", r.Status, r.Body)
	}
	if d := idemOf(t, r); d.Status != "processed" || d.OriginalRequestID != "req_2" {
		t.Errorf("retry's idempotency data: %+v", d)
	}
	if n := flaky.Load(); n != 2 {
		t.Errorf("flaky ran %d times, want 2", n)
	}

	post(t, srv.URL, requestDoc("req_3", "missing", "", keyExt("k")))
	r = post(t, srv.URL, requestDoc("req_4", "missing", "", keyExt("k")))
	checkFailure(t, r, "req_4", 404, "NOT_FOUND", "no such order")
	if d := idemOf(t, r); d.Status != "cached" || d.OriginalRequestID != "req_3" {
		t.Errorf("replayed failure's idempotency data: %+v", d)
	}
	wantJSON(t, "replayed failure's retry data", r.Ext[urnRetry], `{"allowed":false}`)
	if n := missing.Load(); n != 1 {
		t.Errorf("missing ran %d times, want 1", n)
	}
}

func TestIdempotencyInvalidKeys(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	charging(&s, &runs)
	srv := newServer(t, &s)
	for _, key := range []string{"", strings.Repeat("k", 256), "has space", "semi;colon", "ключ"} {
		r := post(t, srv.URL, requestDoc("req_1", "payments.charge", "", keyExt(key)))
		checkFailure(t, r, "req_1", 400, "INVALID_ARGUMENTS", "")
		wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
	}
	for _, opts := range []string{
		`{"key":"k","ttl":{"value":31,"unit":"day"}}`,
		`{"key":"k","ttl":{"value":0,"unit":"second"}}`,
		`{"key":"k","color":"red"}`,
		`"k"`,
	} {
		r := post(t, srv.URL, requestDoc("req_1", "payments.charge", "", `{"urn":"urn:forrst:ext:idempotency","options":`+opts+`}`))
		checkFailure(t, r, "req_1", 400, "INVALID_ARGUMENTS", "")
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the function ran %d times with invalid keys", n)
	}
	if r := post(t, srv.URL, requestDoc("req_2", "payments.charge", "", keyExt(strings.Repeat("k", 255)))); r.Status != 200 {
		t.Errorf("a 255-character key: %d\n%s", r.Status, r.Body)
	}
}

func TestIdempotencyTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		s := &forrst.Server{IdempotencyTTL: time.Hour}
		charging(s, &runs)
		start := time.Now()
		rfc := func(d time.Duration) string { return start.Add(d).UTC().Format(time.RFC3339) }

		r := serveDirect(t, s, requestDoc("r1", "payments.charge", "", keyExt("k")))
		if d := idemOf(t, r); d.Status != "processed" || d.ExpiresAt != rfc(time.Hour) {
			t.Errorf("t=0: %+v, want expires_at %s", d, rfc(time.Hour))
		}
		time.Sleep(time.Hour - time.Second)
		r = serveDirect(t, s, requestDoc("r2", "payments.charge", "", keyExt("k")))
		if d := idemOf(t, r); d.Status != "cached" || d.OriginalRequestID != "r1" || d.CachedAt != rfc(0) || d.ExpiresAt != rfc(time.Hour) {
			t.Errorf("t=59m59s: %+v", d)
		}
		time.Sleep(time.Second)
		r = serveDirect(t, s, requestDoc("r3", "payments.charge", "", keyExt("k")))
		if d := idemOf(t, r); d.Status != "processed" || d.OriginalRequestID != "r3" {
			t.Errorf("t=1h, the key expired: %+v", d)
		}
		wantJSON(t, "t=1h result", r.Members["result"], `{"charge":2}`)

		// A ttl in the request beats the server's.
		ttl := `{"urn":"urn:forrst:ext:idempotency","options":{"key":"short","ttl":{"value":10,"unit":"second"}}}`
		serveDirect(t, s, requestDoc("r4", "payments.charge", "", ttl))
		time.Sleep(9 * time.Second)
		if d := idemOf(t, serveDirect(t, s, requestDoc("r5", "payments.charge", "", ttl))); d.Status != "cached" {
			t.Errorf("short ttl, 9 s later: %+v", d)
		}
		time.Sleep(time.Second)
		if d := idemOf(t, serveDirect(t, s, requestDoc("r6", "payments.charge", "", ttl))); d.Status != "processed" {
			t.Errorf("short ttl, 10 s later: %+v", d)
		}
		if n := runs.Load(); n != 4 {
			t.Errorf("the function ran %d times, want 4", n)
		}
	})
}

// A call still running is never forgotten, whatever its ttl: the store
// promises that "calls still running are never dropped", and a second call
// with the key while the first is in flight must get IDEMPOTENCY_PROCESSING
// (the idempotency extension's behaviour 3), not run the function again.
func TestIdempotencyKeyOfARunningCallDoesNotExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		var s forrst.Server
		s.Register("payments.charge", func(ctx context.Context, args json.RawMessage) (any, error) {
			n := runs.Add(1)
			time.Sleep(2 * time.Second) // a slow payment provider
			return map[string]any{"charge": n}, nil
		})
		ttl := `{"urn":"urn:forrst:ext:idempotency","options":{"key":"order_1","ttl":{"value":1,"unit":"second"}}}`
		done := make(chan reply)
		go func() { done <- serveDirect(t, &s, requestDoc("r1", "payments.charge", "", ttl)) }()
		time.Sleep(1500 * time.Millisecond)
		r := serveDirect(t, &s, requestDoc("r2", "payments.charge", "", ttl))
		<-done
		if r.code() != "IDEMPOTENCY_PROCESSING" {
			t.Errorf("a second call while the first runs: status %d, code %q, want IDEMPOTENCY_PROCESSING\n%s", r.Status, r.code(), r.Body)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the function ran %d times with one key, want 1", n)
		}
	})
}

// Guidance attached to one error with GuidanceFor is what the client sees,
// so it is also what decides whether the idempotency store keeps the
// outcome: a failure the error's guidance lets the client retry must run
// again on the retry, and one it forbids retrying is final and replayed.
func TestIdempotencyFollowsPerErrorGuidance(t *testing.T) {
	var locked, closed atomic.Int32
	var s forrst.Server
	s.Register("orders.edit", func(ctx context.Context, args json.RawMessage) (any, error) {
		if locked.Add(1) == 1 {
			return nil, forrst.GuidanceFor(forrst.Fail("ORDERS_LOCKED", "the order is being edited"),
				forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 3})
		}
		return "edited", nil
	})
	s.Register("orders.close", func(ctx context.Context, args json.RawMessage) (any, error) {
		if closed.Add(1) == 1 {
			return nil, forrst.GuidanceFor(forrst.Fail("UNAVAILABLE", "the order book is closed for the year"),
				forrst.RetryData{Allowed: false})
		}
		return "closed", nil
	})
	srv := newServer(t, &s)

	r := post(t, srv.URL, requestDoc("req_1", "orders.edit", "", keyExt("k")))
	wantJSON(t, "first answer's guidance", r.Ext[urnRetry], `{"allowed":true,"strategy":"immediate","max_attempts":3}`)
	r = post(t, srv.URL, requestDoc("req_2", "orders.edit", "", keyExt("k")))
	if r.Status != 200 || locked.Load() != 2 {
		t.Errorf("the retry the guidance allowed: status %d, code %q, function ran %d times; want it run again\n%s",
			r.Status, r.code(), locked.Load(), r.Body)
	}

	post(t, srv.URL, requestDoc("req_3", "orders.close", "", keyExt("k")))
	r = post(t, srv.URL, requestDoc("req_4", "orders.close", "", keyExt("k")))
	if r.code() != "UNAVAILABLE" || closed.Load() != 1 {
		t.Errorf("a final failure repeated with its key: status %d, code %q, function ran %d times; want the stored failure\n%s",
			r.Status, r.code(), closed.Load(), r.Body)
	}
}

// The client's view of the same: a default (keyed) client retries the
// error the server said it may retry, and the retry must reach the function.
func TestClientRetriesPerErrorGuidanceWithAKey(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("orders.edit", func(ctx context.Context, args json.RawMessage) (any, error) {
		if runs.Add(1) == 1 {
			return nil, forrst.GuidanceFor(forrst.Fail("ORDERS_LOCKED", "the order is being edited"),
				forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 3})
		}
		return "edited", nil
	})
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}
		var out string
		err := c.Call(context.Background(), "orders.edit", nil, &out)
		if err != nil || out != "edited" || runs.Load() != 2 {
			t.Errorf("result %q, err %v, function ran %d times in %d requests; want success on the second run", out, err, runs.Load(), st.count())
		}
	})
}

// Different arguments are never the same arguments: integers beyond 2^53
// differ even where float64 cannot tell them apart.
func TestIdempotencyLargeIntegersAreDifferentArguments(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	charging(&s, &runs)
	srv := newServer(t, &s)
	post(t, srv.URL, requestDoc("req_1", "payments.charge", `{"to_account":9007199254740993,"amount":100}`, keyExt("k")))
	r := post(t, srv.URL, requestDoc("req_2", "payments.charge", `{"to_account":9007199254740992,"amount":100}`, keyExt("k")))
	if r.code() != "IDEMPOTENCY_CONFLICT" {
		d := idemOf(t, r)
		t.Errorf("another account with the same key: status %d, code %q, idempotency status %q; want IDEMPOTENCY_CONFLICT\n%s",
			r.Status, r.code(), d.Status, r.Body)
	}
}

// A call its client abandoned has no outcome to keep: the client's retry
// with the same key (after an attempt timeout, say) must run it, not be
// told CANCELLED for the next 24 hours.
func TestIdempotencyDoesNotStoreACancelledCall(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("report", func(ctx context.Context, args json.RawMessage) (any, error) {
		runs.Add(1)
		if err := ctx.Err(); err != nil {
			return nil, err // a function that honours its context
		}
		return "done", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(requestDoc("req_1", "report", "", keyExt("k")))).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if first := readReply(t, w.Result()); first.code() != "CANCELLED" {
		t.Fatalf("test bug: first answer %s", first.Body)
	}
	r := serveDirect(t, &s, requestDoc("req_2", "report", "", keyExt("k")))
	if r.Status != 200 || runs.Load() != 2 {
		t.Errorf("the retry: status %d, code %q, function ran %d times; want it run again\n%s", r.Status, r.code(), runs.Load(), r.Body)
	}
}

// The caller of a keyed call hangs up while its function runs (its attempt
// timed out, a proxy dropped the connection). What the function then does
// decides what the key keeps: a success, whose effects are done, is the
// call's outcome and the retry gets it replayed, as does a final failure of
// its own; a failure that is the caller's leaving (the function returned its
// context's error) is no outcome, and the retry runs the function again.
func TestIdempotencyKeepsTheOutcomeOfACallWhoseCallerLeft(t *testing.T) {
	cases := []struct {
		name     string
		outcome  func(ctx context.Context, run int32) (any, error)
		wantRuns int32
		wantCode string // of the retry's answer
	}{
		{"success", func(_ context.Context, run int32) (any, error) {
			return map[string]any{"charge": run}, nil
		}, 1, ""},
		{"final failure", func(_ context.Context, run int32) (any, error) {
			return nil, forrst.GuidanceFor(forrst.Fail("CARD_DECLINED", "declined"), forrst.RetryData{Allowed: false})
		}, 1, "CARD_DECLINED"},
		{"the context's error", func(ctx context.Context, run int32) (any, error) {
			if run == 1 {
				return nil, fmt.Errorf("charging: %w", ctx.Err())
			}
			return map[string]any{"charge": run}, nil
		}, 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			started := make(chan struct{})
			var s forrst.Server
			s.Register("payments.charge", func(ctx context.Context, args json.RawMessage) (any, error) {
				run := runs.Add(1)
				if run == 1 {
					close(started)
					<-ctx.Done() // the caller hangs up; the function carries on
				}
				return tc.outcome(ctx, run)
			})
			handled := make(chan struct{}, 2)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.ServeHTTP(w, r)
				handled <- struct{}{}
			}))
			ctx, hangUp := context.WithCancel(context.Background())
			go func() {
				<-started
				hangUp()
			}()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(requestDoc("req_1", "payments.charge", "", keyExt("order_1"))))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatal("test bug: the first caller got an answer")
			}
			<-handled // the server is done with the first call

			r := post(t, srv.URL, requestDoc("req_2", "payments.charge", "", keyExt("order_1")))
			if runs.Load() != tc.wantRuns || r.code() != tc.wantCode {
				t.Errorf("the retry: status %d, code %q, the function ran %d times; want code %q after %d runs\n%s",
					r.Status, r.code(), runs.Load(), tc.wantCode, tc.wantRuns, r.Body)
			}
			if tc.wantRuns == 1 {
				if d := idemOf(t, r); d.Status != "cached" || d.OriginalRequestID != "req_1" {
					t.Errorf("the retry's idempotency data %+v, want the first call's outcome replayed", d)
				}
			}
		})
	}
}
