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
