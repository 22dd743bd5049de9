package forrst

// Retry guidance in units the extension does not name, and guidance the
// client cannot read, never make the client retry sooner than the server
// asked: end to end against a loopback server in virtual time, and fuzzed
// through newCallError, the client's reading of a failed answer.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

const longestWait = time.Duration(math.MaxInt64)

// guidanceServer answers every call with a 503 UNAVAILABLE whose retry
// extension carries data (raw JSON), and counts the calls.
func guidanceServer(t *testing.T, data string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	proto, _ := json.Marshal(current())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req struct{ ID string }
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"protocol":`+string(proto)+`,"id":`+strconv.Quote(req.ID)+
			`,"result":null,"errors":[{"code":"UNAVAILABLE","message":"later"}],"extensions":[{"urn":"urn:forrst:ext:retry","data":`+data+`}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// sentAt records when, in the bubble's virtual time, each request left.
type sentAt struct {
	base http.RoundTripper
	mu   sync.Mutex
	at   []time.Time
}

func (s *sentAt) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.base.RoundTrip(r)
}

func (s *sentAt) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(s.at); i++ {
		w = append(w, s.at[i].Sub(s.at[i-1]))
	}
	return w
}

// callVirtually makes one call of c (its HTTPClient set here) to srv in a
// synctest bubble, and returns its error, the waits between its requests
// and how long it took.
func callVirtually(t *testing.T, c *Client, srv *httptest.Server) (err error, waits []time.Duration, took time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		base := &http.Transport{DisableKeepAlives: true} // an idle socket would stop the clock
		st := &sentAt{base: base}
		c.URL, c.HTTPClient = srv.URL, &http.Client{Transport: st}
		start := time.Now()
		err = c.Call(context.Background(), "f", nil, nil)
		took, waits = time.Since(start), st.waits()
		base.CloseIdleConnections()
	})
	return err, waits, took
}

// Retry reads an after in hours or days as the wait it says, in minutes,
// saturating as minutes do.
func TestRetryReadsHoursAndDays(t *testing.T) {
	const maxMinutes = math.MaxInt64 / int64(time.Minute)
	for _, tc := range []struct {
		after string
		want  Duration
		wait  time.Duration
	}{
		{`{"value":2,"unit":"hour"}`, Duration{120, Minute}, 2 * time.Hour},
		{`{"value":1,"unit":"day"}`, Duration{1440, Minute}, 24 * time.Hour},
		{`{"value":0,"unit":"day"}`, Duration{0, Minute}, 0},
		{`{"value":2562047,"unit":"hour"}`, Duration{153722820, Minute}, 2562047 * time.Hour},
		{`{"value":2562048,"unit":"hour"}`, Duration{maxMinutes, Minute}, time.Duration(maxMinutes) * time.Minute},
		{`{"value":99999999999999999999,"unit":"day"}`, Duration{maxMinutes, Minute}, time.Duration(maxMinutes) * time.Minute},
	} {
		g, err := Extension{URN: URNRetry, Data: json.RawMessage(`{"allowed":true,"strategy":"fixed","after":` + tc.after + `}`)}.Retry()
		if err != nil || g.After == nil || *g.After != tc.want || g.Wait(1) != tc.wait {
			t.Errorf("after %s: Retry() = %+v (after %v), %v; want after %+v, a wait of %v", tc.after, g, g.After, err, tc.want, tc.wait)
		}
	}
	// Unknown units, and a member given twice, stay invalid guidance.
	for _, data := range []string{
		`{"allowed":true,"after":{"value":2,"unit":"fortnight"}}`,
		`{"allowed":true,"after":{"value":2,"unit":"hours"}}`,
		`{"allowed":true,"after":{"value":60,"unit":"second"},"after":{"value":1,"unit":"second"}}`,
		`{"allowed":true,"after":{"value":60,"unit":"second","value":1}}`,
		`{"allowed":false,"allowed":true}`,
	} {
		if g, err := (Extension{URN: URNRetry, Data: json.RawMessage(data)}).Retry(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Retry(%s) = %+v, %v; want ErrInvalid", data, g, err)
		}
	}
}

