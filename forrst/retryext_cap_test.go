package forrst_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// longest is the longest time.Duration: where a wait too long to represent
// saturates, so that it exceeds any cap.
const longest = time.Duration(math.MaxInt64)

// unavailableFor registers "f" on s, failing every call with UNAVAILABLE
// whose details ask for retryAfter (raw JSON); the server's guidance is the
// default table's (exponential from 1 s).
func unavailableFor(s *forrst.Server, retryAfter string, runs *atomic.Int32) {
	s.Register("f", func(context.Context, json.RawMessage) (any, error) {
		runs.Add(1)
		return nil, &forrst.Error{Code: forrst.CodeUnavailable, Message: "later",
			Details: json.RawMessage(`{"retry_after":` + retryAfter + `}`)}
	})
}

// proxied serves h behind a proxy that adds a header line to every answer.
func proxied(h http.Handler, key, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&addHeader{w, key, value}, r)
	})
}

type addHeader struct {
	http.ResponseWriter
	key, value string
}

func (a *addHeader) WriteHeader(status int) {
	a.Header().Add(a.key, a.value)
	a.ResponseWriter.WriteHeader(status)
}

// wantStoppedAtOnce checks that a call stopped after its first attempt,
// without waiting, because the server asked for a wait over the cap.
func wantStoppedAtOnce(t *testing.T, err error, runs int32, st *stamps, start time.Time, asked, limit time.Duration) {
	t.Helper()
	var rae *retry.RetryAfterError
	if !errors.As(err, &rae) || !errors.Is(err, retry.ErrRetryAfterTooLong) {
		t.Fatalf("err = %v, want a RetryAfterError", err)
	}
	if rae.RetryAfter != asked || rae.Max != limit {
		t.Errorf("RetryAfterError asked %v over %v, want %v over %v", rae.RetryAfter, rae.Max, asked, limit)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 {
		t.Errorf("err = %v, want a *retry.Error after 1 attempt", err)
	}
	if runs != 1 || st.count() != 1 || time.Since(start) != 0 {
		t.Errorf("%d runs, %d requests in %v; want one, at once", runs, st.count(), time.Since(start))
	}
}

// An error's retry_after too long for a time.Duration is not invalid: it is
// longer than the client's cap, so the call stops at once instead of
// retrying on the table's exponential 1 s.
func TestClientRetryAfterDetailsTooLongStopsAtOnce(t *testing.T) {
	for _, ra := range []string{
		`{"value":9223372036855,"unit":"millisecond"}`,
		`{"value":9223372036854775807,"unit":"second"}`,
		`{"value":99999999999999999999,"unit":"minute"}`,
	} {
		t.Run(ra, func(t *testing.T) {
			var runs atomic.Int32
			var s forrst.Server
			unavailableFor(&s, ra, &runs)
			srv := newServer(t, &s)
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
				start := time.Now()
				err := c.Call(context.Background(), "f", nil, nil)
				wantStoppedAtOnce(t, err, runs.Load(), st, start, longest, 5*time.Minute)
			})
		})
	}
}

// Invalid retry_after values are still ignored: the table's guidance
// governs (three attempts, exponential 1 s).
func TestClientRetryAfterDetailsInvalidIgnored(t *testing.T) {
	for _, ra := range []string{
		`{"value":-1,"unit":"second"}`, `{"value":1.5,"unit":"second"}`, `{"value":1e30,"unit":"second"}`,
		`{"value":"60","unit":"second"}`, `{"value":60,"unit":"fortnight"}`, `{"value":60}`, `60`,
	} {
		t.Run(ra, func(t *testing.T) {
			var runs atomic.Int32
			var s forrst.Server
			unavailableFor(&s, ra, &runs)
			srv := newServer(t, &s)
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
				err := c.Call(context.Background(), "f", nil, nil)
				if !errors.Is(err, retry.ErrMaxAttempts) || runs.Load() != 3 {
					t.Fatalf("%d runs, err %v; want 3 and ErrMaxAttempts", runs.Load(), err)
				}
				wantWaits(t, st, time.Second, 2*time.Second)
			})
		})
	}
}

