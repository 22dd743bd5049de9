package forrst_test

// Guidance that says two things says neither: a member given twice, under
// the same name or in another letter case, and two retry extensions in one
// answer. encoding/json matches member names case-insensitively, keeping the
// last; other readers (and RFC 8259, section 8.3) compare names exactly. The
// extension decoders therefore match names exactly: a name in another case
// is no member of the extension, and refused as unknown.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

const (
	window    = `"limit":5,"used":5,"remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":9,"unit":"second"}`
	windowOne = `{` + window + `}`
)

// Every extension decoder refuses a member given twice or spelled in
// another case, at any depth, where encoding/json alone would take the last.
func TestExtensionDecodersRefuseRepeatedAndMiscasedMembers(t *testing.T) {
	for _, tc := range []struct {
		decoder string
		decode  func(string) error
		good    string   // accepted: the members as the extension names them
		bad     []string // refused
	}{
		{"Retry", decodes(forrst.Extension.Retry, false), `{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second"},"max_attempts":2}`, []string{
			`{"allowed":false,"Allowed":true,"strategy":"immediate"}`,
			`{"Allowed":true,"strategy":"immediate"}`,
			`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second"},"After":{"value":0,"unit":"second"}}`,
			`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second","Value":0}}`,
			`{"allowed":true,"strategy":"immediate","MAX_ATTEMPTS":9}`,
			`{"allowed":true,"strategy":"immediate","max_attemptſ":9}`, // ſ folds to s in encoding/json
		}},
		{"RateLimit", decodes(forrst.Extension.RateLimit, false), windowOne, []string{
			`{` + window + `,"remaining":5}`,
			`{` + window + `,"Remaining":5}`,
			`{"limit":5,"used":5,"Remaining":0,"window":{"value":1,"unit":"minute"},"resets_in":{"value":9,"unit":"second"}}`,
			`{` + window[:len(window)-1] + `,"Value":0}}`,
		}},
		{"RateLimits", decodes(forrst.Extension.RateLimits, false), `{"scopes":{"global":` + windowOne + `,"function":` + windowOne + `}}`, []string{
			`{"scopes":{"global":` + windowOne + `,"global":{"limit":5,"used":0,"remaining":5,"window":{"value":1,"unit":"minute"},"resets_in":{"value":9,"unit":"second"}}}}`,
			`{"scopes":{"global":{` + window + `,"Remaining":5}}}`,
			`{"scopes":{"global":` + windowOne + `},"Scopes":{}}`,
			`{"scopes":{"global":` + windowOne + `},"scopes":{"global":` + windowOne + `}}`,
		}},
		{"IdempotencyOptions", decodes(forrst.Extension.IdempotencyOptions, true), `{"key":"order_1","ttl":{"value":1,"unit":"hour"}}`, []string{
			`{"key":"order_1","Key":"order_2"}`,
			`{"key":"order_1","key":"order_2"}`,
			`{"Key":"order_1"}`,
			`{"key":"order_1","ttl":{"value":1,"unit":"hour","Unit":"day"}}`,
		}},
		{"Idempotency", decodes(forrst.Extension.Idempotency, false), `{"key":"k","status":"cached","original_request_id":"r1"}`, []string{
			`{"key":"k","status":"cached","Status":"processed"}`,
			`{"key":"k","status":"cached","status":"processed"}`,
			`{"key":"k","Status":"cached"}`,
		}},
	} {
		if err := tc.decode(tc.good); err != nil {
			t.Errorf("%s(%s) = %v, want it accepted", tc.decoder, tc.good, err)
		}
		for _, data := range tc.bad {
			if err := tc.decode(data); !errors.Is(err, forrst.ErrInvalid) {
				t.Errorf("%s(%s) = %v, want ErrInvalid", tc.decoder, data, err)
			}
		}
	}
}

// decodes adapts an extension decoder to data (or, for a request's
// extension, options) given as text.
func decodes[T any](decode func(forrst.Extension) (T, error), options bool) func(string) error {
	return func(raw string) error {
		e := forrst.Extension{Data: json.RawMessage(raw)}
		if options {
			e = forrst.Extension{Options: json.RawMessage(raw)}
		}
		_, err := decode(e)
		return err
	}
}

