package forrst

// The fuzz targets live in the package itself: FuzzGuidance reads answers
// through newCallError, the client's interpretation of a failed response.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

var fuzzResponses = []string{
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_123","result":null,"errors":[{"code":"UNAVAILABLE","message":"Service temporarily unavailable"}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_456","result":null,"errors":[{"code":"RATE_LIMITED","message":"Rate limit exceeded"}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":3}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_789","result":null,"errors":[{"code":"DEADLINE_EXCEEDED","message":"Request deadline exceeded"}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":true,"strategy":"immediate","max_attempts":1}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_error","result":null,"errors":[{"code":"INVALID_ARGUMENTS","message":"Invalid email format","source":{"pointer":"/call/arguments/email"}}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":null,"result":{"a":[1,2,{"b":null}]},"meta":{"node":"x"}}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null,"errors":[],"extensions":[{"urn":"urn:forrst:ext:rate-limit","data":{"limit":1,"used":1,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":9,"unit":"second"}}},{"urn":"u","data":null}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null,"errors":[{"code":"X","message":"\u003c\u00e9\ud83d\ude00","details":{"retry_after":{"value":1,"unit":"hour"}}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req-694014b0c582d","result":null,"errors":[{"code":"INVALID_REQUEST","message":"Invalid request","details":[{"status":"400","source":{"pointer":"/"},"title":"Malformed request","detail":"Request must be a JSON object, not an array."}]}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null,"errors":[{"code":"X","message":"m","details":[]},{"code":"Y","message":"m","details":"s"}]}`,
	`{"protocol":"forrst/0.1","id":5}`,
	`[]`,
	`true`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null} {}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null,"errors":[{"code":"LOCK_TIMEOUT","message":"m"}],"extensions":[{"urn":"urn:cline:forrst:ext:retry","data":{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":3}},{"urn":"urn:cline:forrst:ext:rate-limit","data":{}},{"urn":"urn:cline:forrst:ext:","data":null}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":null,"errors":[{"code":"NOT_FOUND","message":"m"}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false},"Data":{"allowed":true}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"r","result":{"a":1,"a":2},"errors":[],"Extensions":[],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false}},{"urn":"urn:forrst:ext:retry","data":{"allowed":true}}],"x":1,"x":2}`,
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range fuzzResponses {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := DecodeResponse(bytes.NewReader(data), 0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps none of ErrMalformed, ErrInvalid, ErrTooLarge", err)
			}
			if resp != nil {
				t.Fatal("a response came back with the error")
			}
			return
		}
		if foldRepeats(data, "protocol", "id", "result", "errors", "extensions", "meta") {
			t.Fatalf("a response whose member is given twice was accepted:\n%s", data)
		}
		first, err := json.Marshal(resp)
		if err != nil {
			t.Fatalf("an accepted response does not encode: %v", err)
		}
		again, err := DecodeResponse(bytes.NewReader(first), 0)
		if err != nil {
			t.Fatalf("the re-encoded response is rejected: %v\n%s", err, first)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("the document changed on a second round trip:\n%s\n%s", first, second)
		}
		if resp.ID != again.ID || len(resp.Errors) != len(again.Errors) || len(resp.Extensions) != len(again.Extensions) {
			t.Fatalf("decoded differently: %+v / %+v", resp, again)
		}
		// The extension decoders never panic on what a peer sends, and the
		// reference server's URNs are read in the specification's form.
		for _, e := range resp.Extensions {
			if strings.HasPrefix(e.URN, "urn:cline:forrst:ext:") {
				t.Fatalf("decoded URN %q not in the specification's form", e.URN)
			}
			_, _ = e.Retry()
			_, _ = e.RateLimit()
			_, _ = e.Idempotency()
		}
	})
}

var fuzzRequests = []string{
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_1","call":{"function":"f","version":"2","arguments":{"a":1}},"context":{"t":"x"},"extensions":[{"urn":"urn:forrst:ext:idempotency","options":{"key":"order_123","ttl":{"value":1,"unit":"hour"}}}]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_2","call":{"function":"f"}}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_3","call":{"function":"f","arguments":null},"context":null,"meta":[1]}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_4","call":{"function":"f","arguments":{}},"extensions":[{"urn":"urn:forrst:ext:idempotency","options":{"key":""}}]}`,
	`{"protocol":{"name":"forrst","version":"1.0"},"id":"req_5","call":{"function":"nope"}}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"","call":{"function":"f"}}`,
	`{"id":7}`,
	`"x"`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_6","call":{"function":"f","arguments":{"a":1}},"extensions":[{"urn":"urn:cline:forrst:ext:idempotency","options":{"key":"k"}},{"urn":"urn:cline:forrst:fn:ping"}]}`,
	"[\n    1,\n    2,\n    3\n]", // JSON but not an object: INVALID_REQUEST
	` null `,
	`-1.5e3`,
	`[1,`, // malformed: PARSE_ERROR
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_7","call":{"function":"f"},"Call":{"function":"g"}}`,
	`{"protocol":{"name":"forrst","version":"0.1.0"},"id":"req_8","call":{"function":"f","arguments":{"a":1,"A":2,"a":3}},"extensions":[{"urn":"urn:forrst:ext:idempotency","options":{"key":"k"},"Options":{"key":"j"}}]}`,
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range fuzzRequests {
		f.Add([]byte(s))
	}
	// A server that echoes its arguments, for every input as a request body.
	var s Server
	s.Register("f", func(ctx context.Context, args json.RawMessage) (any, error) { return args, nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(bytes.NewReader(data), 0)
		if err == nil && foldRepeats(data, "protocol", "id", "call", "context", "extensions", "meta") {
			t.Fatalf("a request whose member is given twice was accepted:\n%s", data)
		}
		if err == nil {
			first, err := json.Marshal(req)
			if err != nil {
				t.Fatalf("an accepted request does not encode: %v", err)
			}
			again, err := DecodeRequest(bytes.NewReader(first), 0)
			if err != nil {
				t.Fatalf("the re-encoded request is rejected: %v\n%s", err, first)
			}
			second, _ := json.Marshal(again)
			if !bytes.Equal(first, second) {
				t.Fatalf("the document changed on a second round trip:\n%s\n%s", first, second)
			}
			for _, e := range req.Extensions {
				if strings.HasPrefix(e.URN, "urn:cline:forrst:ext:") {
					t.Fatalf("decoded URN %q not in the specification's form", e.URN)
				}
				_, _ = e.IdempotencyOptions()
			}
		} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error %v wraps none of ErrMalformed, ErrInvalid, ErrTooLarge", err)
		}

		// Whatever it is sent, the server answers with a valid response.
		hr := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
		hr.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, hr)
		resp, derr := DecodeResponse(w.Body, 0)
		if derr != nil {
			t.Fatalf("the server's answer is not a valid response: %v\n%s", derr, w.Body.Bytes())
		}
		if (w.Code == http.StatusOK) != (len(resp.Errors) == 0) {
			t.Fatalf("status %d with errors %+v", w.Code, resp.Errors)
		}
		if len(resp.Errors) > 0 {
			ext, ok := resp.Extension(URNRetry)
			if !ok {
				t.Fatal("a failure without retry guidance")
			}
			if _, err := ext.Retry(); err != nil {
				t.Fatalf("the server's guidance is invalid: %v", err)
			}
		}
	})
}

