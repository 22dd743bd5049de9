package forrst_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/forrst"
)

// failing registers a function under name that always fails with code.
func failing(s *forrst.Server, name string, code forrst.Code, opts ...forrst.FunctionOption) {
	s.Register(name, func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.Fail(code, "failed with "+string(code))
	}, opts...)
}

// checkFailure checks the parts of a failed answer every failure shares.
func checkFailure(t *testing.T, r reply, id string, status int, code, message string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("HTTP status = %d, want %d", r.Status, status)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	wantJSON(t, "protocol", r.Members["protocol"], protocolJSON)
	if id == "" {
		wantJSON(t, "id", r.Members["id"], `null`)
	} else {
		wantJSON(t, "id", r.Members["id"], `"`+id+`"`)
	}
	if raw, ok := r.Members["result"]; !ok || string(raw) != "null" {
		t.Errorf("result = %q (present %v), want null", raw, ok)
	}
	if len(r.Errors) != 1 {
		t.Fatalf("errors = %+v, want exactly one\n%s", r.Errors, r.Body)
	}
	if r.Errors[0].Code != code {
		t.Errorf("code = %q, want %q", r.Errors[0].Code, code)
	}
	if message != "" && r.Errors[0].Message != message {
		t.Errorf("message = %q, want %q", r.Errors[0].Message, message)
	}
}

func TestServerRetryableCodesCarryTheTable(t *testing.T) {
	// The seed's "Automatic Retry Guidance" table, the transport's status for
	// each code, and the Retry-After that 429 and 503 must carry: the
	// seconds of the first wait.
	cases := []struct {
		code       forrst.Code
		status     int
		data       string
		retryAfter string
	}{
		{"RATE_LIMITED", 429, `{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":3}`, "60"},
		{"UNAVAILABLE", 503, `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}`, "1"},
		{"DEADLINE_EXCEEDED", 504, `{"allowed":true,"strategy":"immediate","max_attempts":1}`, ""},
		{"INTERNAL_ERROR", 500, `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":3}`, ""},
		{"DEPENDENCY_ERROR", 502, `{"allowed":true,"strategy":"exponential","after":{"value":2,"unit":"second"},"max_attempts":3}`, ""},
		{"IDEMPOTENCY_PROCESSING", 409, `{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"second"},"max_attempts":3}`, ""},
		{"SERVER_MAINTENANCE", 503, `{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":1}`, "60"},
		{"FUNCTION_MAINTENANCE", 503, `{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":1}`, "60"},
		{"FUNCTION_DISABLED", 503, `{"allowed":true,"strategy":"fixed","after":{"value":30,"unit":"second"},"max_attempts":2}`, "30"},
	}
	var s forrst.Server
	for _, c := range cases {
		failing(&s, "f."+string(c.code), c.code)
	}
	srv := newServer(t, &s)
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			r := post(t, srv.URL, requestDoc("req_"+string(c.code), "f."+string(c.code), `{"x":1}`))
			checkFailure(t, r, "req_"+string(c.code), c.status, string(c.code), "failed with "+string(c.code))
			data, ok := r.Ext[urnRetry]
			if !ok {
				t.Fatalf("no retry extension:\n%s", r.Body)
			}
			wantJSON(t, "retry data", data, c.data)
			if c.retryAfter != "" {
				if got := r.Header.Get("Retry-After"); got != c.retryAfter {
					t.Errorf("Retry-After = %q, want %q", got, c.retryAfter)
				}
			}
		})
	}
}

