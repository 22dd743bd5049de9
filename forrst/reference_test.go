package forrst_test

// Tests that hold the package to the Forrst reference server
// (faustbrian/mesh-spec: the specification and its PHP implementation,
// with its test fixtures).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/forrst"
)

// A body that is JSON but not an object is a request that breaks the
// protocol, not one that cannot be parsed: the reference server answers
// `[]` and `[1, 2, 3]` with INVALID_REQUEST (its fixtures
// rpc-call-with-an-empty-array and rpc-call-with-invalid-batch) and keeps
// PARSE_ERROR for malformed JSON (rpc-call-with-invalid-json).
func TestNonObjectRequestIsInvalidRequest(t *testing.T) {
	var s forrst.Server
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil })
	srv := newServer(t, &s)
	for _, body := range []string{`[]`, "[\n    1,\n    2,\n    3\n]", `[` + requestDoc("req_1", "f", "") + `]`, `42`, `-1.5e3`, `"call f"`, `null`, `true`, ` false `} {
		t.Run(body, func(t *testing.T) {
			r := post(t, srv.URL, body)
			checkFailure(t, r, "", 400, "INVALID_REQUEST", "")
			wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":false}`)
			if !strings.Contains(r.Errors[0].Message, "object") {
				t.Errorf("message %q does not say a request is a JSON object", r.Errors[0].Message)
			}
			_, err := forrst.DecodeRequest(strings.NewReader(body), 0)
			if !errors.Is(err, forrst.ErrInvalid) || errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeRequest: err = %v, want ErrInvalid and not ErrMalformed", err)
			}
			_, err = forrst.DecodeResponse(strings.NewReader(body), 0)
			if !errors.Is(err, forrst.ErrInvalid) || errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeResponse: err = %v, want ErrInvalid and not ErrMalformed", err)
			}
		})
	}
	// Malformed JSON, whatever its first byte, stays PARSE_ERROR.
	for _, body := range []string{`{"jsonrpc": "2.0", "method": "app.foobar, "params": "bar", "baz]`, `[1,`, `[] []`, `42 x`, `nul`, `"open`, ``, `<html>`} {
		t.Run(body, func(t *testing.T) {
			r := post(t, srv.URL, body)
			checkFailure(t, r, "", 400, "PARSE_ERROR", "")
			if _, err := forrst.DecodeRequest(strings.NewReader(body), 0); !errors.Is(err, forrst.ErrMalformed) {
				t.Errorf("DecodeRequest: err = %v, want ErrMalformed", err)
			}
		})
	}
}

// The reference server names its extensions urn:cline:forrst:ext:… (its
// ExtensionUrn enum) where the specification writes urn:forrst:ext:…. Both
// are read; documents are written in the specification's form.
func TestReferenceURNsAreAliases(t *testing.T) {
	const clineRetry = "urn:cline:forrst:ext:retry"
	doc := failDoc("UNAVAILABLE", "", `{"urn":"`+clineRetry+`","data":{"allowed":true,"strategy":"fixed","after":{"value":7,"unit":"second"}}}`,
		`{"urn":"urn:acme:forrst:ext:retry","data":{}}`, `{"urn":"urn:cline:forrst:fn:ping","data":{}}`)
	resp, err := forrst.DecodeResponse(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatal(err)
	}
	var urns []string
	for _, e := range resp.Extensions {
		urns = append(urns, e.URN)
	}
	if want := []string{urnRetry, "urn:acme:forrst:ext:retry", "urn:cline:forrst:fn:ping"}; strings.Join(urns, " ") != strings.Join(want, " ") {
		t.Errorf("decoded URNs %q, want %q: only the reference's extension URNs are aliases", urns, want)
	}
	out, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), clineRetry) {
		t.Errorf("re-encoded with the reference's URN: %s", out)
	}

	// A document built by hand finds its extensions under either name.
	hand := forrst.Response{Extensions: []forrst.Extension{{URN: clineRetry, Data: json.RawMessage(`{"allowed":false}`)}}}
	if _, ok := hand.Extension(forrst.URNRetry); !ok {
		t.Errorf("Extension(%q) does not find %q", forrst.URNRetry, clineRetry)
	}
	if _, ok := hand.Extension(clineRetry); !ok {
		t.Errorf("Extension(%q) does not find itself", clineRetry)
	}
	req := forrst.Request{Extensions: []forrst.Extension{{URN: urnIdempotency}}}
	if _, ok := req.Extension("urn:cline:forrst:ext:idempotency"); !ok {
		t.Error("Request.Extension does not take the reference's URN")
	}
}