var fuzzGuidance = []string{
	`{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"max_attempts":3}`,
	`{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}`,
	`{"allowed":true,"strategy":"immediate","max_attempts":1}`,
	`{"allowed":true,"strategy":"exponential","after":{"value":2,"unit":"second"},"max_attempts":3}`,
	`{"allowed":true,"strategy":"fixed","after":{"value":30,"unit":"second"},"max_attempts":2}`,
	`{"allowed":false}`,
	`{"allowed":true,"strategy":"exponential","after":{"value":153722867,"unit":"minute"},"max_attempts":2147483647}`,
	`{"allowed":true,"strategy":"fixed","after":{"value":-1,"unit":"second"}}`,
	`{"allowed":true,"after":{"value":5,"unit":"minute"}}`,
	`{"retry_after":{"value":9223372036854775807,"unit":"millisecond"}}`,
	`{"limit":1,"used":1,"remaining":0,"window":{"value":1,"unit":"day"},"resets_in":{"value":-3,"unit":"second"}}`,
	`{"allowed":false,"Allowed":true,"strategy":"immediate"}`,
	`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second"},"After":{"value":0,"unit":"second"}}`,
	`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second","VALUE":0}}`,
	`{"limit":1,"used":1,"remaining":0,"Remaining":1,"window":{"value":1,"unit":"day"},"resets_in":{"value":3,"unit":"second"}}`,
}