func TestServerNonRetryableCodes(t *testing.T) {
	cases := []struct {
		code   forrst.Code
		status int
	}{
		{"INVALID_ARGUMENTS", 400},
		{"NOT_FOUND", 404},
		{"UNAUTHORIZED", 401},
		{"FORBIDDEN", 403},
		{"CANCELLED", 499},
		{"VALIDATION_ERROR", 400},
		{"IDEMPOTENCY_CONFLICT", 409},
		{"ORDERS_SOLD_OUT", 400}, // a service's own code: the caller's fault
	}
	var s forrst.Server
	for _, c := range cases {
		failing(&s, "f."+string(c.code), c.code)
	}
	srv := newServer(t, &s)
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			r := post(t, srv.URL, requestDoc("req_1", "f."+string(c.code), ""))
			checkFailure(t, r, "req_1", c.status, string(c.code), "failed with "+string(c.code))
			data, ok := r.Ext[urnRetry]
			if !ok {
				t.Fatalf("no retry extension:\n%s", r.Body)
			}
			wantJSON(t, "retry data", data, `{"allowed":false}`)
			if ra := r.Header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After %q on a failure that may not be retried", ra)
			}
		})
	}
}

func TestServerSuccess(t *testing.T) {
	var s forrst.Server
	var got atomic.Value
	s.Register("orders.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		got.Store(string(args))
		return map[string]any{"id": 7, "items": []string{"a", "b"}}, nil
	})
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_ok", "orders.get", `{"id": 7}`))
	if r.Status != 200 {
		t.Errorf("status = %d, want 200", r.Status)
	}
	wantJSON(t, "result", r.Members["result"], `{"id":7,"items":["a","b"]}`)
	wantJSON(t, "id", r.Members["id"], `"req_ok"`)
	wantJSON(t, "protocol", r.Members["protocol"], protocolJSON)
	if _, ok := r.Members["errors"]; ok {
		t.Errorf("a success has an errors member:\n%s", r.Body)
	}
	if _, ok := r.Ext[urnRetry]; ok {
		t.Errorf("a success has retry guidance:\n%s", r.Body)
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on a success", ra)
	}
	wantJSON(t, "the function's arguments", []byte(got.Load().(string)), `{"id":7}`)
	// A charset parameter is still JSON.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(requestDoc("req_cs", "orders.get", "")))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if r := readReply(t, resp); r.Status != 200 || r.code() != "" {
		t.Errorf("with a charset: status %d, code %q", r.Status, r.code())
	}
}

func TestServerGoErrorDoesNotLeak(t *testing.T) {
	const secret = "pq: password authentication failed for user billing_admin"
	var s forrst.Server
	s.Register("billing.run", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, fmt.Errorf("loading invoices: %w", errors.New(secret))
	})
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_1", "billing.run", ""))
	checkFailure(t, r, "req_1", 500, "INTERNAL_ERROR", "")
	for _, leak := range []string{"pq:", "password", "billing_admin", "invoices"} {
		if strings.Contains(string(r.Body), leak) {
			t.Errorf("the answer leaks %q:\n%s", leak, r.Body)
		}
	}
	if r.Errors[0].Message == "" {
		t.Error("no message at all")
	}
	wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":3}`)
}

func TestServerContextErrors(t *testing.T) {
	var s forrst.Server
	s.Register("slow", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, fmt.Errorf("query: %w", context.DeadlineExceeded)
	})
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_1", "slow", ""))
	checkFailure(t, r, "req_1", 504, "DEADLINE_EXCEEDED", "")
	wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":true,"strategy":"immediate","max_attempts":1}`)
}

func TestServerSurvivesPanics(t *testing.T) {
	var s forrst.Server
	s.Register("boom", func(ctx context.Context, args json.RawMessage) (any, error) {
		panic("secret panic value")
	})
	s.Register("ok", func(ctx context.Context, args json.RawMessage) (any, error) { return "fine", nil })
	srv := newServer(t, &s)
	for i := range 3 {
		r := post(t, srv.URL, requestDoc("req_boom", "boom", ""))
		checkFailure(t, r, "req_boom", 500, "INTERNAL_ERROR", "")
		if strings.Contains(string(r.Body), "secret panic value") {
			t.Errorf("the panic value leaks:\n%s", r.Body)
		}
		wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":3}`)
		if r := post(t, srv.URL, requestDoc("req_ok", "ok", "")); r.Status != 200 || string(r.Members["result"]) != `"fine"` {
			t.Fatalf("after panic %d: status %d, body %s", i+1, r.Status, r.Body)
		}
	}
}

