package forrst_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/retrykit/retry/forrst"
)

// The four example responses of the retry extension's seed, with the
// trailing comma after "message" removed (seeds/README.md).
var seedExamples = []struct {
	name, doc string
	id        string
	code      forrst.Code
	message   string
	retry     forrst.RetryData
}{
	{
		name: "exponential backoff",
		doc: `{
  "protocol": { "name": "forrst", "version": "0.1.0" },
  "id": "req_123",
  "result": null,
  "errors": [{
    "code": "UNAVAILABLE",
    "message": "Service temporarily unavailable"
  }],
  "extensions": [
    {
      "urn": "urn:forrst:ext:retry",
      "data": {
        "allowed": true,
        "strategy": "exponential",
        "after": { "value": 1, "unit": "second" },
        "max_attempts": 5
      }
    }
  ]
}`,
		id: "req_123", code: "UNAVAILABLE", message: "Service temporarily unavailable",
		retry: forrst.RetryData{Allowed: true, Strategy: "exponential", After: &forrst.Duration{Value: 1, Unit: "second"}, MaxAttempts: 5},
	},
	{
		name: "rate limited",
		doc: `{
  "protocol": { "name": "forrst", "version": "0.1.0" },
  "id": "req_456",
  "result": null,
  "errors": [{
    "code": "RATE_LIMITED",
    "message": "Rate limit exceeded"
  }],
  "extensions": [
    {
      "urn": "urn:forrst:ext:retry",
      "data": {
        "allowed": true,
        "strategy": "fixed",
        "after": { "value": 60, "unit": "second" },
        "max_attempts": 3
      }
    }
  ]
}`,
		id: "req_456", code: "RATE_LIMITED", message: "Rate limit exceeded",
		retry: forrst.RetryData{Allowed: true, Strategy: "fixed", After: &forrst.Duration{Value: 60, Unit: "second"}, MaxAttempts: 3},
	},
	{
		name: "immediate",
		doc: `{
  "protocol": { "name": "forrst", "version": "0.1.0" },
  "id": "req_789",
  "result": null,
  "errors": [{
    "code": "DEADLINE_EXCEEDED",
    "message": "Request deadline exceeded"
  }],
  "extensions": [
    {
      "urn": "urn:forrst:ext:retry",
      "data": {
        "allowed": true,
        "strategy": "immediate",
        "max_attempts": 1
      }
    }
  ]
}`,
		id: "req_789", code: "DEADLINE_EXCEEDED", message: "Request deadline exceeded",
		retry: forrst.RetryData{Allowed: true, Strategy: "immediate", MaxAttempts: 1},
	},
	{
		name: "not retryable",
		doc: `{
  "protocol": { "name": "forrst", "version": "0.1.0" },
  "id": "req_error",
  "result": null,
  "errors": [{
    "code": "INVALID_ARGUMENTS",
    "message": "Invalid email format"
  }],
  "extensions": [
    {
      "urn": "urn:forrst:ext:retry",
      "data": {
        "allowed": false
      }
    }
  ]
}`,
		id: "req_error", code: "INVALID_ARGUMENTS", message: "Invalid email format",
		retry: forrst.RetryData{Allowed: false},
	},
}

func TestSeedExamplesRoundTrip(t *testing.T) {
	for _, ex := range seedExamples {
		t.Run(ex.name, func(t *testing.T) {
			resp, err := forrst.DecodeResponse(strings.NewReader(ex.doc), 0)
			if err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			if resp.Protocol != (forrst.Protocol{Name: "forrst", Version: "0.1.0"}) || resp.ID != ex.id {
				t.Errorf("protocol %+v, id %q", resp.Protocol, resp.ID)
			}
			if len(resp.Errors) != 1 || resp.Errors[0].Code != ex.code || resp.Errors[0].Message != ex.message {
				t.Errorf("errors = %+v", resp.Errors)
			}
			if string(resp.Result) != "null" {
				t.Errorf("result = %q, want null", resp.Result)
			}
			// Both the pointer and the value encode the same document.
			for _, v := range []any{resp, *resp} {
				out, err := json.Marshal(v)
				if err != nil {
					t.Fatalf("Marshal(%T): %v", v, err)
				}
				if !sameJSON(out, []byte(ex.doc)) {
					t.Errorf("Marshal(%T) =\n%s\nwant the same document as\n%s", v, out, ex.doc)
				}
			}
			ext, ok := resp.Extension(urnRetry)
			if !ok {
				t.Fatal("no retry extension")
			}
			got, err := ext.Retry()
			if err != nil {
				t.Fatalf("Retry: %v", err)
			}
			if !reflect.DeepEqual(got, ex.retry) {
				t.Errorf("Retry() = %+v (after %+v), want %+v (after %+v)", got, got.After, ex.retry, ex.retry.After)
			}
		})
	}
}

