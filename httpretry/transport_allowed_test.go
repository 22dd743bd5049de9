package httpretry

// Tests of retry.Info.Allowed: a response with a valid Retry-After that the
// Transport obeys is the server's permission to retry, and nothing else is.
// Every response comes from a loopback server through a real http.Transport.

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// hinting answers /STATUS with that status, one Retry-After line per ra
// query value and one RateLimit line per rl value.
func hinting(_ int, w http.ResponseWriter, r *http.Request) {
	code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
	for _, v := range r.URL.Query()["ra"] {
		w.Header().Add("Retry-After", v)
	}
	for _, v := range r.URL.Query()["rl"] {
		w.Header().Add("RateLimit", v)
	}
	http.Error(w, "hint", code)
}

// hintURL is the URL at which hinting answers status with the given
// Retry-After lines.
func hintURL(srv *server, status int, retryAfter ...string) string {
	q := url.Values{"ra": retryAfter}
	return srv.URL + "/" + strconv.Itoa(status) + "?" + q.Encode()
}

// Transport.Classify of real responses: Allowed exactly when the status is
// one whose Retry-After the Transport obeys, a line of it is valid, and the
// request may be repeated.
func TestClassifyAllowedOnlyForAnObeyedRetryAfter(t *testing.T) {
	srv := newServer(t, hinting)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name       string
		tr         *Transport
		url        string
		idempotent bool
		allowed    bool
		timeout    bool
		wait       time.Duration
	}{
		{"503, Retry-After: 0", &Transport{}, hintURL(srv, 503, "0"), true, true, false, 0},
		{"503, Retry-After: 2", &Transport{}, hintURL(srv, 503, "2"), true, true, false, 2 * time.Second},
		{"429, Retry-After: 1", &Transport{}, hintURL(srv, 429, "1"), true, true, false, time.Second},
		{"413, Retry-After: 0", &Transport{}, hintURL(srv, 413, "0"), true, true, false, 0},
		{"504, Retry-After: 0", &Transport{}, hintURL(srv, 504, "0"), true, true, true, 0},
		{"504, a date in the past", &Transport{}, hintURL(srv, 504, past), true, true, true, 0},
		{"503, an invalid line beside a valid one", &Transport{}, hintURL(srv, 503, "soon", "1"), true, true, false, time.Second},
		{"503 without Retry-After", &Transport{}, hintURL(srv, 503), true, false, false, 0},
		{"504 without Retry-After", &Transport{}, hintURL(srv, 504), true, false, true, 0},
		{"503, Retry-After: soon", &Transport{}, hintURL(srv, 503, "soon"), true, false, false, 0},
		{"503, Retry-After: -1", &Transport{}, hintURL(srv, 503, "-1"), true, false, false, 0},
		{"503, Retry-After: 0, not idempotent", &Transport{}, hintURL(srv, 503, "0"), false, false, false, 0},
		{"500, Retry-After: 0 (not obeyed on 500)", &Transport{}, hintURL(srv, 500, "0"), true, false, false, 0},
		{"504, Retry-After: 0, RetryAfterStatuses without 504", &Transport{RetryAfterStatuses: []int{503}}, hintURL(srv, 504, "0"), true, false, true, 0},
		{"503, RateLimit used up, no Retry-After", &Transport{}, srv.URL + "/503?rl=" + url.QueryEscape(`"d";r=0;t=3`), true, false, false, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tc.url, nil)
			resp, err := base.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			discard(resp)
			info, failed := tc.tr.Classify(resp, nil, tc.idempotent)
			if !failed || info.Allowed != tc.allowed || info.Timeout != tc.timeout || info.RetryAfter != tc.wait {
				t.Fatalf("%d %v: failed %v, %+v; want Allowed %v, Timeout %v, RetryAfter %v",
					resp.StatusCode, resp.Header["Retry-After"], failed, info, tc.allowed, tc.timeout, tc.wait)
			}
			if info.Allowed && info.Safety != retry.Safe {
				t.Fatalf("Allowed on %v", info.Safety)
			}
		})
	}
	// A transport error: no server said anything.
	if info, failed := (&Transport{}).Classify(nil, failure(t, "http://"+retrytest.DeadAddr(t)), true); !failed || info.Allowed {
		t.Fatalf("refused connection: failed %v, %+v", failed, info)
	}
}