func TestServerUnencodableResult(t *testing.T) {
	var s forrst.Server
	s.Register("chan", func(ctx context.Context, args json.RawMessage) (any, error) { return make(chan int), nil })
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_1", "chan", ""))
	checkFailure(t, r, "req_1", 500, "INTERNAL_ERROR", "")
}

func TestServerProtocolErrors(t *testing.T) {
	s := &forrst.Server{MaxDocumentSize: 512}
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil })
	srv := newServer(t, s)

	t.Run("unknown function", func(t *testing.T) {
		r := post(t, srv.URL, requestDoc("req_1", "no.such.function", ""))
		checkFailure(t, r, "req_1", 404, "FUNCTION_NOT_FOUND", "")
		wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		r := readReply(t, resp)
		checkFailure(t, r, "", 405, "INVALID_REQUEST", "")
		if allow := r.Header.Get("Allow"); allow != "POST" {
			t.Errorf("Allow = %q, want POST", allow)
		}
	})
	t.Run("wrong content type", func(t *testing.T) {
		resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(requestDoc("req_1", "f", "")))
		if err != nil {
			t.Fatal(err)
		}
		checkFailure(t, readReply(t, resp), "", 415, "INVALID_REQUEST", "")
	})
	t.Run("no content type", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(requestDoc("req_1", "f", "")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		checkFailure(t, readReply(t, resp), "", 415, "INVALID_REQUEST", "")
	})
	t.Run("too large", func(t *testing.T) {
		doc := requestDoc("req_1", "f", `{"blob":"`+strings.Repeat("x", 600)+`"}`)
		r := post(t, srv.URL, doc)
		checkFailure(t, r, "", 413, "INVALID_REQUEST", "")
		// Exactly at the limit is fine.
		if r := post(t, srv.URL, pad(requestDoc("req_2", "f", ""), 512)); r.Status != 200 {
			t.Errorf("a request of exactly MaxDocumentSize: status %d\n%s", r.Status, r.Body)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		r := post(t, srv.URL, `{"protocol": {"name": "forrst"`)
		checkFailure(t, r, "", 400, "PARSE_ERROR", "")
		wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
	})
	t.Run("batch", func(t *testing.T) {
		r := post(t, srv.URL, `[`+requestDoc("req_1", "f", "")+`]`)
		checkFailure(t, r, "", 400, "INVALID_REQUEST", "") // JSON, but not an object
	})
	t.Run("invalid document", func(t *testing.T) {
		r := post(t, srv.URL, `{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_1","call":{"arguments":{}}}`)
		checkFailure(t, r, "", 400, "INVALID_REQUEST", "")
	})
	t.Run("arguments not an object", func(t *testing.T) {
		r := post(t, srv.URL, requestDoc("req_1", "f", `[1,2]`))
		checkFailure(t, r, "", 400, "INVALID_REQUEST", "")
	})
	t.Run("unsupported version", func(t *testing.T) {
		r := post(t, srv.URL, `{"protocol":{"name":"forrst","version":"1.0.0"},"id":"req_1","call":{"function":"f"}}`)
		checkFailure(t, r, "req_1", 400, "INVALID_PROTOCOL_VERSION", "")
	})
}