// The seed's examples as published, with the trailing comma, are not JSON:
// the decoder stays strict.
func TestSeedExamplesWithTrailingCommaAreRejected(t *testing.T) {
	for _, ex := range seedExamples {
		raw := strings.Replace(ex.doc, `"message": "`+ex.message+`"`, `"message": "`+ex.message+`",`, 1)
		if raw == ex.doc {
			t.Fatal("test bug: no comma inserted")
		}
		if _, err := forrst.DecodeResponse(strings.NewReader(raw), 0); !errors.Is(err, forrst.ErrMalformed) {
			t.Errorf("%s with a trailing comma: err = %v, want ErrMalformed", ex.name, err)
		}
	}
}

func TestRequestRoundTrip(t *testing.T) {
	const doc = `{
  "protocol": {"name": "forrst", "version": "0.1.0"},
  "id": "req_abc",
  "call": {"function": "orders.create", "version": "2", "arguments": {"sku": "W-1", "quantity": 3}},
  "context": {"tenant": "acme", "trace": ["a", "b"]},
  "extensions": [
    {"urn": "urn:forrst:ext:idempotency", "options": {"key": "order_123", "ttl": {"value": 1, "unit": "hour"}}},
    {"urn": "urn:forrst:ext:rate-limit", "options": {}}
  ]
}`
	req, err := forrst.DecodeRequest(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	if req.Protocol != (forrst.Protocol{Name: "forrst", Version: "0.1.0"}) || req.ID != "req_abc" {
		t.Errorf("protocol %+v, id %q", req.Protocol, req.ID)
	}
	if req.Call.Function != "orders.create" || req.Call.Version != "2" {
		t.Errorf("call = %+v", req.Call)
	}
	wantJSON(t, "arguments", req.Call.Arguments, `{"quantity": 3, "sku": "W-1"}`)
	wantJSON(t, "context", req.Context, `{"tenant": "acme", "trace": ["a", "b"]}`)
	ext, ok := req.Extension(urnIdempotency)
	if !ok {
		t.Fatal("no idempotency extension")
	}
	opts, err := ext.IdempotencyOptions()
	if err != nil {
		t.Fatalf("IdempotencyOptions: %v", err)
	}
	if opts.Key != "order_123" || opts.TTL == nil || *opts.TTL != (forrst.Duration{Value: 1, Unit: "hour"}) {
		t.Errorf("options = %+v (ttl %+v)", opts, opts.TTL)
	}
	if _, ok := req.Extension(urnRateLimit); !ok {
		t.Error("no rate-limit extension")
	}
	if _, ok := req.Extension(urnRetry); ok {
		t.Error("a retry extension that is not there")
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(out, []byte(doc)) {
		t.Errorf("re-encoded =\n%s\nwant the same document as\n%s", out, doc)
	}
	again, err := forrst.DecodeRequest(strings.NewReader(string(out)), 0)
	if err != nil {
		t.Fatalf("decoding the re-encoded request: %v", err)
	}
	if again.ID != req.ID || again.Call.Function != req.Call.Function || len(again.Extensions) != 2 {
		t.Errorf("second round trip = %+v", again)
	}
}

func TestResponseWithNullID(t *testing.T) {
	const doc = `{"protocol":{"name":"forrst","version":"0.1.0"},"id":null,"result":null,"errors":[{"code":"PARSE_ERROR","message":"bad"}]}`
	resp, err := forrst.DecodeResponse(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatalf("DecodeResponse: %v", err)
	}
	if resp.ID != "" || resp.Errors[0].Code != "PARSE_ERROR" {
		t.Errorf("decoded %+v", resp)
	}
	out, _ := json.Marshal(resp)
	wantJSON(t, "re-encoded", out, doc)
}

func TestSuccessResponseDecodes(t *testing.T) {
	const doc = `{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r1","result":{"total":3},"meta":{"node":"a"}}`
	resp, err := forrst.DecodeResponse(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatalf("DecodeResponse: %v", err)
	}
	if len(resp.Errors) != 0 {
		t.Errorf("errors = %+v", resp.Errors)
	}
	wantJSON(t, "result", resp.Result, `{"total":3}`)
	out, _ := json.Marshal(resp)
	wantJSON(t, "re-encoded", out, doc)
	// A success encodes no errors member at all.
	var members map[string]json.RawMessage
	_ = json.Unmarshal(out, &members)
	if _, ok := members["errors"]; ok {
		t.Errorf("a success encodes errors: %s", out)
	}
}

const (
	validResponse = `{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r1","result":null,"errors":[{"code":"UNAVAILABLE","message":"m"}]}`
	validRequest  = `{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r1","call":{"function":"f","arguments":{}}}`
)

func TestDecodeResponseStrictness(t *testing.T) {
	const proto = `"protocol":{"name":"forrst","version":"0.1.0"}`
	cases := []struct {
		name, doc string
		want      error
		mentions  string // a word the error should name, if any
	}{
		{"empty", ``, forrst.ErrMalformed, ""},
		{"whitespace", " \n\t", forrst.ErrMalformed, ""},
		{"truncated", `{"protocol":`, forrst.ErrMalformed, ""},
		{"unterminated string", `{` + proto + `,"id":"r1`, forrst.ErrMalformed, ""},
		{"not JSON", `<html>502 Bad Gateway</html>`, forrst.ErrMalformed, ""},
		{"array", `[` + validResponse + `]`, forrst.ErrInvalid, "array"},
		{"empty array", `[]`, forrst.ErrInvalid, "array"},
		{"string", `"forrst"`, forrst.ErrInvalid, "string"},
		{"number", `42`, forrst.ErrInvalid, "number"},
		{"null", `null`, forrst.ErrInvalid, "null"},
		{"trailing document", validResponse + ` {}`, forrst.ErrMalformed, ""},
		{"trailing garbage", validResponse + `x`, forrst.ErrMalformed, ""},
		{"trailing second copy", validResponse + validResponse, forrst.ErrMalformed, ""},
		{"protocol as string", `{"protocol":"forrst/0.1","id":"r1","result":1}`, forrst.ErrInvalid, "protocol"},
		{"protocol as array", `{"protocol":["forrst"],"id":"r1","result":1}`, forrst.ErrInvalid, "protocol"},
		{"id as number", `{` + proto + `,"id":5,"result":1}`, forrst.ErrInvalid, "id"},
		{"id as object", `{` + proto + `,"id":{},"result":1}`, forrst.ErrInvalid, "id"},
		{"errors as object", `{` + proto + `,"id":"r1","result":null,"errors":{"code":"X","message":"m"}}`, forrst.ErrInvalid, "errors"},
		{"errors as string", `{` + proto + `,"id":"r1","result":null,"errors":"X"}`, forrst.ErrInvalid, "errors"},
		{"error as string", `{` + proto + `,"id":"r1","result":null,"errors":["X"]}`, forrst.ErrInvalid, "errors"},
		{"code as number", `{` + proto + `,"id":"r1","result":null,"errors":[{"code":500,"message":"m"}]}`, forrst.ErrInvalid, "code"},
		{"message as number", `{` + proto + `,"id":"r1","result":null,"errors":[{"code":"X","message":1}]}`, forrst.ErrInvalid, "message"},
		{"extensions as object", `{` + proto + `,"id":"r1","result":1,"extensions":{"urn":"x"}}`, forrst.ErrInvalid, "extensions"},
		{"urn as number", `{` + proto + `,"id":"r1","result":1,"extensions":[{"urn":1}]}`, forrst.ErrInvalid, "urn"},
		{"protocol name", `{"protocol":{"name":"jsonrpc","version":"2.0"},"id":"r1","result":1}`, forrst.ErrInvalid, "jsonrpc"},
		{"protocol missing", `{"id":"r1","result":1}`, forrst.ErrInvalid, "protocol"},
		{"failed with result", `{` + proto + `,"id":"r1","result":{"ok":true},"errors":[{"code":"UNAVAILABLE","message":"m"}]}`, forrst.ErrInvalid, "result"},
		{"failed with result false", `{` + proto + `,"id":"r1","result":false,"errors":[{"code":"UNAVAILABLE","message":"m"}]}`, forrst.ErrInvalid, "result"},
		{"error without code", `{` + proto + `,"id":"r1","result":null,"errors":[{"message":"m"}]}`, forrst.ErrInvalid, "code"},
		{"details as string", `{` + proto + `,"id":"r1","result":null,"errors":[{"code":"X","message":"m","details":"[1]"}]}`, forrst.ErrInvalid, "details"},
		{"extension without urn", `{` + proto + `,"id":"r1","result":1,"extensions":[{"data":{}}]}`, forrst.ErrInvalid, "urn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := forrst.DecodeResponse(strings.NewReader(c.doc), 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want one wrapping %v", err, c.want)
			}
			if resp != nil {
				t.Errorf("a document came back with the error: %+v", resp)
			}
			if c.mentions != "" && !strings.Contains(err.Error(), c.mentions) {
				t.Errorf("error %q does not say what is wrong (%q)", err, c.mentions)
			}
		})
	}
}