// A caller that speaks the reference's URNs gets its idempotency key
// honoured, and answers in the specification's form.
func TestServerHonoursReferenceIdempotencyURN(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("pay", func(ctx context.Context, args json.RawMessage) (any, error) { return runs.Add(1), nil })
	srv := newServer(t, &s)
	ext := `{"urn":"urn:cline:forrst:ext:idempotency","options":{"key":"order_123"}}`
	for i, want := range []string{"processed", "cached"} {
		r := post(t, srv.URL, requestDoc("req_"+strconv.Itoa(i), "pay", "", ext))
		if r.Status != 200 || string(r.Members["result"]) != "1" {
			t.Fatalf("call %d: status %d\n%s", i+1, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "urn:cline:") {
			t.Errorf("call %d: the answer uses the reference's URN:\n%s", i+1, r.Body)
		}
		var data struct{ Status string }
		if err := json.Unmarshal(r.Ext[urnIdempotency], &data); err != nil || data.Status != want {
			t.Errorf("call %d: idempotency data %s, want status %q", i+1, r.Ext[urnIdempotency], want)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("the function ran %d times, want 1", runs.Load())
	}
}

// A client follows guidance and rate-limit data sent under the reference's
// URNs: here fixed 7 s and max_attempts 1, lengthened by a window that
// resets in 20 s, instead of UNAVAILABLE's default table (exponential 1 s, 5).
func TestClientFollowsReferenceURNs(t *testing.T) {
	srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, failDoc("UNAVAILABLE", "",
			`{"urn":"urn:cline:forrst:ext:retry","data":{"allowed":true,"strategy":"fixed","after":{"value":7,"unit":"second"},"max_attempts":1}}`,
			`{"urn":"urn:cline:forrst:ext:rate-limit","data":{"limit":5,"used":5,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":20,"unit":"second"}}}`))
	})
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		err := (&forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}).Call(context.Background(), "f", nil, nil)
		ce := wantCallError(t, err, "UNAVAILABLE", 503)
		if !ce.FromServer {
			t.Error("the guidance was not read from the server")
		}
		if n.Load() != 2 {
			t.Errorf("%d requests, want 2 (max_attempts 1)", n.Load())
		}
		wantWaits(t, st, 20*time.Second)
	})
}