func TestWithGuidanceOverridesTheTableForOneFunction(t *testing.T) {
	custom := forrst.RetryData{Allowed: true, Strategy: forrst.Fixed, After: &forrst.Duration{Value: 5, Unit: forrst.Second}, MaxAttempts: 10}
	var s forrst.Server
	failing(&s, "custom", "UNAVAILABLE", forrst.WithGuidance("UNAVAILABLE", custom))
	failing(&s, "plain", "UNAVAILABLE")
	failing(&s, "custom.other", "RATE_LIMITED", forrst.WithGuidance("UNAVAILABLE", custom))
	failing(&s, "found", "NOT_FOUND", forrst.WithGuidance("NOT_FOUND", forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 2}))
	failing(&s, "never", "UNAVAILABLE", forrst.WithGuidance("UNAVAILABLE", forrst.RetryData{Allowed: false}))
	srv := newServer(t, &s)

	r := post(t, srv.URL, requestDoc("req_1", "custom", ""))
	wantJSON(t, "customised", r.Ext[urnRetry], `{"allowed":true,"strategy":"fixed","after":{"value":5,"unit":"second"},"max_attempts":10}`)
	if ra := r.Header.Get("Retry-After"); ra != "5" {
		t.Errorf("customised Retry-After = %q, want 5", ra)
	}
	r = post(t, srv.URL, requestDoc("req_2", "plain", ""))
	wantJSON(t, "another function", r.Ext[urnRetry], `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}`)
	if ra := r.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("another function's Retry-After = %q, want 1", ra)
	}
	r = post(t, srv.URL, requestDoc("req_3", "custom.other", ""))
	wantJSON(t, "another code of the customised function", r.Ext[urnRetry], `{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":3}`)
	r = post(t, srv.URL, requestDoc("req_4", "found", ""))
	wantJSON(t, "a code made retryable", r.Ext[urnRetry], `{"allowed":true,"strategy":"immediate","max_attempts":2}`)
	r = post(t, srv.URL, requestDoc("req_5", "never", ""))
	checkFailure(t, r, "req_5", 503, "UNAVAILABLE", "")
	wantJSON(t, "a code made final", r.Ext[urnRetry], `{"allowed":false}`)
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q with guidance that forbids retrying", ra)
	}
}

func TestGuidanceForOverridesEverything(t *testing.T) {
	mine := forrst.RetryData{Allowed: true, Strategy: forrst.Exponential, After: &forrst.Duration{Value: 2, Unit: forrst.Minute}, MaxAttempts: 4}
	var s forrst.Server
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) {
		e := forrst.Fail("UNAVAILABLE", "shard 3 is rebalancing")
		e.Details = json.RawMessage(`{"shard":3}`)
		return nil, forrst.GuidanceFor(e, mine)
	}, forrst.WithGuidance("UNAVAILABLE", forrst.RetryData{Allowed: true, Strategy: forrst.Fixed, After: &forrst.Duration{Value: 5, Unit: forrst.Second}}))
	s.Register("stop", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.GuidanceFor(forrst.Fail("RATE_LIMITED", "quota for this month used up"), forrst.RetryData{Allowed: false})
	})
	srv := newServer(t, &s)

	r := post(t, srv.URL, requestDoc("req_1", "f", ""))
	checkFailure(t, r, "req_1", 503, "UNAVAILABLE", "shard 3 is rebalancing")
	wantJSON(t, "details", r.Errors[0].Details, `{"shard":3}`)
	wantJSON(t, "per-error guidance", r.Ext[urnRetry], `{"allowed":true,"strategy":"exponential","after":{"value":2,"unit":"minute"},"max_attempts":4}`)
	if ra := r.Header.Get("Retry-After"); ra != "120" {
		t.Errorf("Retry-After = %q, want 120 (2 minutes)", ra)
	}
	r = post(t, srv.URL, requestDoc("req_2", "stop", ""))
	checkFailure(t, r, "req_2", 429, "RATE_LIMITED", "")
	wantJSON(t, "per-error refusal", r.Ext[urnRetry], `{"allowed":false}`)
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q with guidance that forbids retrying", ra)
	}
	// The error's own guidance is a wire concern only: no member of its own.
	if strings.Contains(string(r.Members["errors"]), "allowed") {
		t.Errorf("guidance leaks into the error: %s", r.Members["errors"])
	}
}

// A server never sends guidance that its own clients would reject.
func TestInvalidGuidanceIsNeverSent(t *testing.T) {
	bad := forrst.RetryData{Allowed: true, Strategy: "linear", After: &forrst.Duration{Value: 1, Unit: forrst.Hour}}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("WithGuidance accepted invalid guidance")
			}
		}()
		forrst.WithGuidance("UNAVAILABLE", bad)
	}()
	var s forrst.Server
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.GuidanceFor(forrst.Fail("UNAVAILABLE", "x"), bad)
	})
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_1", "f", ""))
	wantJSON(t, "invalid per-error guidance falls back to the table", r.Ext[urnRetry],
		`{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}`)
}