// Guidance in hours or days asks for a wait past the client's MaxRetryAfter
// (5 min): the call stops at once, with the server's guidance and the wait
// it asked for, instead of retrying three times in 3 s as if it had sent
// none.
func TestClientGuidanceInHoursStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		data  string
		asked time.Duration
	}{
		{`{"allowed":true,"strategy":"fixed","after":{"value":2,"unit":"hour"},"max_attempts":3}`, 2 * time.Hour},
		{`{"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"hour"}}`, time.Hour},
		{`{"allowed":true,"strategy":"fixed","after":{"value":1,"unit":"day"}}`, 24 * time.Hour},
	} {
		t.Run(tc.data, func(t *testing.T) {
			srv, n := guidanceServer(t, tc.data)
			err, _, took := callVirtually(t, &Client{}, srv)
			var rae *retry.RetryAfterError
			if !errors.As(err, &rae) || rae.RetryAfter != tc.asked || rae.Max != 5*time.Minute {
				t.Fatalf("err = %v; want a RetryAfterError for %v over 5m", err, tc.asked)
			}
			var ce *CallError
			if !errors.As(err, &ce) || !ce.FromServer {
				t.Errorf("err = %v; want the server's guidance", err)
			}
			if n.Load() != 1 || took != 0 {
				t.Errorf("%d requests in %v; want one, at once", n.Load(), took)
			}
		})
	}
}

// With a cap that allows it, guidance in hours is waited for, exactly.
func TestClientGuidanceInHoursIsWaited(t *testing.T) {
	srv, n := guidanceServer(t, `{"allowed":true,"strategy":"fixed","after":{"value":2,"unit":"hour"},"max_attempts":1}`)
	c := &Client{Strategy: retry.NewStandard(retry.StandardOptions{MaxRetryAfter: 3 * time.Hour})}
	err, waits, _ := callVirtually(t, c, srv)
	if !errors.Is(err, ErrServerLimit) || n.Load() != 2 || len(waits) != 1 || waits[0] != 2*time.Hour {
		t.Fatalf("err %v after %d requests, waits %v; want ErrServerLimit after 2, 2h apart", err, n.Load(), waits)
	}
}

// An after in a unit the client does not know, or that it cannot read at
// all, asks for a wait the client cannot know is short: it is longer than
// any cap, and the call stops at once.
func TestClientUnknownUnitStopsAtOnce(t *testing.T) {
	for _, after := range []string{
		`{"value":2,"unit":"fortnight"}`,
		`{"value":30,"unit":"seconds"}`,
		`{"value":1,"unit":"HOUR"}`,
		`{"value":1}`,
		`{"value":1,"unit":null}`,
		`{"value":1,"unit":5}`,
		`{"value":"60","unit":"second"}`,
		`{"value":true,"unit":"second"}`,
		`60`,
		`"60s"`,
	} {
		t.Run(after, func(t *testing.T) {
			srv, n := guidanceServer(t, `{"allowed":true,"strategy":"fixed","after":`+after+`}`)
			err, _, took := callVirtually(t, &Client{}, srv)
			var rae *retry.RetryAfterError
			if !errors.As(err, &rae) || rae.RetryAfter != longestWait {
				t.Fatalf("err = %v; want a RetryAfterError for the longest wait", err)
			}
			if n.Load() != 1 || took != 0 {
				t.Errorf("%d requests in %v; want one, at once", n.Load(), took)
			}
		})
	}
}

// Guidance the client cannot follow (an unknown strategy or member, a
// fractional value, a member twice) is replaced by the table (UNAVAILABLE:
// exponential from 1 s), but every retry still waits at least the after it
// asks for; and guidance that says "allowed": false is obeyed.
func TestClientUnreadableGuidanceNeverSooner(t *testing.T) {
	for _, tc := range []struct {
		data  string
		least time.Duration
	}{
		{`{"allowed":true,"strategy":"linear","after":{"value":60,"unit":"second"}}`, time.Minute},
		{`{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"jitter":"full"}`, time.Minute},
		{`{"allowed":true,"strategy":"fixed","after":{"value":1.5,"unit":"minute"}}`, 90 * time.Second},
		{`{"allowed":true,"strategy":"fixed","after":{"value":1e2,"unit":"second"}}`, 100 * time.Second},
		{`{"allowed":true,"strategy":"fixed","after":{"value":5000,"unit":"millisecond"}}`, 5 * time.Second},
		{`{"allowed":true,"strategy":"fixed","after":{"value":60,"unit":"second"},"after":{"value":1,"unit":"second"}}`, time.Minute},
		{`{"allowed":true,"strategy":"fixed","max_attempts":-1,"after":{"value":40,"unit":"second"}}`, 40 * time.Second},
	} {
		t.Run(tc.data, func(t *testing.T) {
			srv, n := guidanceServer(t, tc.data)
			err, waits, _ := callVirtually(t, &Client{}, srv)
			if !errors.Is(err, retry.ErrMaxAttempts) || n.Load() != 3 {
				t.Fatalf("err %v after %d requests; want the table's retries", err, n.Load())
			}
			for i, w := range waits {
				if w < tc.least {
					t.Errorf("wait %d = %v, sooner than the %v asked for", i+1, w, tc.least)
				}
			}
		})
	}
	for _, data := range []string{
		`{"allowed":false,"jitter":1}`,
		`{"allowed":false,"allowed":true}`,
		`{"allowed":false,"strategy":"linear"}`,
	} {
		t.Run(data, func(t *testing.T) {
			srv, n := guidanceServer(t, data)
			err, _, _ := callVirtually(t, &Client{}, srv)
			var ce *CallError
			if !errors.Is(err, retry.ErrNotRetryable) || !errors.As(err, &ce) || ce.Guidance.Allowed || n.Load() != 1 {
				t.Fatalf("err %v after %d requests; want no retry", err, n.Load())
			}
		})
	}
}