func FuzzGuidance(f *testing.F) {
	for i, s := range fuzzGuidance {
		f.Add([]byte(s), "UNAVAILABLE", 1+i%4, "", true)
	}
	f.Add([]byte(`{"allowed":true}`), "RATE_LIMITED", 2, "120", false)
	f.Add([]byte(`{"allowed":true}`), "INTERNAL_ERROR", -5, "Wed, 21 Oct 2015 07:28:00 GMT", true)
	f.Add([]byte(`null`), "ORDERS_SOLD_OUT", 1<<40, "-1", true)
	f.Fuzz(func(t *testing.T, data []byte, code string, attempt int, retryAfter string, keyed bool) {
		g, err := Extension{URN: URNRetry, Data: data}.Retry()
		if err == nil {
			checkWaits(t, g)
			if !onlyMembers(data, "allowed", "strategy", "after", "max_attempts") {
				t.Fatalf("Retry accepted %s, whose members are not the extension's, each once", data)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
		if _, err := (Extension{URN: URNRateLimit, Data: data}).RateLimit(); err == nil &&
			!onlyMembers(data, "limit", "used", "remaining", "window", "resets_in", "scope", "warning") {
			t.Fatalf("RateLimit accepted %s, whose members are not the extension's, each once", data)
		}

		// The same bytes as every part of a failed answer a client reads.
		doc := &Response{
			Protocol: current(), ID: "r", Result: json.RawMessage("null"),
			Errors: []Error{{Code: Code(code), Message: "m", Details: json.RawMessage(data)}},
			Extensions: []Extension{
				{URN: URNRetry, Data: json.RawMessage(data)},
				{URN: URNRateLimit, Data: json.RawMessage(data)},
			},
		}
		for _, status := range []int{200, 429, 500, 503} {
			resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}}}
			ce := newCallError("f", doc, resp, attempt, keyed)
			info := ce.RetryInfo()
			if info.RetryAfter < 0 {
				t.Fatalf("negative RetryAfter %v", info.RetryAfter)
			}
			if ce.Guidance.Validate() != nil {
				t.Fatalf("the client acts on invalid guidance %+v", ce.Guidance)
			}
			if !ce.Guidance.Allowed && info.Safety != retry.Unsafe {
				t.Fatalf("guidance %+v forbids retrying, but the failure classifies as %v", ce.Guidance, info.Safety)
			}
			if ce.FromServer != (err == nil) {
				t.Fatalf("FromServer %v for data that decodes with %v", ce.FromServer, err)
			}

			// The same guidance twice says it twice: not the server's
			// word, and a refusal still refuses.
			twice := *doc
			twice.Extensions = append([]Extension{{URN: "urn:cline:forrst:ext:retry", Data: json.RawMessage(data)}}, doc.Extensions...)
			ce2 := newCallError("f", &twice, resp, attempt, keyed)
			if ce2.FromServer {
				t.Fatalf("two retry extensions taken as the server's guidance: %+v", ce2.Guidance)
			}
			if !ce.Guidance.Allowed && ce2.Guidance.Allowed {
				t.Fatalf("guidance %+v refuses once, but given twice allows %+v", ce.Guidance, ce2.Guidance)
			}
			if ce2.RetryInfo().Safety != retry.Unsafe && ce2.RetryInfo().RetryAfter < info.RetryAfter {
				t.Fatalf("given twice, guidance waits %v, given once %v", ce2.RetryInfo().RetryAfter, info.RetryAfter)
			}
		}
	})
}