// quietServer is newServer with net/http's own error log silenced: for
// handlers expected to panic.
func quietServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// badJSON is a result whose encoding panics, as a MarshalJSON method with a
// nil dereference would.
type badJSON struct{}

func (badJSON) MarshalJSON() ([]byte, error) { panic("MarshalJSON exploded") }

// Whatever a function returns, the server answers with a Forrst document: a
// nil *Error in a non-nil error (Go's typed-nil trap) or a result whose
// encoding panics must not kill the connection.
func TestServerAnswersWhateverAFunctionReturns(t *testing.T) {
	var s forrst.Server
	s.Register("typed.nil", func(ctx context.Context, args json.RawMessage) (any, error) {
		var failure *forrst.Error // set only on failure, then returned anyway
		return "charged", failure
	})
	s.Register("bad.result", func(ctx context.Context, args json.RawMessage) (any, error) {
		return badJSON{}, nil
	})
	srv := quietServer(t, &s)
	for _, name := range []string{"typed.nil", "bad.result"} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(requestDoc("req_1", name, "")))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer at all: %v", err)
			}
			r := readReply(t, resp)
			if r.Status != 200 && r.code() != "INTERNAL_ERROR" {
				t.Errorf("status %d, code %q\n%s", r.Status, r.code(), r.Body)
			}
		})
	}
}

// A call whose function ran but whose result could not be encoded must not
// leave its idempotency key claimed (it would answer
// IDEMPOTENCY_PROCESSING until it expires, 24 hours by default), nor be
// retried: the function would run again, with its effects (a second charge)
// and most likely the same result. Its failure forbids a retry, and a retry
// with the key gets it again, stored.
func TestServerResultNotEncodedIsFinal(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("report", func(ctx context.Context, args json.RawMessage) (any, error) {
		if runs.Add(1) == 1 {
			return badJSON{}, nil
		}
		return "report", nil
	})
	srv := quietServer(t, &s)
	first := post(t, srv.URL, requestDoc("req_1", "report", "", keyExt("report_2026")))
	if first.Status != http.StatusInternalServerError || first.code() != string(forrst.CodeInternalError) || !strings.Contains(string(first.Body), `"allowed":false`) {
		t.Fatalf("the first answer: status %d, code %q; want INTERNAL_ERROR that forbids a retry\n%s", first.Status, first.code(), first.Body)
	}
	r := post(t, srv.URL, requestDoc("req_2", "report", "", keyExt("report_2026")))
	if r.Status != first.Status || r.code() != first.code() || runs.Load() != 1 {
		t.Errorf("the retry: status %d, code %q, function ran %d times; want the stored failure, run once\n%s", r.Status, r.code(), runs.Load(), r.Body)
	}
}

// The function receives "a JSON object, or nil" (Function's documentation).
func TestServerArgumentsAreAnObjectOrNil(t *testing.T) {
	var s forrst.Server
	var got []json.RawMessage
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) {
		got = append(got, args)
		return nil, nil
	})
	srv := newServer(t, &s)
	post(t, srv.URL, `{"protocol":`+protocolJSON+`,"id":"r1","call":{"function":"f"}}`)
	post(t, srv.URL, `{"protocol":`+protocolJSON+`,"id":"r2","call":{"function":"f","arguments":null}}`)
	post(t, srv.URL, requestDoc("r3", "f", `{"a":1}`))
	if len(got) != 3 {
		t.Fatalf("%d calls", len(got))
	}
	for i, args := range got {
		if args != nil && !strings.HasPrefix(string(args), "{") {
			t.Errorf("call %d: arguments %q, want a JSON object or nil", i+1, args)
		}
	}
}
