package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// Hints are monotonic: a longer hint never yields a sooner retry. The
// expected waits are read off the header values (RFC 9110 section 10.2.3,
// draft-ietf-httpapi-ratelimit-headers), never from the code's output.
func TestResponseWait(t *testing.T) {
	tests := []struct {
		name    string
		headers [][2]string
		want    time.Duration
		ok      bool
	}{
		{"nothing", nil, 0, false},
		{"one value", [][2]string{{"Retry-After", "120"}}, 2 * time.Minute, true},
		{"two lines, the longer last", [][2]string{{"Retry-After", "1"}, {"Retry-After", "3600"}}, time.Hour, true},
		{"two lines, the longer first", [][2]string{{"Retry-After", "3600"}, {"Retry-After", "1"}}, time.Hour, true},
		{"an invalid line is skipped", [][2]string{{"Retry-After", "soon"}, {"Retry-After", "5"}}, 5 * time.Second, true},
		{"only invalid lines", [][2]string{{"Retry-After", "soon"}, {"Retry-After", "-5"}}, 0, false},
		{"a date and seconds", [][2]string{{"Retry-After", "Sun, 06 Nov 1994 09:49:00 GMT"}, {"Retry-After", "60"}}, time.Hour, true},
		{"a date is a line of its own", [][2]string{{"Retry-After", "Sun, 06 Nov 1994 08:50:00 GMT"}}, time.Minute, true},
		{"seconds joined with commas", [][2]string{{"Retry-After", "1, 3600"}}, time.Hour, true},
		{"joined, one invalid", [][2]string{{"Retry-After", "7,soon"}}, 7 * time.Second, true},
		{"joined, none valid", [][2]string{{"Retry-After", "soon, later"}}, 0, false},
		// An HTTP-date holds a comma of its own: joined with other values,
		// it still counts whole, and the longest value governs.
		{"a date joined with seconds", [][2]string{{"Retry-After", "Sun, 06 Nov 1994 09:49:00 GMT, 1"}}, time.Hour, true},
		{"seconds joined with a date", [][2]string{{"Retry-After", "1, Sun, 06 Nov 1994 09:49:00 GMT"}}, time.Hour, true},
		{"two dates joined", [][2]string{{"Retry-After", "Sun, 06 Nov 1994 08:50:00 GMT, Sun, 06 Nov 1994 09:49:00 GMT"}}, time.Hour, true},
		{"an RFC 850 date joined", [][2]string{{"Retry-After", "Sunday, 06-Nov-94 09:49:00 GMT,60"}}, time.Hour, true},
		{"an asctime date joined", [][2]string{{"Retry-After", "60, Sun Nov  6 09:49:00 1994"}}, time.Hour, true},
		{"a date too far joined", [][2]string{{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT, 1"}}, ptMaxDuration, true},
		{"a day name joined alone", [][2]string{{"Retry-After", "Sun, 5"}}, 5 * time.Second, true},
		{"largest that fits", [][2]string{{"Retry-After", "9223372036"}}, ptMaxWholeSeconds * time.Second, true},
		{"one past the largest", [][2]string{{"Retry-After", "9223372037"}}, ptMaxDuration, true},
		{"beyond int64", [][2]string{{"Retry-After", "99999999999999999999"}}, ptMaxDuration, true},
		{"too long beside a short one", [][2]string{{"Retry-After", "1"}, {"Retry-After", "99999999999999999999"}}, ptMaxDuration, true},
		{"a date past what a Duration holds", [][2]string{{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}}, ptMaxDuration, true},
		{"RateLimit alone, exhausted", [][2]string{{"RateLimit", `"d";r=0;t=30`}}, 30 * time.Second, true},
		{"RateLimit alone, quota left", [][2]string{{"RateLimit", `"d";r=5;t=30`}}, 0, false},
		{"RateLimit-Reset with quota left", [][2]string{{"RateLimit-Remaining", "5"}, {"RateLimit-Reset", "30"}}, 0, false},
		{"RateLimit-Reset with none left", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"RateLimit longer than Retry-After", [][2]string{{"Retry-After", "1"}, {"RateLimit", `"d";r=0;t=3`}}, 3 * time.Second, true},
		{"Retry-After longer than RateLimit", [][2]string{{"Retry-After", "3"}, {"RateLimit", `"d";r=0;t=1`}}, 3 * time.Second, true},
		{"RateLimit with quota left beside Retry-After", [][2]string{{"Retry-After", "1"}, {"RateLimit", `"d";r=5;t=3600`}}, time.Second, true},
		{"old form longer than Retry-After", [][2]string{{"Retry-After", "1"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "3600"}}, time.Hour, true},
		{"RateLimit too long beside Retry-After", [][2]string{{"Retry-After", "1"}, {"RateLimit", `"d";r=0;t=999999999999999`}}, ptMaxDuration, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h.Add(kv[0], kv[1])
			}
			d, ok, _ := responseWait(h, ptNow)
			if ok != tt.ok || (ok && d != tt.want) {
				t.Errorf("responseWait(%v) = (%v, %v), want (%v, %v)", h, d, ok, tt.want, tt.ok)
			}
		})
	}
}

// Longer delay-seconds never read as a shorter wait, across the edge of what
// a Duration holds: so whatever the cap, a value past it is never obeyed
// while a shorter one is refused.
func TestResponseWaitIsMonotonic(t *testing.T) {
	values := []string{"0", "1", "59", "60", "3600", "9223372035", "9223372036", "9223372037",
		"9223372037000", "9223372036854775807", "9223372036854775808", "99999999999999999999", strings.Repeat("9", 400)}
	prev := time.Duration(-1)
	for _, v := range values {
		d, ok, _ := responseWait(http.Header{"Retry-After": {v}}, ptNow)
		if !ok || d < prev {
			t.Fatalf("Retry-After %s = (%v, %v), shorter than %v for a smaller value", v, d, ok, prev)
		}
		prev = d
	}
	if prev != ptMaxDuration {
		t.Fatalf("the largest value reads as %v, want the longest Duration", prev)
	}
}

func FuzzResponseWait(f *testing.F) {
	for _, s := range ptRetryAfterSeeds {
		f.Add(s, "5", `"d";r=0;t=3`)
	}
	f.Add("1", "3600", "")
	f.Add("1, 3600", "", `"d";r=5;t=60`)
	f.Add("9223372037", "1", `"d";r=0;t=999999999999999`)
	f.Add("soon", "1", `"d";r=0;t=30`)
	f.Add("Fri, 01 Jan 2100 00:00:00 GMT", "1", "")
	f.Add("1", "Sun Nov  6 09:49:00 1994", "")
	f.Fuzz(func(t *testing.T, a, b, rl string) {
		one := func(vs ...string) (time.Duration, bool) {
			h := http.Header{}
			for _, v := range vs {
				h.Add("Retry-After", v)
			}
			if rl != "" {
				h.Add("RateLimit", rl)
			}
			d, ok, _ := responseWait(h, ptNow)
			return d, ok
		}
		da, oka := one(a)
		db, okb := one(b)
		dab, okab := one(a, b)
		dba, okba := one(b, a)
		if dab != dba || okab != okba {
			t.Fatalf("order matters: (%v, %v) for %q then %q, (%v, %v) the other way", dab, okab, a, b, dba, okba)
		}
		if okab != (oka || okb) || dab < 0 {
			t.Fatalf("%q and %q: (%v, %v); alone (%v, %v) and (%v, %v)", a, b, dab, okab, da, oka, db, okb)
		}
		// The longest hint governs: adding a line never shortens the wait,
		// nor does a Retry-After shorten RateLimit's.
		if (oka && dab < da) || (okb && dab < db) {
			t.Fatalf("%q and %q: %v, shorter than one of them alone (%v, %v)", a, b, dab, da, db)
		}
		// Joined into one line, as an intermediary may join them (RFC 9110,
		// section 5.3), they never read as a shorter wait than on two.
		if dj, okj := one(a + ", " + b); okab && (!okj || dj < dab) {
			t.Fatalf("%q and %q joined: (%v, %v), shorter than (%v, %v) on two lines", a, b, dj, okj, dab, okab)
		}
		if rl != "" {
			if d, ok := rateLimitWait(http.Header{"Ratelimit": {rl}}); ok && (!okab || dab < d) {
				t.Fatalf("%q and %q beside RateLimit %q: (%v, %v), shorter than its %v", a, b, rl, dab, okab, d)
			}
		}
	})
}

// A Retry-After too large to represent is longer than the cap, not invalid:
// the first response comes back at once, and the report says why.
func TestRetryAfterTooLargeToRepresentStopsAtOnce(t *testing.T) {
	for _, v := range []string{"9223372037", "99999999999999999999", strings.Repeat("9", 300), "Fri, 31 Dec 9999 23:59:59 GMT"} {
		t.Run(v[:min(len(v), 30)], func(t *testing.T) {
			srv := newServer(t, answer([]int{503, 200}, []string{"Retry-After", v}))
			virtual(t, func(t *testing.T, base *http.Transport) {
				start := time.Now()
				resp, err, rep := send(t, &Transport{Base: base}, context.Background(), "GET", srv.URL, nil)
				discard(resp)
				if err != nil || resp == nil || resp.StatusCode != 503 {
					t.Fatalf("err %v, response %v; want the 503 back", err, resp)
				}
				if n := len(srv.Requests()); n != 1 || rep.Attempts != 1 || time.Since(start) != 0 {
					t.Fatalf("%d requests (%d attempts reported) in %v; want one, at once", n, rep.Attempts, time.Since(start))
				}
				var rae *retry.RetryAfterError
				if !errors.As(rep.Reason, &rae) || rae.RetryAfter != ptMaxDuration || rae.Max != DefaultMaxRetryAfter {
					t.Fatalf("reason %v; want a RetryAfterError of the longest Duration over the default cap", rep.Reason)
				}
			})
		})
	}
}

// A date and seconds joined on one Retry-After line, as an intermediary may
// join two lines, are read as the two lines are: the date, past the cap,
// governs, and the response comes back at once.
func TestJoinedRetryAfterLineNeverShortensTheWait(t *testing.T) {
	const date = "Fri, 01 Jan 2100 00:00:00 GMT"
	for _, h := range [][]string{
		{"Retry-After", date + ", 1"},
		{"Retry-After", "1, " + date},
		{"Retry-After", date, "Retry-After", "1"},
	} {
		t.Run(strings.Join(h[1:], " | "), func(t *testing.T) {
			srv := newServer(t, answer([]int{503, 200}, h))
			virtual(t, func(t *testing.T, base *http.Transport) {
				start := time.Now()
				resp, err, rep := send(t, &Transport{Base: base, Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
				discard(resp)
				if err != nil || resp == nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || time.Since(start) != 0 {
					t.Fatalf("err %v, %d requests in %v; want the 503 at once", err, len(srv.Requests()), time.Since(start))
				}
				want := time.Date(2100, time.January, 1, 0, 0, 0, 0, time.UTC).Sub(start)
				var rae *retry.RetryAfterError
				if !errors.As(rep.Reason, &rae) || rae.RetryAfter != want || rae.Max != DefaultMaxRetryAfter {
					t.Fatalf("reason %v; want a RetryAfterError of %v over the default cap", rep.Reason, want)
				}
			})
		})
	}
}

// Several Retry-After headers: the longest governs, whatever their order.
func TestLongestRetryAfterGoverns(t *testing.T) {
	for _, order := range [][]string{{"1", "3600"}, {"3600", "1"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			srv := newServer(t, answer([]int{503, 200}, []string{"Retry-After", order[0], "Retry-After", order[1]}))
			virtual(t, func(t *testing.T, base *http.Transport) {
				tr := &Transport{Base: base, Strategy: noWait(), MaxRetryAfter: 60 * time.Second}
				start := time.Now()
				resp, err, rep := send(t, tr, context.Background(), "GET", srv.URL, nil)
				discard(resp)
				if err != nil || resp == nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || time.Since(start) != 0 {
					t.Fatalf("err %v, %d requests in %v; want the 503 at once", err, len(srv.Requests()), time.Since(start))
				}
				var rae *retry.RetryAfterError
				if !errors.As(rep.Reason, &rae) || rae.RetryAfter != time.Hour || rae.Max != time.Minute {
					t.Fatalf("reason %v; want a RetryAfterError of 1h over 1m", rep.Reason)
				}
			})
		})
	}
	// Within the cap, the longer of two is the wait.
	srv := newServer(t, answer([]int{503, 200}, []string{"Retry-After", "2", "Retry-After", "1"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		start := time.Now()
		resp, err, _ := send(t, &Transport{Base: base, Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || time.Since(start) != 2*time.Second {
			t.Fatalf("err %v after %v; want 200 after 2s", err, time.Since(start))
		}
	})
}

// The older drafts' RateLimit-Reset is a wait only when RateLimit-Remaining
// is 0: a window with quota left neither delays the retry nor, when longer
// than the cap, stops it.
func TestRateLimitResetIsAWaitOnlyWithNoneRemaining(t *testing.T) {
	left := newServer(t, answer([]int{503, 200}, []string{"RateLimit-Remaining", "5", "RateLimit-Reset", "3600"}))
	none := newServer(t, answer([]int{503, 200}, []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "2"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		tr := &Transport{Base: base, Strategy: noWait()}
		start := time.Now()
		resp, err, _ := send(t, tr, context.Background(), "GET", left.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || len(left.Requests()) != 2 || time.Since(start) != 0 {
			t.Fatalf("quota left: err %v, %d requests in %v; want 200 at once", err, len(left.Requests()), time.Since(start))
		}
		start = time.Now()
		resp, err, _ = send(t, tr, context.Background(), "GET", none.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || time.Since(start) != 2*time.Second {
			t.Fatalf("none left: err %v after %v; want 200 after 2s", err, time.Since(start))
		}
	})
}

// Retry-After and RateLimit together: the longer governs, whichever it is,
// so neither hint can make a retry come sooner than the other asks.
func TestLongerOfRetryAfterAndRateLimitGoverns(t *testing.T) {
	rlLonger := newServer(t, answer([]int{429, 200}, []string{"Retry-After", "1", "RateLimit", `"d";r=0;t=3`}))
	raLonger := newServer(t, answer([]int{429, 200}, []string{"Retry-After", "3", "RateLimit", `"d";r=0;t=1`}))
	overCap := newServer(t, answer([]int{429, 200}, []string{"Retry-After", "1", "RateLimit", `"d";r=0;t=3600`}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		tr := &Transport{Base: base, Strategy: noWait(), MaxRetryAfter: time.Minute}
		for _, srv := range []*server{rlLonger, raLonger} {
			start := time.Now()
			resp, err, _ := send(t, tr, context.Background(), "GET", srv.URL, nil)
			discard(resp)
			if err != nil || resp.StatusCode != 200 || time.Since(start) != 3*time.Second {
				t.Fatalf("err %v after %v; want 200 after 3s", err, time.Since(start))
			}
		}
		start := time.Now()
		resp, err, rep := send(t, tr, context.Background(), "GET", overCap.URL, nil)
		discard(resp)
		var rae *retry.RetryAfterError
		if err != nil || resp.StatusCode != 429 || len(overCap.Requests()) != 1 || time.Since(start) != 0 ||
			!errors.As(rep.Reason, &rae) || rae.RetryAfter != time.Hour {
			t.Fatalf("RateLimit over the cap: err %v, %d requests in %v, reason %v; want the 429 at once",
				err, len(overCap.Requests()), time.Since(start), rep.Reason)
		}
	})
}

// A 413 is a failure to retry when any of its Retry-After lines is valid,
// as statusInfo reads them: an invalid first line does not hide a valid
// second one.
func Test413WithAValidSecondRetryAfterIsRetried(t *testing.T) {
	srv := newServer(t, answer([]int{413, 200}, []string{"Retry-After", "soon", "Retry-After", "0"}))
	resp, err, rep := send(t, &Transport{Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 200 || rep.Attempts != 2 {
		t.Fatalf("err %v, status %d after %d attempts", err, resp.StatusCode, rep.Attempts)
	}
}