// Several Retry-After lines (the server's own, from its guidance, and one a
// proxy adds): the longest governs, and one too long to represent is longer
// than any cap.
func TestClientLongestRetryAfterGoverns(t *testing.T) {
	for _, c := range []struct {
		added string
		limit time.Duration // the strategy's MaxRetryAfter; 0 = its default
		asked time.Duration
	}{
		{"99999999999999999999", 0, longest},
		{"9223372037", 0, longest},
		{"3600", time.Minute, time.Hour},
	} {
		t.Run(c.added, func(t *testing.T) {
			var runs atomic.Int32
			var s forrst.Server
			flaky(&s, "f", forrst.CodeUnavailable, 1000, &runs)
			srv := newServer(t, proxied(&s, "Retry-After", c.added))
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				cl := &forrst.Client{URL: srv.URL, HTTPClient: hc,
					Strategy: retry.NewStandard(retry.StandardOptions{MaxRetryAfter: c.limit})}
				start := time.Now()
				err := cl.Call(context.Background(), "f", nil, nil)
				limit := c.limit
				if limit == 0 {
					limit = 5 * time.Minute
				}
				wantStoppedAtOnce(t, err, runs.Load(), st, start, c.asked, limit)
			})
		})
	}
}

// An answer that is not a Forrst document (a proxy's own 503) is judged by
// the HTTP transport's rules, which read its hints the same way.
func TestClientProxyRetryAfterTooLongStopsAtOnce(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Add("Retry-After", "1")
		w.Header().Add("Retry-After", "99999999999999999999")
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		start := time.Now()
		err := c.Call(context.Background(), "f", nil, nil)
		var he *forrst.HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("err = %v, want an HTTPError of the 503", err)
		}
		wantStoppedAtOnce(t, err, n.Load(), st, start, longest, 5*time.Minute)
	})
}

// A used-up rate-limit window whose resets_in is too long for a
// time.Duration asks for a wait longer than any cap, though the extension is
// otherwise refused for it: the call stops at once instead of retrying on
// the guidance's immediate. A window with calls left asks for no wait,
// however long its reset.
func TestClientRateLimitResetTooLongStopsAtOnce(t *testing.T) {
	window := func(remaining, resets string) string {
		return `{"limit":10,"used":10,"remaining":` + remaining + `,"window":{"value":1,"unit":"minute"},"resets_in":` + resets + `}`
	}
	ext := func(data string) string { return `{"urn":"urn:forrst:ext:rate-limit","data":` + data + `}` }
	huge := `{"value":9223372036854775807,"unit":"second"}`
	for _, c := range []struct {
		name, ext string
		stops     bool
	}{
		{"one window", ext(window("0", huge)), true},
		{"beyond int64", ext(window("0", `{"value":99999999999999999999,"unit":"day"}`)), true},
		{"multi-scope", ext(`{"scopes":{"function":` + window("3", `{"value":5,"unit":"second"}`) + `,"global":` + window("0", huge) + `}}`), true},
		{"calls left", ext(window("4", huge)), false},
		{"negative reset", ext(window("0", `{"value":-1,"unit":"second"}`)), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(failDoc("UNAVAILABLE", `{"allowed":true,"strategy":"immediate"}`, c.ext)))
			})
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				cl := &forrst.Client{URL: srv.URL, HTTPClient: hc}
				start := time.Now()
				err := cl.Call(context.Background(), "f", nil, nil)
				if c.stops {
					wantStoppedAtOnce(t, err, n.Load(), st, start, longest, 5*time.Minute)
					return
				}
				if !errors.Is(err, retry.ErrMaxAttempts) || n.Load() != 3 {
					t.Fatalf("%d requests, err %v; want 3 and ErrMaxAttempts", n.Load(), err)
				}
			})
		})
	}
}