// afterFloor reads numbers exactly, rounding up to the nanosecond.
func TestAfterFloorExact(t *testing.T) {
	for _, tc := range []struct {
		value, unit string
		want        time.Duration
	}{
		{"0", "second", 0},
		{"-0", "second", 0},
		{"0.000e5", "fortnight", 0},
		{"-1", "second", 0},
		{"null", "second", 0},
		{"1.5", "minute", 90 * time.Second},
		{"1e2", "second", 100 * time.Second},
		{"1E+2", "second", 100 * time.Second},
		{"100e-2", "second", time.Second},
		{"1.0000000000000002", "second", time.Second + 1},
		{"0.0000000001", "second", 1},
		{"1e-400", "day", 1},
		{"9223372036.854775807", "second", longestWait},
		{"9223372036.854775806", "second", longestWait - 1},
		{"9223372036.8547758065", "second", longestWait},
		{"9223372036.854775808", "second", longestWait},
		{"1e400", "millisecond", longestWait},
		{"106751.5", "day", 106751*24*time.Hour + 12*time.Hour},
		{"0.1", "millisecond", 100 * time.Microsecond},
		{"1", "fortnight", longestWait},
		{`"1"`, "second", longestWait},
		{`[1]`, "second", longestWait},
		{`{}`, "second", longestWait},
		{`true`, "second", longestWait},
	} {
		unit, _ := json.Marshal(tc.unit)
		if got := afterFloor(json.RawMessage(`{"value":` + tc.value + `,"unit":` + string(unit) + `}`)); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.value, tc.unit, got, tc.want)
		}
	}
}