func TestDecodeRequestStrictness(t *testing.T) {
	const proto = `"protocol":{"name":"forrst","version":"0.1.0"}`
	cases := []struct {
		name, doc string
		want      error
		mentions  string
	}{
		{"truncated", `{` + proto + `,"id":"r1","call":{`, forrst.ErrMalformed, ""},
		{"array", `[` + validRequest + `]`, forrst.ErrInvalid, "array"},
		{"string", `"call f"`, forrst.ErrInvalid, "string"},
		{"trailing document", validRequest + `{}`, forrst.ErrMalformed, ""},
		{"trailing garbage", validRequest + ` ]`, forrst.ErrMalformed, ""},
		{"protocol name", `{"protocol":{"name":"jsonrpc","version":"0.1.0"},"id":"r1","call":{"function":"f"}}`, forrst.ErrInvalid, "jsonrpc"},
		{"protocol version missing", `{"protocol":{"name":"forrst"},"id":"r1","call":{"function":"f"}}`, forrst.ErrInvalid, "version"},
		{"protocol as string", `{"protocol":"forrst/0.1","id":"r1","call":{"function":"f"}}`, forrst.ErrInvalid, "protocol"},
		{"id missing", `{` + proto + `,"call":{"function":"f"}}`, forrst.ErrInvalid, "id"},
		{"id empty", `{` + proto + `,"id":"","call":{"function":"f"}}`, forrst.ErrInvalid, "id"},
		{"id null", `{` + proto + `,"id":null,"call":{"function":"f"}}`, forrst.ErrInvalid, "id"},
		{"id as number", `{` + proto + `,"id":7,"call":{"function":"f"}}`, forrst.ErrInvalid, "id"},
		{"call missing", `{` + proto + `,"id":"r1"}`, forrst.ErrInvalid, "function"},
		{"function missing", `{` + proto + `,"id":"r1","call":{"arguments":{}}}`, forrst.ErrInvalid, "function"},
		{"call as string", `{` + proto + `,"id":"r1","call":"f"}`, forrst.ErrInvalid, "call"},
		{"function as number", `{` + proto + `,"id":"r1","call":{"function":1}}`, forrst.ErrInvalid, "function"},
		{"arguments as array", `{` + proto + `,"id":"r1","call":{"function":"f","arguments":[1,2]}}`, forrst.ErrInvalid, "arguments"},
		{"arguments as string", `{` + proto + `,"id":"r1","call":{"function":"f","arguments":"x"}}`, forrst.ErrInvalid, "arguments"},
		{"context as array", `{` + proto + `,"id":"r1","call":{"function":"f"},"context":[]}`, forrst.ErrInvalid, "context"},
		{"extensions as object", `{` + proto + `,"id":"r1","call":{"function":"f"},"extensions":{}}`, forrst.ErrInvalid, "extensions"},
		{"extension without urn", `{` + proto + `,"id":"r1","call":{"function":"f"},"extensions":[{"options":{}}]}`, forrst.ErrInvalid, "urn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := forrst.DecodeRequest(strings.NewReader(c.doc), 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want one wrapping %v", err, c.want)
			}
			if req != nil {
				t.Errorf("a document came back with the error: %+v", req)
			}
			if c.mentions != "" && !strings.Contains(err.Error(), c.mentions) {
				t.Errorf("error %q does not say what is wrong (%q)", err, c.mentions)
			}
		})
	}
}