// Guidance whose after is too long for a time.Duration is guidance still,
// not broken: Retry reads it as the longest after its unit can express
// (2^63-1 ns, rounded down to whole seconds or minutes).
func TestRetryGuidanceTooLongIsGuidance(t *testing.T) {
	const maxSeconds, maxMinutes = 9223372036, 153722867 // floor((2^63-1) ns / 1 s), / 1 min
	cases := []struct {
		data string
		want forrst.Duration
	}{
		{`{"allowed":true,"strategy":"fixed","after":{"value":9223372037,"unit":"second"}}`, forrst.Duration{Value: maxSeconds, Unit: forrst.Second}},
		{`{"allowed":true,"strategy":"fixed","after":{"value":9223372036854775807,"unit":"second"}}`, forrst.Duration{Value: maxSeconds, Unit: forrst.Second}},
		{`{"allowed":true,"strategy":"exponential","after":{"value":153722868,"unit":"minute"}}`, forrst.Duration{Value: maxMinutes, Unit: forrst.Minute}},
		{`{"allowed":true,"strategy":"fixed","after":{"value":99999999999999999999,"unit":"minute"},"max_attempts":3}`, forrst.Duration{Value: maxMinutes, Unit: forrst.Minute}},
		{`{"allowed":true,"strategy":"fixed","after":{"value":153722867,"unit":"minute"}}`, forrst.Duration{Value: maxMinutes, Unit: forrst.Minute}},
	}
	for _, c := range cases {
		t.Run(c.data, func(t *testing.T) {
			g, err := forrst.Extension{URN: urnRetry, Data: json.RawMessage(c.data)}.Retry()
			if err != nil || g.After == nil || *g.After != c.want {
				t.Fatalf("Retry() = %+v, %v; want after %+v", g, err, c.want)
			}
			if err := g.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			want, _ := c.want.Duration()
			if w := g.Wait(1); w != want || w < 292*365*24*time.Hour {
				t.Errorf("Wait(1) = %v, want %v", w, want)
			}
		})
	}
	// Values that are not a non-negative integer stay invalid.
	for _, v := range []string{`-1`, `1.5`, `1e30`, `"60"`, `true`} {
		data := `{"allowed":true,"strategy":"fixed","after":{"value":` + v + `,"unit":"second"}}`
		if g, err := (forrst.Extension{URN: urnRetry, Data: json.RawMessage(data)}).Retry(); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("Retry(%s) = %+v, %v; want ErrInvalid", data, g, err)
		}
	}
}

// Retry guidance asking for a wait too long for a time.Duration stops the
// call at once, with the server's guidance and a RetryAfterError as the
// reason, instead of retrying on the code's default table (exponential 1 s).
func TestClientGuidanceTooLongStopsAtOnce(t *testing.T) {
	for _, data := range []string{
		`{"allowed":true,"strategy":"fixed","after":{"value":9223372036854775807,"unit":"minute"}}`,
		`{"allowed":true,"strategy":"exponential","after":{"value":153722868,"unit":"minute"}}`,
		`{"allowed":true,"strategy":"fixed","after":{"value":99999999999999999999,"unit":"second"},"max_attempts":3}`,
		`{"allowed":true,"strategy":"fixed","after":{"value":9223372037,"unit":"second"}}`,
	} {
		t.Run(data, func(t *testing.T) {
			srv, n := hostile(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(failDoc("UNAVAILABLE", data)))
			})
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
				start := time.Now()
				err := c.Call(context.Background(), "f", nil, nil)
				ce := wantCallError(t, err, "UNAVAILABLE", http.StatusServiceUnavailable)
				if !ce.FromServer || ce.Guidance.After == nil {
					t.Errorf("guidance %+v (from server %v), want the server's", ce.Guidance, ce.FromServer)
				}
				var rae *retry.RetryAfterError
				if !errors.As(err, &rae) || rae.RetryAfter < 292*365*24*time.Hour {
					t.Fatalf("err = %v, want a RetryAfterError of about 292 years", err)
				}
				wantStoppedAtOnce(t, err, n.Load(), st, start, rae.RetryAfter, 5*time.Minute)
			})
		})
	}
}