// FuzzGuidanceNeverSooner builds retry guidance from its parts, and checks
// that the client's reading of a failed answer carrying it (newCallError)
// never retries sooner than a well-formed reading of its after would wait,
// nor at all when it says "allowed": false, whatever else the data holds
// (extra members, a second after, an unknown strategy, the members named in
// another letter case, as encoding/json would read them), and never panics;
// and that guidance whose names are not the extension's own is never taken
// as the server's.
// The well-formed reading is computed here independently, in floating
// point: a non-negative number in a known unit is that wait (1e-12 of
// slack for rounding), an immediate strategy waits nothing, and an unknown
// unit or a value that is not a number is longer than any cap; waits of 292
// years and more are all alike (beyondAnyCap).
func FuzzGuidanceNeverSooner(f *testing.F) {
	for _, s := range []struct {
		allowed                      bool
		strategy, value, unit, extra string
	}{
		{true, "fixed", "2", "hour", ""},
		{true, "exponential", "1", "day", `,"max_attempts":3`},
		{true, "fixed", "2", "fortnight", ""},
		{true, "fixed", "60", "", ""},
		{true, "linear", "60", "second", ""},
		{true, "fixed", "1.5", "minute", ""},
		{true, "fixed", "1e3", "millisecond", ""},
		{true, "fixed", `"60"`, "second", ""},
		{true, "fixed", "60", "second", `,"after":{"value":1,"unit":"second"}`},
		{true, "immediate", "60", "second", ""},
		{false, "fixed", "1", "second", `,"jitter":1`},
		{true, "fixed", "1", "second", `,"allowed":false`},
		{true, "fixed", "-5", "second", ""},
		{true, "fixed", "9223372036854775807", "minute", ""},
		{true, "fixed", "null", "hour", ""},
	} {
		f.Add(s.allowed, "allowed", s.strategy, "after", s.value, s.unit, s.extra, 1)
	}
	f.Add(false, "Allowed", "immediate", "after", "1", "second", "", 1)
	f.Add(true, "allowed", "fixed", "After", "3600", "second", `,"after":{"value":0,"unit":"second"}`, 1)
	f.Add(true, "allowed", "fixed", "after", "3600", "second", `,"AFTER":{"value":0,"unit":"second"}`, 1)
	f.Add(true, "allowed", "immediate", "after", "0", "second", `,"Allowed":false`, 2)
	f.Add(false, "ALLOWED", "fixed", "aFTER", "60", "minute", `,"allowed":true`, 1)
	f.Fuzz(func(t *testing.T, allowed bool, allowedName, strategy, afterName, value, unit, extra string, attempt int) {
		if !strings.EqualFold(allowedName, "allowed") || !strings.EqualFold(afterName, "after") {
			return // another member, not this one in another case
		}
		if !json.Valid([]byte(value)) {
			return // not one value: the parts would not say what the after is
		}
		s, _ := json.Marshal(strategy)
		u, _ := json.Marshal(unit)
		an, _ := json.Marshal(allowedName)
		fn, _ := json.Marshal(afterName)
		data := `{` + string(an) + `:` + strconv.FormatBool(allowed) + `,"strategy":` + string(s) +
			`,` + string(fn) + `:{"value":` + value + `,"unit":` + string(u) + `}` + extra + `}`
		if !json.Valid([]byte(data)) {
			return // a document decoder would have refused the answer
		}
		// Any member named allowed, in any case, that says false refuses.
		refuses := !allowed
		dec := json.NewDecoder(strings.NewReader(data))
		_, _ = dec.Token()
		for dec.More() {
			name, _ := dec.Token()
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				break
			}
			if n, _ := name.(string); strings.EqualFold(n, "allowed") && string(v) == "false" {
				refuses = true
			}
			if n, _ := name.(string); n != "allowed" && n != "strategy" && n != "after" && n != "max_attempts" {
				if _, err := (Extension{URN: URNRetry, Data: json.RawMessage(data)}).Retry(); err == nil {
					t.Fatalf("%s: Retry accepted the member %q", data, n)
				}
			}
		}
		asked := wellFormedWait(value, unit)
		if strategy == string(Immediate) {
			asked = 0
		}
		doc := &Response{
			Protocol: current(), ID: "r", Result: json.RawMessage("null"),
			Errors:     []Error{{Code: CodeUnavailable, Message: "m"}},
			Extensions: []Extension{{URN: URNRetry, Data: json.RawMessage(data)}},
		}
		for _, keyed := range []bool{true, false} {
			for _, code := range []Code{CodeUnavailable, CodeInternalError} {
				doc.Errors[0].Code = code
				ce := newCallError("f", doc, &http.Response{StatusCode: 503, Header: http.Header{}}, attempt, keyed)
				info := ce.RetryInfo()
				if info.Safety == retry.Unsafe {
					continue // not retried
				}
				if refuses {
					t.Fatalf("%s: retried (%+v) though the server said \"allowed\": false", data, info)
				}
				if min(info.RetryAfter, beyondAnyCap) < min(asked, beyondAnyCap) {
					t.Fatalf("%s: retry %d after %v, sooner than the %v asked for", data, attempt, info.RetryAfter, asked)
				}
			}
		}
	})
}

// beyondAnyCap is the longest wait Retry can express (the longest whole
// number of minutes in a time.Duration, about 292 years): the fuzz target
// takes every wait from there on as one, longer than any cap.
const beyondAnyCap = time.Duration(math.MaxInt64/int64(time.Minute)) * time.Minute

// wellFormedWait is the fuzz target's reading of an after: see
// FuzzGuidanceNeverSooner.
func wellFormedWait(value, unit string) time.Duration {
	var v any
	if json.Unmarshal([]byte(value), &v) != nil {
		return longestWait
	}
	var x float64
	switch v := v.(type) {
	case nil:
		return 0
	case float64:
		x = v
	default:
		return longestWait
	}
	if x <= 0 {
		return 0
	}
	size := map[string]float64{"millisecond": 1e6, "second": 1e9, "minute": 60e9, "hour": 3600e9, "day": 86400e9}[unit]
	if size == 0 {
		return longestWait
	}
	ns := x * size * (1 - 1e-12)
	if ns >= math.MaxInt64 {
		return longestWait
	}
	return time.Duration(ns)
}