// End to end against a loopback server: guidance whose members are
// repeated in another case is no guidance the client follows, but its
// "allowed": false in any case still stops it, and its longest after still
// bounds its wait (an hour, past the zero client's 5 min cap: it stops).
func TestClientMiscasedGuidanceNeverRetriesSooner(t *testing.T) {
	for _, tc := range []struct {
		data      string
		retryWait time.Duration // the wait the client stops at, over its cap; 0: refused outright
	}{
		{`{"allowed":false,"Allowed":true,"strategy":"immediate"}`, 0},
		{`{"Allowed":true,"allowed":false,"strategy":"immediate"}`, 0},
		{`{"Allowed":false,"strategy":"immediate"}`, 0},
		{`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second"},"After":{"value":0,"unit":"second"}}`, time.Hour},
		{`{"allowed":true,"strategy":"fixed","After":{"value":0,"unit":"second"},"after":{"value":3600,"unit":"second"}}`, time.Hour},
		{`{"allowed":true,"strategy":"fixed","after":{"value":3600,"unit":"second","Value":0}}`, time.Hour},
		{`{"allowed":true,"strategy":"immediate","After":{"value":60,"unit":"minute"}}`, time.Hour},
	} {
		t.Run(tc.data, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, failDoc("UNAVAILABLE", tc.data))
			})
			stopsAtOnce(t, srv.URL, n.Load, tc.retryWait)
		})
	}
}

// Two retry extensions in one answer (under either form of the URN) say two
// things about retrying: the client follows neither. Any that says
// "allowed": false stops it, and its retries wait at least the longest
// after of them all; what is left is the table's reading, not the server's
// permission.
func TestClientTwoRetryExtensionsSayNeither(t *testing.T) {
	const (
		immediate = `{"allowed":true,"strategy":"immediate"}`
		refused   = `{"allowed":false}`
		hourly    = `{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"hour"}}`
	)
	second := func(urn, data string) string { return `{"urn":"` + urn + `","data":` + data + `}` }
	for _, tc := range []struct {
		name      string
		first     string
		second    string
		retryWait time.Duration // as in TestClientMiscasedGuidanceNeverRetriesSooner
	}{
		{"permissive first", immediate, second(urnRetry, refused), 0},
		{"permissive first, the reference server's URN", immediate, second("urn:cline:forrst:ext:retry", refused), 0},
		{"refusal first", refused, second(urnRetry, immediate), 0},
		{"refusal unreadable", immediate, second(urnRetry, `{"allowed":false,"jitter":1}`), 0},
		{"immediate, then an hour", immediate, second(urnRetry, hourly), time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, failDoc("UNAVAILABLE", tc.first, tc.second))
			})
			stopsAtOnce(t, srv.URL, n.Load, tc.retryWait)
		})
	}

	// Two that agree still say it twice: the table's reading (UNAVAILABLE:
	// exponential from 1 s), which is not the server's permission. Of two
	// that disagree, the one that waits longer is waited for, its growth
	// included: never sooner than either says.
	for _, tc := range []struct {
		name   string
		first  string
		second string
		waits  []time.Duration
	}{
		{"two that agree", immediate, immediate, []time.Duration{time.Second, 2 * time.Second}},
		{"two that disagree", immediate, `{"allowed":true,"strategy":"exponential","after":{"value":10,"unit":"second"}}`,
			[]time.Duration{10 * time.Second, 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, failDoc("UNAVAILABLE", tc.first, second(urnRetry, tc.second)))
			})
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(3)}
				err := c.Call(context.Background(), "f", nil, nil)
				ce := wantCallError(t, err, forrst.CodeUnavailable, http.StatusServiceUnavailable)
				if ce.FromServer || ce.RetryInfo().Allowed {
					t.Errorf("FromServer %v, %+v; want the table's guidance, no permission", ce.FromServer, ce.RetryInfo())
				}
				if n.Load() != 3 {
					t.Errorf("%d requests, want 3", n.Load())
				}
				wantWaits(t, st, tc.waits...)
			})
		})
	}
}

// stopsAtOnce calls url once with a zero-config client in virtual time and
// checks that it made one request and gave up at once: refused (retryWait
// 0), or past its 5 min cap with a wait of retryWait.
func stopsAtOnce(t *testing.T, url string, requests func() int32, retryWait time.Duration) {
	t.Helper()
	virtual(t, func(t *testing.T, hc *http.Client, _ *stamps) {
		c := &forrst.Client{URL: url, HTTPClient: hc}
		start := time.Now()
		err := c.Call(context.Background(), "f", nil, nil)
		took := time.Since(start)
		ce := wantCallError(t, err, forrst.CodeUnavailable, http.StatusServiceUnavailable)
		if ce.FromServer {
			t.Errorf("guidance %+v taken as the server's", ce.Guidance)
		}
		if retryWait == 0 {
			if !errors.Is(err, retry.ErrNotRetryable) || ce.Guidance.Allowed {
				t.Errorf("err %v, guidance %+v; want no retry", err, ce.Guidance)
			}
		} else {
			var rae *retry.RetryAfterError
			if !errors.As(err, &rae) || rae.RetryAfter != retryWait {
				t.Errorf("err %v; want a RetryAfterError for %v", err, retryWait)
			}
		}
		if requests() != 1 || took != 0 {
			t.Errorf("%d requests in %v; want one, at once", requests(), took)
		}
	})
}