// The reference server sends errors[].details as a list of JSON:API-style
// objects (its fixture rpc-call-with-invalid-batch), where the specification
// shows an object: a client takes both. Any other kind is still invalid.
func TestClientAcceptsDetailsAsObjectOrList(t *testing.T) {
	list := `[{"status":"400","source":{"pointer":"/"},"title":"Malformed request","detail":"Request must be a JSON object, not an array."}]`
	srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"req_x","result":null,"errors":[{"code":"INVALID_REQUEST","message":"Invalid request","details":`+list+`}],"extensions":[{"urn":"urn:cline:forrst:ext:retry","data":{"allowed":false}}]}`)
	})
	err := (&forrst.Client{URL: srv.URL}).Call(context.Background(), "f", nil, nil)
	ce := wantCallError(t, err, "INVALID_REQUEST", 400)
	if !sameJSON(ce.Err.Details, []byte(list)) {
		t.Errorf("details = %s, want the list as sent", ce.Err.Details)
	}
	if n.Load() != 1 {
		t.Errorf("%d requests, want 1", n.Load())
	}

	for details, ok := range map[string]bool{`{"a":1}`: true, `[]`: true, list: true, `null`: true, `"x"`: false, `1`: false, `true`: false} {
		doc := `{"protocol":` + protocolJSON + `,"id":"r","result":null,"errors":[{"code":"X","message":"m","details":` + details + `}]}`
		_, err := forrst.DecodeResponse(strings.NewReader(doc), 0)
		if ok && err != nil {
			t.Errorf("details %s: %v", details, err)
		}
		if !ok && (!errors.Is(err, forrst.ErrInvalid) || !strings.Contains(err.Error(), "details")) {
			t.Errorf("details %s: err = %v, want ErrInvalid naming details", details, err)
		}
	}
}

// An answer to another request (another id) is not this call's answer, even
// a success: the client returns an *HTTPError wrapping ErrIDMismatch (and
// ErrInvalid) and decodes no result from it. A failure whose id the server
// could not read (null) still answers the call.
func TestClientRejectsAnAnswerToAnotherRequest(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		status    int
		wantCode  forrst.Code // "" = rejected
	}{
		{"other id", `{"protocol":` + protocolJSON + `,"id":"req_someone_else","result":{"balance":1000000}}`, 200, ""},
		{"null id on a success", `{"protocol":` + protocolJSON + `,"id":null,"result":{"balance":1000000}}`, 200, ""},
		{"other id on a failure", `{"protocol":` + protocolJSON + `,"id":"req_someone_else","result":null,"errors":[{"code":"NOT_FOUND","message":"m"}]}`, 404, ""},
		{"null id on a failure", `{"protocol":` + protocolJSON + `,"id":null,"result":null,"errors":[{"code":"INVALID_REQUEST","message":"m"}]}`, 400, "INVALID_REQUEST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.doc)
			})
			var result map[string]int
			err := (&forrst.Client{URL: srv.URL}).Call(context.Background(), "f", nil, &result)
			if n.Load() != 1 {
				t.Errorf("%d requests, want 1", n.Load())
			}
			if c.wantCode != "" {
				wantCallError(t, err, c.wantCode, c.status)
				return
			}
			var he *forrst.HTTPError
			if !errors.As(err, &he) || he.StatusCode != c.status || !errors.Is(err, forrst.ErrIDMismatch) || !errors.Is(err, forrst.ErrInvalid) {
				t.Fatalf("err = %v, want an HTTPError %d wrapping ErrIDMismatch and ErrInvalid", err, c.status)
			}
			if !strings.Contains(err.Error(), "req_someone_else") && !strings.Contains(err.Error(), "null") {
				t.Errorf("err %q does not say which id came back", err)
			}
			if result != nil {
				t.Errorf("the result of another request was decoded: %v", result)
			}
		})
	}
}

// The Forrst HTTP transport answers with application/json. An answer of
// another type is not a Forrst document, whatever its body: the client
// returns an *HTTPError wrapping ErrContentType, judged by its HTTP status
// (a 503 is retried, a 200 is not).
func TestClientRejectsAnswersThatAreNotJSON(t *testing.T) {
	ok := `{"protocol":` + protocolJSON + `,"id":"req_x","result":{"ok":1}}`
	for _, c := range []struct {
		contentType string // "-" = none
		status      int
		accepted    bool
		requests    int32
	}{
		{"application/json", 200, true, 1},
		{"application/json; charset=utf-8", 200, true, 1},
		{"Application/JSON", 200, true, 1},
		{"application/vnd.forrst+json", 200, true, 1},
		{"text/html; charset=utf-8", 200, false, 1},
		{"text/plain", 200, false, 1},
		{"-", 200, false, 1},
		{"application/jsonp", 200, false, 1},
		{"application/json;;", 200, false, 1},
		{"text/html", 503, false, 3},
	} {
		t.Run(c.contentType+" "+strconv.Itoa(c.status), func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if c.contentType == "-" {
					w.Header()["Content-Type"] = nil // no header, and no sniffing
				} else {
					w.Header().Set("Content-Type", c.contentType)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, ok)
			})
			err := (&forrst.Client{URL: srv.URL, Strategy: noWait(3)}).Call(context.Background(), "f", nil, nil)
			if n.Load() != c.requests {
				t.Errorf("%d requests, want %d", n.Load(), c.requests)
			}
			if c.accepted {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			var he *forrst.HTTPError
			if !errors.As(err, &he) || he.StatusCode != c.status || !errors.Is(err, forrst.ErrContentType) {
				t.Fatalf("err = %v, want an HTTPError %d wrapping ErrContentType", err, c.status)
			}
			if !strings.Contains(err.Error(), "Content-Type") {
				t.Errorf("err %q does not name the Content-Type", err)
			}
		})
	}
}

// The error codes of the specification (errors.md and the atomic-lock,
// async, replay, cancellation and simulation extensions) with the reference
// server's HTTP statuses (its ErrorCode enum) and retry guidance: the codes
// it calls retryable and the retry extension's table leaves out, the two
// lock codes, get its fallback, exponential from 1 s with 3 retries.
func TestReferenceErrorCodes(t *testing.T) {
	exp1s3 := forrst.RetryData{Allowed: true, Strategy: "exponential", After: &forrst.Duration{Value: 1, Unit: "second"}, MaxAttempts: 3}
	for _, c := range []struct {
		code     forrst.Code
		status   int
		guidance forrst.RetryData
	}{
		{forrst.CodeLockAcquisitionFailed, 423, exp1s3},
		{forrst.CodeLockTimeout, 423, exp1s3},
		{forrst.CodeLockNotFound, 404, forrst.RetryData{}},
		{forrst.CodeLockOwnershipMismatch, 403, forrst.RetryData{}},
		{forrst.CodeLockAlreadyReleased, 409, forrst.RetryData{}},
		{forrst.CodeAsyncOperationNotFound, 404, forrst.RetryData{}},
		{forrst.CodeAsyncOperationFailed, 500, forrst.RetryData{}},
		{forrst.CodeAsyncCannotCancel, 400, forrst.RetryData{}},
		{forrst.CodeAsyncVersionConflict, 409, forrst.RetryData{}},
		{forrst.CodeAsyncQuotaExceeded, 429, forrst.RetryData{}},
		{forrst.CodeReplayNotFound, 404, forrst.RetryData{}},
		{forrst.CodeReplayExpired, 410, forrst.RetryData{}},
		{forrst.CodeReplayAlreadyComplete, 409, forrst.RetryData{}},
		{forrst.CodeReplayCancelled, 410, forrst.RetryData{}},
		{forrst.CodeExtensionNotApplicable, 400, forrst.RetryData{}},
		{forrst.CodeCancellationTokenUnknown, 404, forrst.RetryData{}},
		{forrst.CodeCancellationTooLate, 409, forrst.RetryData{}},
		{forrst.CodeSimulationNotSupported, 400, forrst.RetryData{}},
		{forrst.CodeSimulationScenarioNotFound, 404, forrst.RetryData{}},
	} {
		if got := c.code.HTTPStatus(); got != c.status {
			t.Errorf("%s.HTTPStatus() = %d, want %d", c.code, got, c.status)
		}
		got := forrst.DefaultGuidance(c.code)
		if gj, _ := json.Marshal(got); !sameJSON(gj, mustJSON(t, c.guidance)) {
			t.Errorf("DefaultGuidance(%s) = %s, want %s", c.code, gj, mustJSON(t, c.guidance))
		}
	}
	want := map[forrst.Code]string{
		forrst.CodeLockAcquisitionFailed: "LOCK_ACQUISITION_FAILED", forrst.CodeLockTimeout: "LOCK_TIMEOUT",
		forrst.CodeAsyncOperationNotFound: "ASYNC_OPERATION_NOT_FOUND", forrst.CodeAsyncOperationFailed: "ASYNC_OPERATION_FAILED",
		forrst.CodeAsyncCannotCancel: "ASYNC_CANNOT_CANCEL", forrst.CodeAsyncVersionConflict: "ASYNC_VERSION_CONFLICT",
		forrst.CodeAsyncQuotaExceeded: "ASYNC_QUOTA_EXCEEDED", forrst.CodeReplayNotFound: "REPLAY_NOT_FOUND",
		forrst.CodeReplayExpired: "REPLAY_EXPIRED", forrst.CodeReplayAlreadyComplete: "REPLAY_ALREADY_COMPLETE",
		forrst.CodeReplayCancelled: "REPLAY_CANCELLED",
	}
	for code, s := range want {
		if string(code) != s {
			t.Errorf("code %q, want %q", code, s)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A lock that is held rejects the call before the function runs: the server
// answers 423 with the fallback guidance, and a client retries it, even
// without an idempotency key, on that schedule.
func TestClientRetriesALockThatIsHeld(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "report", forrst.CodeLockAcquisitionFailed, 3, &runs) // one for the plain post, two for the client
	srv := newServer(t, &s)
	r := post(t, srv.URL, requestDoc("req_1", "report", ""))
	checkFailure(t, r, "req_1", 423, "LOCK_ACQUISITION_FAILED", "")
	wantJSON(t, "retry data", r.Ext[urnRetry], `{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":3}`)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10), NoIdempotencyKey: true}
		if err := c.Call(context.Background(), "report", nil, nil); err != nil {
			t.Fatal(err)
		}
		wantWaits(t, st, time.Second, 2*time.Second)
	})
}