// pad makes doc exactly n bytes long with trailing spaces.
func pad(doc string, n int) string { return doc + strings.Repeat(" ", n-len(doc)) }

func TestSizeLimit(t *testing.T) {
	const limit = 200
	if _, err := forrst.DecodeResponse(strings.NewReader(pad(validResponse, limit)), limit); err != nil {
		t.Errorf("a response of exactly the limit: %v", err)
	}
	if _, err := forrst.DecodeResponse(strings.NewReader(pad(validResponse, limit+1)), limit); !errors.Is(err, forrst.ErrTooLarge) {
		t.Errorf("a response one byte over the limit: err = %v, want ErrTooLarge", err)
	}
	if _, err := forrst.DecodeRequest(strings.NewReader(pad(validRequest, limit)), limit); err != nil {
		t.Errorf("a request of exactly the limit: %v", err)
	}
	if _, err := forrst.DecodeRequest(strings.NewReader(pad(validRequest, limit+1)), limit); !errors.Is(err, forrst.ErrTooLarge) {
		t.Errorf("a request one byte over the limit: err = %v, want ErrTooLarge", err)
	}
	// Limit 0 means the default of 1 MiB.
	const mib = 1 << 20
	if forrst.DefaultMaxDocumentSize != mib {
		t.Errorf("DefaultMaxDocumentSize = %d, want 1 MiB", forrst.DefaultMaxDocumentSize)
	}
	if _, err := forrst.DecodeResponse(strings.NewReader(pad(validResponse, mib)), 0); err != nil {
		t.Errorf("a 1 MiB response with the default limit: %v", err)
	}
	if _, err := forrst.DecodeResponse(strings.NewReader(pad(validResponse, mib+1)), 0); !errors.Is(err, forrst.ErrTooLarge) {
		t.Errorf("1 MiB + 1 with the default limit: err = %v, want ErrTooLarge", err)
	}
	if _, err := forrst.DecodeRequest(strings.NewReader(pad(validRequest, mib+1)), 0); !errors.Is(err, forrst.ErrTooLarge) {
		t.Errorf("a request of 1 MiB + 1 with the default limit: err = %v, want ErrTooLarge", err)
	}
}