// The documents' own members follow the rule too: a member of the envelope
// given twice, in any letter case, makes the document invalid, where
// encoding/json would take the last (an extension entry's "Data" after its
// "data", a second "extensions" list). What the envelope carries as it was
// sent (a result, arguments, an extension's data) is its reader's to judge,
// and members the protocol does not name are still ignored.
func TestDocumentMemberGivenTwiceIsRefused(t *testing.T) {
	const head = `{"protocol":` + protocolJSON + `,"id":"r","result":null,"errors":[{"code":"NOT_FOUND","message":"m"}]`
	for _, doc := range []string{
		head + `,"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false},"Data":{"allowed":true,"strategy":"immediate"}}]}`,
		head + `,"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false},"data":{"allowed":true}}]}`,
		head + `,"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false}}],"Extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":true}}]}`,
		head + `,"Errors":[{"code":"UNAVAILABLE","message":"m"}]}`,
		head[:len(head)-2] + `,"Code":"UNAVAILABLE"}]}`,
		`{"protocol":` + protocolJSON + `,"Protocol":{"name":"other","version":"1"},"id":"r","result":null}`,
	} {
		if _, err := forrst.DecodeResponse(strings.NewReader(doc), 0); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("DecodeResponse(%s) = %v, want ErrInvalid", doc, err)
		}
	}
	for _, doc := range []string{
		`{"protocol":` + protocolJSON + `,"id":"r","call":{"function":"f"},"Call":{"function":"g"}}`,
		`{"protocol":` + protocolJSON + `,"id":"r","call":{"function":"f","Function":"g"}}`,
		requestDoc("r", "f", "", `{"urn":"urn:forrst:ext:idempotency","options":{"key":"a"},"Options":{"key":"b"}}`),
	} {
		if _, err := forrst.DecodeRequest(strings.NewReader(doc), 0); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("DecodeRequest(%s) = %v, want ErrInvalid", doc, err)
		}
	}
	// Accepted: repeats inside what the envelope carries as sent, and
	// members the protocol does not name.
	for _, doc := range []string{
		`{"protocol":` + protocolJSON + `,"id":"r","result":{"a":1,"a":2,"A":3},"meta":{"m":1,"m":2},"vendor":1,"vendor":2}`,
		head[:len(head)-2] + `,"details":{"d":1,"d":2}}],"extensions":[{"urn":"x:y","data":{"k":1,"k":2}}]}`,
	} {
		if _, err := forrst.DecodeResponse(strings.NewReader(doc), 0); err != nil {
			t.Errorf("DecodeResponse(%s) = %v, want it accepted", doc, err)
		}
	}
	if _, err := forrst.DecodeRequest(strings.NewReader(requestDoc("r", "f", `{"a":1,"a":2}`)), 0); err != nil {
		t.Errorf("arguments with a repeated member: %v, want them left to the function", err)
	}
}

// End to end: a NOT_FOUND whose retry entry carries its data twice is not
// taken as guidance at all (neither its "allowed": true nor its "false"),
// and a 404 is not retried; a request that names its call twice runs
// neither function.
func TestDocumentMemberGivenTwiceEndToEnd(t *testing.T) {
	srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"req_x","result":null,"errors":[{"code":"NOT_FOUND","message":"m"}],`+
			`"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":false},"Data":{"allowed":true,"strategy":"immediate"}}]}`)
	})
	virtual(t, func(t *testing.T, hc *http.Client, _ *stamps) {
		err := (&forrst.Client{URL: srv.URL, HTTPClient: hc}).Call(context.Background(), "f", nil, nil)
		var he *forrst.HTTPError
		if !errors.As(err, &he) || !errors.Is(err, forrst.ErrInvalid) || n.Load() != 1 {
			t.Errorf("err %v after %d requests; want one, refused as an invalid document", err, n.Load())
		}
	})

	var runs atomic.Int32
	var s forrst.Server
	for _, name := range []string{"report", "delete"} {
		s.Register(name, func(context.Context, json.RawMessage) (any, error) {
			runs.Add(1)
			return true, nil
		})
	}
	srv = newServer(t, &s)
	r := post(t, srv.URL, `{"protocol":`+protocolJSON+`,"id":"r","call":{"function":"report"},"Call":{"function":"delete"}}`)
	if r.code() != "INVALID_REQUEST" || runs.Load() != 0 {
		t.Errorf("answer %s after %d runs; want INVALID_REQUEST and none", r.Body, runs.Load())
	}
}