// The rate-limit extension's multi-scope form, as the specification's
// example writes it: every scope's window is read, and a client waits for
// the latest reset of a scope that is used up (function, 40 s), not for a
// scope with calls left (global, 32 s).
func TestRateLimitMultiScopeForm(t *testing.T) {
	multi := `{"scopes":{` +
		`"global":{"limit":10000,"used":4523,"remaining":5477,"window":{"value":1,"unit":"minute"},"resets_in":{"value":90,"unit":"second"}},` +
		`"service":{"limit":1000,"used":1000,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":32,"unit":"second"}},` +
		`"function":{"limit":100,"used":100,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":40,"unit":"second"}}}}`
	ext := forrst.Extension{URN: urnRateLimit, Data: json.RawMessage(multi)}
	windows, err := ext.RateLimits()
	if err != nil {
		t.Fatal(err)
	}
	var scopes []string
	for _, w := range windows {
		scopes = append(scopes, w.Scope)
	}
	if strings.Join(scopes, " ") != "function global service" {
		t.Errorf("scopes %q, want function, global and service", scopes)
	}
	if windows[0] != (forrst.RateLimitData{Limit: 100, Used: 100, Window: forrst.Duration{Value: 1, Unit: "minute"}, ResetsIn: forrst.Duration{Value: 40, Unit: "second"}, Scope: "function"}) {
		t.Errorf("function window = %+v", windows[0])
	}
	if _, err := ext.RateLimit(); !errors.Is(err, forrst.ErrInvalid) || !strings.Contains(err.Error(), "RateLimits") {
		t.Errorf("RateLimit() on the multi-scope form: %v, want ErrInvalid pointing at RateLimits", err)
	}

	// Written back in the same form.
	out, err := forrst.NewRateLimitExtension(windows...)
	if err != nil {
		t.Fatal(err)
	}
	if out.URN != urnRateLimit || !sameJSON(out.Data, []byte(multi)) {
		t.Errorf("NewRateLimitExtension = %s %s, want %s", out.URN, out.Data, multi)
	}
	single, err := forrst.NewRateLimitExtension(windows[1])
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "one window", single.Data, `{"limit":10000,"used":4523,"remaining":5477,"window":{"value":1,"unit":"minute"},"resets_in":{"value":90,"unit":"second"},"scope":"global"}`)
	if got, err := single.RateLimits(); err != nil || len(got) != 1 || got[0] != windows[1] {
		t.Errorf("RateLimits of one window = %+v, %v", got, err)
	}
	for _, bad := range [][]forrst.RateLimitData{nil, {windows[0], windows[0]}, {windows[0], {Limit: 1, Window: forrst.Duration{Value: 1, Unit: "second"}, ResetsIn: forrst.Duration{Unit: "second"}}}, {{Limit: -1}}} {
		if _, err := forrst.NewRateLimitExtension(bad...); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("NewRateLimitExtension(%+v): err = %v, want ErrInvalid", bad, err)
		}
	}

	for _, bad := range []string{
		`{"scopes":{}}`,
		`{"scopes":null}`,
		`{"scopes":[]}`,
		`{"scopes":{"global":{"limit":1,"used":0,"remaining":1,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"second"}}},"limit":1}`,
		`{"scopes":{"global":{"limit":-1,"used":0,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"second"}}}}`,
		`{"scopes":{"global":{"limit":1,"used":0,"remaining":1,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"fortnight"}}}}`,
		`{"scopes":{"global":{"scopes":{}}}}`,
		`{"scopes":{"":{"limit":1,"used":0,"remaining":1,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"second"}}}}`,
		`{"scopes":{"global":7}}`,
	} {
		if w, err := (forrst.Extension{URN: urnRateLimit, Data: json.RawMessage(bad)}).RateLimits(); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("RateLimits(%s) = %+v, %v; want ErrInvalid", bad, w, err)
		}
	}

	srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(429)
		_, _ = io.WriteString(w, failDoc("RATE_LIMITED", `{"allowed":true,"strategy":"fixed","after":{"value":5,"unit":"second"},"max_attempts":1}`,
			`{"urn":"urn:forrst:ext:rate-limit","data":`+multi+`}`))
	})
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		err := (&forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}).Call(context.Background(), "f", nil, nil)
		wantCallError(t, err, "RATE_LIMITED", 429)
		if n.Load() != 2 {
			t.Errorf("%d requests, want 2", n.Load())
		}
		wantWaits(t, st, 40*time.Second)
	})
}