// failure makes one request to u that must fail in the transport.
func failure(t *testing.T, u string) error {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		discard(resp)
		t.Fatalf("%s answered %d", u, resp.StatusCode)
	}
	return err
}

// The Transport's own attempts carry the permission to its strategy, and a
// caller's loop, to which the Transport leaves a failed response (the caller
// retries too), judges the response with it.
func TestAttemptsCarryThePermission(t *testing.T) {
	srv := newServer(t, hinting)
	var (
		mu    sync.Mutex
		infos []retry.Info
	)
	record := retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
		mu.Lock()
		infos = append(infos, retry.Classify(err))
		mu.Unlock()
	})
	// seen returns the classifications recorded since the last call.
	seen := func(want int) []retry.Info {
		mu.Lock()
		defer mu.Unlock()
		got := infos
		infos = nil
		if len(got) != want {
			t.Fatalf("%d failed attempts seen, want %d", len(got), want)
		}
		return got
	}
	one := &retry.Simple{MaxAttempts: 1}
	tr := &Transport{Strategy: one, Options: []retry.Option{record}}
	for _, tc := range []struct {
		method  string
		url     string
		allowed bool
	}{
		{"GET", hintURL(srv, 504, "0"), true},
		{"GET", hintURL(srv, 504), false},
		{"GET", hintURL(srv, 503, "x"), false},
		{"POST", hintURL(srv, 503, "0"), false}, // not idempotent: Unsafe
	} {
		resp, err, _ := send(t, tr, context.Background(), tc.method, tc.url, nil)
		discard(resp)
		if err != nil {
			t.Fatal(err)
		}
		if i := seen(1)[0]; i.Allowed != tc.allowed {
			t.Errorf("%s %s: %+v, want Allowed %v", tc.method, tc.url, i, tc.allowed)
		}
	}

	// The caller's loop (two attempts: a loop of one does not retry, so it
	// leaves the Transport its retries): the Transport makes one attempt
	// per call and leaves the 504 to it; the caller turns it into an error
	// that says nothing, and the loop judges that error as the failure it
	// was left.
	c := &http.Client{Transport: &Transport{}}
	two := &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(0)}
	for _, tc := range []struct {
		url     string
		allowed bool
	}{{hintURL(srv, 504, "0"), true}, {hintURL(srv, 504), false}} {
		err := retry.Do(context.Background(), two, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", tc.url, nil)
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer discard(resp)
			if resp.StatusCode != 200 {
				return errors.New(resp.Status)
			}
			return nil
		}, record)
		if err == nil {
			t.Fatalf("%s: no error", tc.url)
		}
		for n, i := range seen(2) {
			if i.Allowed != tc.allowed || !i.Timeout {
				t.Errorf("caller's loop, %s, attempt %d: %+v, want a timeout with Allowed %v", tc.url, n+1, i, tc.allowed)
			}
		}
	}
}

// End to end with the zero-value Transport and its own retry.Adaptive: a
// server that answers every GET with 413 and Retry-After: 0 (413 is one of
// the RetryAfterStatuses) gives its permission to retry each one, and the
// permission lifts no failure streak: after the first request's retries,
// no request is retried. (The answer used to count as accepted, which
// ended the streak: every request was made three times.)
func TestZeroConfigPermissionKeepsTheStreak(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "content too large", http.StatusRequestEntityTooLarge)
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		tr := &Transport{Base: base}
		for i := range 50 {
			resp, err, _ := send(t, tr, context.Background(), "GET", srv.URL, nil)
			if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("GET %d: %v, %v; want the 413", i+1, resp, err)
			}
			discard(resp)
		}
		if retries := len(srv.Requests()) - 50; retries > 2 {
			t.Fatalf("%d retries of 50 GETs answered 413 with Retry-After: 0, want at most the streak's 2", retries)
		}
	})
}