// foldRepeats reports whether data is a JSON object that gives one of names
// twice, in any letter case.
func foldRepeats(data []byte, names ...string) bool {
	seen := map[string]bool{}
	for _, name := range memberNames(data) {
		for _, n := range names {
			if strings.EqualFold(n, name) {
				if seen[n] {
					return true
				}
				seen[n] = true
			}
		}
	}
	return false
}

// onlyMembers reports whether data is a JSON object whose members are among
// names, spelled exactly, each given once.
func onlyMembers(data []byte, names ...string) bool {
	got := memberNames(data)
	seen := map[string]bool{}
	for _, name := range got {
		if seen[name] || !slices.Contains(names, name) {
			return false
		}
		seen[name] = true
	}
	return got != nil
}

// memberNames returns the member names of the JSON object data, in order,
// repeats included; nil if data is no object.
func memberNames(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	names := []string{}
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		var v json.RawMessage
		if err != nil || dec.Decode(&v) != nil {
			return nil
		}
		names = append(names, name)
	}
	return names
}

// checkWaits checks the waits of valid guidance for retries 1 to 100.
func checkWaits(t *testing.T, g RetryData) {
	t.Helper()
	if err := g.Validate(); err != nil {
		t.Fatalf("Retry accepted guidance that Validate rejects: %v", err)
	}
	var after time.Duration
	if g.After != nil {
		var err error
		if after, err = g.After.Duration(); err != nil {
			t.Fatalf("valid guidance with an invalid after: %v", err)
		}
	}
	prev := time.Duration(0)
	for n := 1; n <= 100; n++ {
		w := g.Wait(n)
		if w < 0 {
			t.Fatalf("Wait(%d) = %v", n, w)
		}
		switch g.Strategy {
		case Immediate:
			if w != 0 {
				t.Fatalf("immediate: Wait(%d) = %v", n, w)
			}
		case Exponential:
			if w < prev || (n == 1 && w != after) {
				t.Fatalf("exponential from %v: Wait(%d) = %v after %v", after, n, w, prev)
			}
		default: // fixed, or no strategy: After every time
			if w != after {
				t.Fatalf("%q: Wait(%d) = %v, want %v", g.Strategy, n, w, after)
			}
		}
		prev = w
	}
}

// FuzzAnswer checks how the client tells its own answer from anything else:
// the Content-Type, the document, and the id it answers.
func FuzzAnswer(f *testing.F) {
	for i, s := range fuzzResponses {
		f.Add("application/json", "req_123", []byte(s))
		f.Add([]string{"application/json; charset=utf-8", "text/html", "", "application/problem+json", "application/json;;", "APPLICATION/JSON"}[i%6], "r", []byte(s))
	}
	f.Fuzz(func(t *testing.T, ct, id string, body []byte) {
		err := contentType(http.Header{"Content-Type": {ct}})
		if err != nil && !errors.Is(err, ErrContentType) {
			t.Fatalf("contentType(%q) = %v, not ErrContentType", ct, err)
		}
		doc, err := DecodeResponse(bytes.NewReader(body), 0)
		if err != nil {
			return
		}
		err = answers(doc, id)
		switch {
		case err == nil && doc.ID != id && !(doc.ID == "" && len(doc.Errors) > 0):
			t.Fatalf("an answer with id %q taken for request %q", doc.ID, id)
		case err != nil && (!errors.Is(err, ErrIDMismatch) || !errors.Is(err, ErrInvalid)):
			t.Fatalf("answers: %v wraps not ErrIDMismatch and ErrInvalid", err)
		case err != nil && doc.ID == id:
			t.Fatalf("the request's own answer rejected: %v", err)
		}
	})
}