// endless is a reader that never ends; it counts what was read.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.read += int64(len(p))
	return len(p), nil
}

// A peer that never stops sending cannot make the decoder read without end.
func TestEndlessDocumentIsCutAtTheLimit(t *testing.T) {
	r := &endless{}
	_, err := forrst.DecodeResponse(io.MultiReader(strings.NewReader(`{"id":`), r), 4096)
	if !errors.Is(err, forrst.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if r.read > 2*4096 {
		t.Errorf("read %d bytes for a limit of 4096", r.read)
	}
}

// A document whose reading fails is ErrMalformed with the read's error in
// its chain, not only in its text: a caller can tell a reset from bad JSON.
func TestDecodeKeepsTheReadError(t *testing.T) {
	cut := func(doc string) io.Reader {
		return io.MultiReader(strings.NewReader(doc[:len(doc)/2]), iotest.ErrReader(io.ErrUnexpectedEOF))
	}
	if _, err := forrst.DecodeResponse(cut(validResponse), 0); !errors.Is(err, forrst.ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("DecodeResponse: err = %v, want ErrMalformed and the read's error", err)
	}
	if _, err := forrst.DecodeRequest(cut(validRequest), 0); !errors.Is(err, forrst.ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("DecodeRequest: err = %v, want ErrMalformed and the read's error", err)
	}
}

func TestRetryDataStrictness(t *testing.T) {
	cases := []struct{ name, data string }{
		{"no data", ``},
		{"null", `null`},
		{"array", `[{"allowed":true}]`},
		{"string", `"retry"`},
		{"unknown strategy", `{"allowed":true,"strategy":"linear","after":{"value":1,"unit":"second"}}`},
		{"strategy in capitals", `{"allowed":true,"strategy":"Fixed","after":{"value":1,"unit":"second"}}`},
		{"unit millisecond", `{"allowed":true,"strategy":"fixed","after":{"value":500,"unit":"millisecond"}}`},
		{"unit plural", `{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"seconds"}}`},
		{"unit missing", `{"allowed":true,"strategy":"fixed","after":{"value":1}}`},
		{"negative value", `{"allowed":true,"strategy":"fixed","after":{"value":-1,"unit":"second"}}`},
		{"beyond int64", `{"allowed":true,"strategy":"fixed","after":{"value":1e30,"unit":"second"}}`},
		{"fractional value", `{"allowed":true,"strategy":"fixed","after":{"value":1.5,"unit":"second"}}`},
		{"negative max_attempts", `{"allowed":true,"strategy":"fixed","max_attempts":-1}`},
		{"huge max_attempts", `{"allowed":true,"max_attempts":99999999999999999999}`},
		{"fractional max_attempts", `{"allowed":true,"max_attempts":1.5}`},
		{"unknown member", `{"allowed":true,"strategy":"fixed","jitter":"full"}`},
		{"unknown member in after", `{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"second","jitter":1}}`},
		{"allowed as string", `{"allowed":"true"}`},
		{"allowed as number", `{"allowed":1}`},
		{"strategy as number", `{"allowed":true,"strategy":1}`},
		{"after as number", `{"allowed":true,"strategy":"fixed","after":60}`},
		{"after as string", `{"allowed":true,"strategy":"fixed","after":"60s"}`},
		{"value as string", `{"allowed":true,"strategy":"fixed","after":{"value":"60","unit":"second"}}`},
		{"max_attempts as string", `{"allowed":true,"max_attempts":"3"}`},
		{"trailing data", `{"allowed":true}{"allowed":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ext := forrst.Extension{URN: urnRetry, Data: json.RawMessage(c.data)}
			d, err := ext.Retry()
			if !errors.Is(err, forrst.ErrInvalid) {
				t.Fatalf("Retry() = %+v, %v; want an error wrapping ErrInvalid", d, err)
			}
			if !reflect.DeepEqual(d, forrst.RetryData{}) {
				t.Errorf("data %+v came back with the error", d)
			}
		})
	}
}

func TestRetryDataAccepted(t *testing.T) {
	cases := []struct {
		data string
		want forrst.RetryData
	}{
		{`{"allowed":false}`, forrst.RetryData{}},
		{`{"allowed":true}`, forrst.RetryData{Allowed: true}},
		{`{"allowed":true,"strategy":"fixed","after":{"value":2,"unit":"minute"}}`,
			forrst.RetryData{Allowed: true, Strategy: "fixed", After: &forrst.Duration{Value: 2, Unit: "minute"}}},
		{`{"allowed":true,"strategy":"exponential","after":{"value":0,"unit":"second"},"max_attempts":0}`,
			forrst.RetryData{Allowed: true, Strategy: "exponential", After: &forrst.Duration{Value: 0, Unit: "second"}}},
		// The largest whole number of minutes a time.Duration holds:
		// (2^63 - 1) ns / 60e9 ns = 153722867.28...
		{`{"allowed":true,"strategy":"fixed","after":{"value":153722867,"unit":"minute"}}`,
			forrst.RetryData{Allowed: true, Strategy: "fixed", After: &forrst.Duration{Value: 153722867, Unit: "minute"}}},
		{`{"allowed":true,"max_attempts":2147483647}`, forrst.RetryData{Allowed: true, MaxAttempts: 2147483647}},
	}
	for _, c := range cases {
		got, err := forrst.Extension{URN: urnRetry, Data: json.RawMessage(c.data)}.Retry()
		if err != nil {
			t.Errorf("%s: %v", c.data, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.data, got, c.want)
		}
	}
}

func TestDurationUnits(t *testing.T) {
	cases := []struct {
		d    forrst.Duration
		want time.Duration
	}{
		{forrst.Duration{Value: 250, Unit: "millisecond"}, 250 * time.Millisecond},
		{forrst.Duration{Value: 45, Unit: "second"}, 45 * time.Second},
		{forrst.Duration{Value: 3, Unit: "minute"}, 180 * time.Second},
		{forrst.Duration{Value: 2, Unit: "hour"}, 7200 * time.Second},
		{forrst.Duration{Value: 1, Unit: "day"}, 86400 * time.Second},
		{forrst.Duration{Value: 0, Unit: "second"}, 0},
		// The largest values of each unit that fit: (2^63 - 1) ns divided by the unit.
		{forrst.Duration{Value: 9223372036854, Unit: "millisecond"}, 9223372036854 * time.Millisecond},
		{forrst.Duration{Value: 9223372036, Unit: "second"}, 9223372036 * time.Second},
		{forrst.Duration{Value: 106751, Unit: "day"}, 106751 * 24 * time.Hour},
	}
	for _, c := range cases {
		got, err := c.d.Duration()
		if err != nil || got != c.want {
			t.Errorf("%+v.Duration() = %v, %v; want %v", c.d, got, err, c.want)
		}
	}
	bad := []forrst.Duration{
		{Value: 1, Unit: ""},
		{Value: 1, Unit: "week"},
		{Value: 1, Unit: "Second"},
		{Value: 1, Unit: "seconds"},
		{Value: -1, Unit: "second"},
		{Value: math.MinInt64, Unit: "millisecond"},
		{Value: 9223372036855, Unit: "millisecond"},
		{Value: 9223372037, Unit: "second"},
		{Value: 153722868, Unit: "minute"},
		{Value: 2562048, Unit: "hour"},
		{Value: 106752, Unit: "day"},
		{Value: math.MaxInt64, Unit: "day"},
	}
	for _, d := range bad {
		got, err := d.Duration()
		if !errors.Is(err, forrst.ErrInvalidDuration) || got != 0 {
			t.Errorf("%+v.Duration() = %v, %v; want 0 and ErrInvalidDuration", d, got, err)
		}
	}
}

func TestWait(t *testing.T) {
	sec := func(n int64) *forrst.Duration { return &forrst.Duration{Value: n, Unit: "second"} }
	cases := []struct {
		name string
		d    forrst.RetryData
		want []time.Duration // Wait(1), Wait(2), ...
	}{
		{"fixed 60 s", forrst.RetryData{Allowed: true, Strategy: "fixed", After: sec(60)},
			[]time.Duration{60 * time.Second, 60 * time.Second, 60 * time.Second, 60 * time.Second}},
		{"exponential 1 s", forrst.RetryData{Allowed: true, Strategy: "exponential", After: sec(1)},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}},
		{"exponential 2 s", forrst.RetryData{Allowed: true, Strategy: "exponential", After: sec(2)},
			[]time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{"exponential 1 minute", forrst.RetryData{Allowed: true, Strategy: "exponential", After: &forrst.Duration{Value: 1, Unit: "minute"}},
			[]time.Duration{60 * time.Second, 120 * time.Second, 240 * time.Second}},
		{"immediate", forrst.RetryData{Allowed: true, Strategy: "immediate"}, []time.Duration{0, 0, 0}},
		{"immediate with an after", forrst.RetryData{Allowed: true, Strategy: "immediate", After: sec(5)}, []time.Duration{0, 0}},
		{"fixed without after", forrst.RetryData{Allowed: true, Strategy: "fixed"}, []time.Duration{0, 0}},
		{"exponential zero", forrst.RetryData{Allowed: true, Strategy: "exponential", After: sec(0)}, []time.Duration{0, 0, 0}},
	}
	for _, c := range cases {
		for i, want := range c.want {
			if got := c.d.Wait(i + 1); got != want {
				t.Errorf("%s: Wait(%d) = %v, want %v", c.name, i+1, got, want)
			}
		}
	}
	exp := forrst.RetryData{Allowed: true, Strategy: "exponential", After: sec(1)}
	if got := exp.Wait(0); got != time.Second {
		t.Errorf("Wait(0) = %v, want the first retry's 1s", got)
	}
	// 2^33 s = 8.59e18 ns fits in an int64 (max 9.22e18), 2^34 s does not:
	// from retry 35 on, the waits saturate instead of wrapping.
	if got := exp.Wait(34); got != (1<<33)*time.Second {
		t.Errorf("Wait(34) = %v, want 2^33 s", got)
	}
	for _, n := range []int{35, 40, 63, 64, 100, 1 << 30, math.MaxInt} {
		if got := exp.Wait(n); got != math.MaxInt64 {
			t.Errorf("Wait(%d) = %v, want the largest time.Duration", n, got)
		}
	}
}

func TestDefaultGuidanceTable(t *testing.T) {
	sec := func(n int64) *forrst.Duration { return &forrst.Duration{Value: n, Unit: "second"} }
	table := map[forrst.Code]forrst.RetryData{
		"RATE_LIMITED":           {Allowed: true, Strategy: "fixed", After: sec(60), MaxAttempts: 3},
		"UNAVAILABLE":            {Allowed: true, Strategy: "exponential", After: sec(1), MaxAttempts: 5},
		"DEADLINE_EXCEEDED":      {Allowed: true, Strategy: "immediate", MaxAttempts: 1},
		"INTERNAL_ERROR":         {Allowed: true, Strategy: "exponential", After: sec(1), MaxAttempts: 3},
		"DEPENDENCY_ERROR":       {Allowed: true, Strategy: "exponential", After: sec(2), MaxAttempts: 3},
		"IDEMPOTENCY_PROCESSING": {Allowed: true, Strategy: "fixed", After: sec(1), MaxAttempts: 3},
		"SERVER_MAINTENANCE":     {Allowed: true, Strategy: "fixed", After: sec(60), MaxAttempts: 1},
		"FUNCTION_MAINTENANCE":   {Allowed: true, Strategy: "fixed", After: sec(60), MaxAttempts: 1},
		"FUNCTION_DISABLED":      {Allowed: true, Strategy: "fixed", After: sec(30), MaxAttempts: 2},
	}
	for code, want := range table {
		if got := forrst.DefaultGuidance(code); !reflect.DeepEqual(got, want) {
			t.Errorf("DefaultGuidance(%s) = %+v, want %+v", code, got, want)
		}
	}
	for _, code := range []forrst.Code{"INVALID_ARGUMENTS", "NOT_FOUND", "UNAUTHORIZED", "FORBIDDEN", "CANCELLED",
		"VALIDATION_ERROR", "IDEMPOTENCY_CONFLICT", "FUNCTION_NOT_FOUND", "PARSE_ERROR", "ORDERS_SOLD_OUT", ""} {
		if got := forrst.DefaultGuidance(code); !reflect.DeepEqual(got, forrst.RetryData{}) {
			t.Errorf("DefaultGuidance(%s) = %+v, want {allowed: false}", code, got)
		}
	}
}

func TestRateLimitDataStrictness(t *testing.T) {
	good := `{"limit":100,"used":100,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":45,"unit":"second"},"scope":"user"}`
	d, err := forrst.Extension{URN: urnRateLimit, Data: json.RawMessage(good)}.RateLimit()
	if err != nil {
		t.Fatal(err)
	}
	want := forrst.RateLimitData{Limit: 100, Used: 100, Window: forrst.Duration{Value: 1, Unit: "minute"},
		ResetsIn: forrst.Duration{Value: 45, Unit: "second"}, Scope: "user"}
	if d != want {
		t.Errorf("RateLimit() = %+v, want %+v", d, want)
	}
	for _, bad := range []string{
		`null`,
		`{"limit":-1,"used":0,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"second"}}`,
		`{"limit":1,"used":0,"remaining":-5,"window":{"value":1,"unit":"minute"},"resets_in":{"value":1,"unit":"second"}}`,
		`{"limit":1,"used":0,"remaining":0,"window":{"value":1,"unit":"fortnight"},"resets_in":{"value":1,"unit":"second"}}`,
		`{"limit":1,"used":0,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":-1,"unit":"second"}}`,
		// The seed's example names the field "reset"; the protocol's is resets_in.
		`{"limit":100,"remaining":0,"reset":{"value":45,"unit":"second"}}`,
		`{"limit":"100"}`,
	} {
		if d, err := (forrst.Extension{URN: urnRateLimit, Data: json.RawMessage(bad)}).RateLimit(); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("RateLimit(%s) = %+v, %v; want ErrInvalid", bad, d, err)
		}
	}
}

func TestIdempotencyOptionsStrictness(t *testing.T) {
	long := strings.Repeat("k", 255)
	for _, good := range []string{
		`{"key":"order_123"}`,
		`{"key":"A-Z_a-z:0-9.x"}`,
		`{"key":"` + long + `"}`,
		`{"key":"k","ttl":{"value":30,"unit":"day"}}`,
		`{"key":"k","ttl":{"value":1,"unit":"second"}}`,
	} {
		if _, err := (forrst.Extension{URN: urnIdempotency, Options: json.RawMessage(good)}).IdempotencyOptions(); err != nil {
			t.Errorf("IdempotencyOptions(%s): %v", good, err)
		}
	}
	for _, bad := range []string{
		``,
		`{}`,
		`{"key":""}`,
		`{"key":"` + long + `k"}`,
		`{"key":"has space"}`,
		`{"key":"slash/key"}`,
		`{"key":"ключ"}`,
		`{"key":7}`,
		`{"key":"k","ttl":{"value":0,"unit":"second"}}`,
		`{"key":"k","ttl":{"value":-1,"unit":"second"}}`,
		`{"key":"k","ttl":{"value":31,"unit":"day"}}`,
		`{"key":"k","ttl":{"value":1,"unit":"week"}}`,
		`{"key":"k","ttl":3600}`,
		`{"key":"k","scope":"user"}`,
	} {
		if o, err := (forrst.Extension{URN: urnIdempotency, Options: json.RawMessage(bad)}).IdempotencyOptions(); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("IdempotencyOptions(%s) = %+v, %v; want ErrInvalid", bad, o, err)
		}
	}
}

func TestCodeHTTPStatus(t *testing.T) {
	// The Forrst HTTP transport's mapping (protocol facts, section 2).
	want := map[forrst.Code]int{
		"RATE_LIMITED": 429, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504, "INTERNAL_ERROR": 500,
		"DEPENDENCY_ERROR": 502, "IDEMPOTENCY_PROCESSING": 409, "SERVER_MAINTENANCE": 503,
		"FUNCTION_MAINTENANCE": 503, "FUNCTION_DISABLED": 503,
		"INVALID_ARGUMENTS": 400, "SCHEMA_VALIDATION_FAILED": 422, "UNAUTHORIZED": 401, "FORBIDDEN": 403,
		"NOT_FOUND": 404, "CONFLICT": 409, "GONE": 410, "IDEMPOTENCY_CONFLICT": 409, "CANCELLED": 499,
		"FUNCTION_NOT_FOUND": 404, "PARSE_ERROR": 400, "INVALID_REQUEST": 400, "ORDERS_SOLD_OUT": 400,
	}
	for code, status := range want {
		if got := code.HTTPStatus(); got != status {
			t.Errorf("%s.HTTPStatus() = %d, want %d", code, got, status)
		}
	}
}
