package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func TestRetriesFailedStatusesThenSucceeds(t *testing.T) {
	for _, status := range []int{429, 500, 502, 503, 504} {
		srv := newServer(t, failFirst(2, status))
		var rep Report
		tr := &Transport{Strategy: noWait()}
		req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "GET", srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" || len(srv.Requests()) != 3 {
			t.Fatalf("%d: got %d %q after %d requests", status, resp.StatusCode, b, len(srv.Requests()))
		}
		if rep.Attempts != 3 || rep.Reason != nil {
			t.Fatalf("%d: report = %+v", status, rep)
		}
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 408, 409, 413, 422, 501, 505} {
		srv := newServer(t, failFirst(5, status))
		c := &http.Client{Transport: &Transport{Strategy: noWait()}}
		resp, body := get(t, c, srv.URL)
		if resp.StatusCode != status || !strings.HasPrefix(body, "failure 1") || len(srv.Requests()) != 1 {
			t.Fatalf("%d: got %d %q after %d requests", status, resp.StatusCode, body, len(srv.Requests()))
		}
	}
}

func TestZeroValueTransportSucceedsAndPassesResponsesThrough(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "hello")
	})
	c := &http.Client{Transport: &Transport{}}
	if resp, body := get(t, c, srv.URL); resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, srv.URL+"/missing"); resp.StatusCode != 404 {
		t.Fatalf("got %d", resp.StatusCode)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestLastResponseComesBackIntact(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Attempt", fmt.Sprint(n))
		w.WriteHeader(503)
		io.WriteString(w, strings.Repeat("down ", 1000)) // 5000 bytes: longer than any peek
	})
	var rep Report
	tr := &Transport{Strategy: noWait()}
	req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err = %v, want the last response and a nil error", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("X-Attempt") != "3" || string(b) != strings.Repeat("down ", 1000) {
		t.Fatalf("got %d, X-Attempt %q, %d bytes", resp.StatusCode, resp.Header.Get("X-Attempt"), len(b))
	}
	if rep.Attempts != 3 || !errors.Is(rep.Reason, retry.ErrMaxAttempts) {
		t.Fatalf("report = %+v", rep)
	}
}

func TestPostIsNotRepeated(t *testing.T) {
	srv := newServer(t, failFirst(5, 503))
	c := &http.Client{Transport: &Transport{Strategy: noWait()}}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("charge $10"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || len(srv.Requests()) != 1 {
		t.Fatalf("got %d after %d requests; a POST must not be repeated", resp.StatusCode, len(srv.Requests()))
	}
	for _, m := range []string{"PATCH", "CONNECT", "FOO"} {
		req, _ := http.NewRequest(m, srv.URL, strings.NewReader("x"))
		before := len(srv.Requests())
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := len(srv.Requests()) - before; n != 1 {
			t.Fatalf("%s sent %d times", m, n)
		}
	}
}

func TestIdempotencyKeyMakesPostRetryable(t *testing.T) {
	t.Run("caller's key", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 503))
		c := &http.Client{Transport: &Transport{Strategy: noWait()}}
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("charge $10"))
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		reqs := srv.Requests()
		if resp.StatusCode != 200 || len(reqs) != 3 {
			t.Fatalf("got %d after %d requests", resp.StatusCode, len(reqs))
		}
		for i, r := range reqs {
			if r.Header.Get("Idempotency-Key") != "order-42" || r.Body != "charge $10" {
				t.Fatalf("attempt %d: key %q, body %q", i+1, r.Header.Get("Idempotency-Key"), r.Body)
			}
		}
	})
	t.Run("generated key", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 503))
		c := &http.Client{Transport: &Transport{Strategy: noWait(), IdempotencyKey: true}}
		for _, m := range []string{"POST", "PATCH"} {
			before := len(srv.Requests())
			req, _ := http.NewRequest(m, srv.URL, strings.NewReader("body"))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if req.Header.Get("Idempotency-Key") != "" {
				t.Fatal("the caller's request was modified")
			}
			reqs := srv.Requests()[before:]
			key := reqs[0].Header.Get("Idempotency-Key")
			if len(key) < 16 {
				t.Fatalf("%s: generated key %q is too short to be unique", m, key)
			}
			for i, r := range reqs {
				if r.Header.Get("Idempotency-Key") != key {
					t.Fatalf("%s attempt %d has key %q, first had %q", m, i+1, r.Header.Get("Idempotency-Key"), key)
				}
			}
			srv.Reset() // fail the next method's first two attempts too
		}
	})
}

func TestBodiesAreIdenticalOnEveryAttempt(t *testing.T) {
	payload := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	check := func(t *testing.T, srv *server, want int) {
		t.Helper()
		reqs := srv.Requests()
		if len(reqs) != want {
			t.Fatalf("%d requests, want %d", len(reqs), want)
		}
		for i, r := range reqs {
			if r.Body != payload {
				t.Fatalf("attempt %d sent %d bytes, not the %d-byte payload", i+1, len(r.Body), len(payload))
			}
		}
	}
	t.Run("GetBody", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 500))
		c := &http.Client{Transport: &Transport{Strategy: noWait()}}
		req, _ := http.NewRequest("PUT", srv.URL, strings.NewReader(payload))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check(t, srv, 3)
	})
	t.Run("BufferBody", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 500))
		c := &http.Client{Transport: &Transport{Strategy: noWait(), BufferBody: 1 << 20}}
		req, _ := http.NewRequest("PUT", srv.URL, io.NopCloser(strings.NewReader(payload))) // no GetBody
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check(t, srv, 3)
	})
	t.Run("unreplayable body is sent once", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 500))
		var rep Report
		req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "PUT", srv.URL,
			io.NopCloser(strings.NewReader(payload)))
		resp, err := (&Transport{Strategy: noWait()}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check(t, srv, 1)
		if resp.StatusCode != 500 || !errors.Is(rep.Reason, errBodyConsumed) {
			t.Fatalf("got %d, reason %v", resp.StatusCode, rep.Reason)
		}
	})
	t.Run("body over BufferBody is sent whole, once", func(t *testing.T) {
		srv := newServer(t, failFirst(2, 500))
		var rep Report
		req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "PUT", srv.URL,
			io.NopCloser(strings.NewReader(payload)))
		resp, err := (&Transport{Strategy: noWait(), BufferBody: 1000}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check(t, srv, 1)
		if !errors.Is(rep.Reason, errBodyTooLarge) {
			t.Fatalf("reason %v", rep.Reason)
		}
	})
}

// refusedOnce is a base transport whose first dial goes to a closed port
// (a real refused connection) and later dials to the server.
func refusedOnce(t *testing.T, n int) *http.Transport {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var dials atomic.Int32
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) <= int32(n) {
			return d.DialContext(ctx, network, dead)
		}
		return d.DialContext(ctx, network, addr)
	}}
}

func TestPostIsRetriedWhenItNeverLeft(t *testing.T) {
	srv := newServer(t, failFirst(0, 0))
	base := refusedOnce(t, 2)
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: &Transport{Base: base, Strategy: noWait()}}
	// A body without GetBody: the refused dials never read it, so it is not lost.
	body := io.NopCloser(strings.NewReader("charge $10"))
	req, _ := http.NewRequest("POST", srv.URL, body)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := srv.Requests()
	if resp.StatusCode != 200 || len(reqs) != 1 || reqs[0].Body != "charge $10" {
		t.Fatalf("got %d, server saw %+v", resp.StatusCode, reqs)
	}
}

func TestRefusedConnectionsExhaustAttempts(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + ln.Addr().String()
	ln.Close()
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "GET", url, nil)
	_, err := (&http.Client{Transport: &Transport{Strategy: noWait()}}).Do(req)
	var re *retry.Error
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, retry.ErrMaxAttempts) || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("err = %v", err)
	}
	if rep.Attempts != 3 {
		t.Fatalf("report = %+v", rep)
	}
}

func TestResetIsRetriedOnlyWhenIdempotent(t *testing.T) {
	srv := resetServer(t, 1)
	c := &http.Client{Transport: &Transport{Strategy: noWait()}}
	if resp, body := get(t, c, srv.URL); resp.StatusCode != 200 || body != "ok" || len(srv.Requests()) != 2 {
		t.Fatalf("GET: got %d %q after %d requests", resp.StatusCode, body, len(srv.Requests()))
	}

	srv = resetServer(t, 1)
	_, err := c.Post(srv.URL, "text/plain", strings.NewReader("charge $10"))
	if err == nil || !errors.Is(err, retry.ErrNotRetryable) || len(srv.Requests()) != 1 {
		t.Fatalf("POST: err = %v after %d requests", err, len(srv.Requests()))
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("POST: err = %v, want the reset", err)
	}
}

func TestConnectionsAreReusedAfterDrainedFailures(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	c := &http.Client{Transport: &Transport{Strategy: noWait()}}
	for range 3 {
		srv.Reset()
		if resp, _ := get(t, c, srv.URL); resp.StatusCode != 200 {
			t.Fatalf("got %d", resp.StatusCode)
		}
	}
	if n := srv.Conns.Load(); n != 1 {
		t.Fatalf("%d connections for 9 requests, want 1: failed responses were not drained", n)
	}
}

func TestAttemptHeaderAndHook(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	var attempts []Attempt
	c := &http.Client{Transport: &Transport{
		Strategy:      &retry.Simple{Backoff: retry.Constant(0)},
		AttemptHeader: "Retry-Attempt",
		OnAttempt:     func(a Attempt) { attempts = append(attempts, a) },
	}}
	get(t, c, srv.URL)
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, r.Header.Get("Retry-Attempt"))
	}
	if strings.Join(got, ",") != ",2,3" {
		t.Fatalf("Retry-Attempt headers = %q, want none, 2, 3", got)
	}
	if len(attempts) != 3 {
		t.Fatalf("%d hook calls, want 3", len(attempts))
	}
	for i, a := range attempts {
		wantRetry := i < 2
		if a.N != i+1 || a.Retry != wantRetry || a.Request == nil || a.Response == nil || a.Err != nil || a.Reason != nil {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}
	if attempts[0].Response.StatusCode != 503 || attempts[2].Response.StatusCode != 200 {
		t.Fatal("hook saw the wrong responses")
	}
}

func TestStatusesAndMethodsAreConfigurable(t *testing.T) {
	srv := newServer(t, failFirst(2, 404))
	c := &http.Client{Transport: &Transport{Strategy: noWait(), Statuses: []int{404}}}
	if resp, _ := get(t, c, srv.URL); resp.StatusCode != 200 || len(srv.Requests()) != 3 {
		t.Fatalf("got %d after %d requests", resp.StatusCode, len(srv.Requests()))
	}
	srv = newServer(t, failFirst(2, 503))
	c = &http.Client{Transport: &Transport{Strategy: noWait(), Methods: []string{"POST"}}}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(srv.Requests()) != 3 {
		t.Fatalf("POST allowed: got %d after %d requests", resp.StatusCode, len(srv.Requests()))
	}
	if resp, _ := get(t, c, srv.URL); resp.StatusCode != 200 {
		t.Fatalf("got %d", resp.StatusCode)
	}
}

func TestRetriesDial(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	c := &http.Client{Transport: &Transport{Strategy: &retry.Simple{MaxAttempts: 100, Backoff: retry.Constant(0)}, Retries: 4}}
	if resp, _ := get(t, c, srv.URL); resp.StatusCode != 503 || len(srv.Requests()) != 5 {
		t.Fatalf("Retries 4: got %d after %d requests, want 5", resp.StatusCode, len(srv.Requests()))
	}
	srv = newServer(t, failFirst(100, 503))
	c = &http.Client{Transport: &Transport{Retries: -1}}
	if resp, _ := get(t, c, srv.URL); resp.StatusCode != 503 || len(srv.Requests()) != 1 {
		t.Fatalf("Retries -1: got %d after %d requests, want 1", resp.StatusCode, len(srv.Requests()))
	}
}

func TestLimiter(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	var rep Report
	tr := &Transport{
		Strategy: &retry.Simple{MaxAttempts: 10, Backoff: retry.Constant(0)},
		Limiter: All(MaxErrorResponses(2, 502, 503), LimiterFunc(func(f []Failure, next *http.Request) bool {
			next.Header.Set("X-Failures", fmt.Sprint(len(f)))
			return true
		})),
	}
	req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := srv.Requests()
	if len(reqs) != 3 || !errors.Is(rep.Reason, ErrLimited) {
		t.Fatalf("%d requests, reason %v; want 3 and ErrLimited", len(reqs), rep.Reason)
	}
	if reqs[1].Header.Get("X-Failures") != "1" || reqs[2].Header.Get("X-Failures") != "2" {
		t.Fatal("the limiter's change to the next request was not sent")
	}
	srv = newServer(t, failFirst(100, 500))
	req, _ = http.NewRequest("GET", srv.URL, nil)
	resp, _ = tr.RoundTrip(req)
	resp.Body.Close()
	if len(srv.Requests()) != 1 {
		t.Fatalf("500 is not in the limiter's statuses: %d requests", len(srv.Requests()))
	}
}

func TestQuotaIsPerHost(t *testing.T) {
	a := newServer(t, failFirst(100, 503))
	b := newServer(t, failFirst(0, 0))
	s := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(0)})
	c := &http.Client{Transport: &Transport{Strategy: s}}
	for range 50 {
		get(t, c, a.URL)
	}
	hostA, hostB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")
	if s.Available(hostA) >= 14 || s.Available(hostB) != 500 {
		t.Fatalf("quota: %s = %d, %s = %d", hostA, s.Available(hostA), hostB, s.Available(hostB))
	}
	// Host A's storm is bounded by its quota: far fewer than 3 attempts per request.
	if n := len(a.Requests()); n > 50+500/14 {
		t.Fatalf("%d requests reached the failing host for 50 calls", n)
	}
}

func TestRedirectsAreFollowedAndEachHopRetried(t *testing.T) {
	var bHits atomic.Int32
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusFound)
			return
		}
		if bHits.Add(1) < 3 {
			http.Error(w, "busy", 503)
			return
		}
		io.WriteString(w, "b")
	})
	c := &http.Client{Transport: &Transport{Strategy: noWait()}}
	if resp, body := get(t, c, srv.URL+"/a"); resp.StatusCode != 200 || body != "b" || bHits.Load() != 3 {
		t.Fatalf("got %d %q, /b hit %d times", resp.StatusCode, body, bHits.Load())
	}
}

func TestCloseIdleConnections(t *testing.T) {
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Base: &http.Transport{}}}
	get(t, c, srv.URL)
	c.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() == 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if closed.Load() != 1 {
		t.Fatal("CloseIdleConnections did not reach the base transport")
	}
}

func TestRetryAfterIsAMinimum(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", 429)
			return
		}
		io.WriteString(w, "ok")
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		c := &http.Client{Transport: &Transport{Base: base, Strategy: noWait()}}
		start := time.Now()
		resp, _ := get(t, c, srv.URL)
		if resp.StatusCode != 200 || time.Since(start) != 2*time.Second {
			t.Fatalf("got %d after %v, want 200 after the 2s the server asked", resp.StatusCode, time.Since(start))
		}
	})
}

func TestRateLimitFieldSetsTheWait(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("RateLimit", `"default";r=0;t=3`)
			http.Error(w, "slow down", 429)
			return
		}
		io.WriteString(w, "ok")
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		c := &http.Client{Transport: &Transport{Base: base, Strategy: noWait()}}
		start := time.Now()
		if resp, _ := get(t, c, srv.URL); resp.StatusCode != 200 || time.Since(start) != 3*time.Second {
			t.Fatalf("got %d after %v, want 200 after 3s", resp.StatusCode, time.Since(start))
		}
	})
}

func TestHostileRetryAfterIsNotObeyed(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "come back in an hour", 503)
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		var rep Report
		req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "GET", srv.URL, nil)
		start := time.Now()
		resp, err := (&Transport{Base: base}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || time.Since(start) != 0 || len(srv.Requests()) != 1 {
			t.Fatalf("got %d after %v and %d requests; want the 503 at once", resp.StatusCode, time.Since(start), len(srv.Requests()))
		}
		var rae *retry.RetryAfterError
		if !errors.As(rep.Reason, &rae) || rae.RetryAfter != time.Hour || rae.Max != 5*time.Minute {
			t.Fatalf("reason = %v", rep.Reason)
		}
	})
}

func TestDeadlineShorterThanTheHint(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		http.Error(w, "busy", 503)
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		for _, c := range []*http.Client{
			{Transport: &Transport{Base: base}, Timeout: time.Second}, // the client's own timeout
			{Transport: &Transport{Base: base}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if c.Timeout > 0 {
				req, _ = http.NewRequest("GET", srv.URL, nil)
			}
			start := time.Now()
			resp, err := c.Do(req)
			cancel()
			if err != nil {
				t.Fatalf("err = %v, want the 503", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 || time.Since(start) != 0 {
				t.Fatalf("got %d after %v; want the 503 at once", resp.StatusCode, time.Since(start))
			}
		}
	})
}

func TestCancelDuringWait(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "busy", 503)
	})
	virtual(t, func(t *testing.T, base *http.Transport) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		start := time.Now()
		_, err := (&http.Client{Transport: &Transport{Base: base}}).Do(req)
		if !errors.Is(err, context.Canceled) || time.Since(start) != time.Second || len(srv.Requests()) != 1 {
			t.Fatalf("err = %v after %v and %d requests", err, time.Since(start), len(srv.Requests()))
		}
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 503 || se.Header.Get("Retry-After") != "10" {
			t.Fatalf("the error does not carry the last status: %v", err)
		}
	})
}

func TestDefaultStrategyWaitsWithJitteredBackoff(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	virtual(t, func(t *testing.T, base *http.Transport) {
		var delays []time.Duration
		c := &http.Client{Transport: &Transport{Base: base, OnAttempt: func(a Attempt) {
			if a.Retry {
				delays = append(delays, a.Delay)
			}
		}}}
		start := time.Now()
		if resp, _ := get(t, c, srv.URL); resp.StatusCode != 200 {
			t.Fatalf("got %d", resp.StatusCode)
		}
		if len(delays) != 2 || delays[0] >= 50*time.Millisecond || delays[1] >= 100*time.Millisecond {
			t.Fatalf("delays %v, want full jitter under 50ms and 100ms", delays)
		}
		if time.Since(start) != delays[0]+delays[1] {
			t.Fatalf("took %v, waits were %v", time.Since(start), delays)
		}
	})
}

func TestAttemptTimeout(t *testing.T) {
	// A stalled server needs real time: the bubble's clock cannot advance
	// while the client waits on a socket. Nothing here asserts durations.
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "ok")
	})
	c := &http.Client{Transport: &Transport{Strategy: noWait(), AttemptTimeout: 100 * time.Millisecond}}
	if resp, body := get(t, c, srv.URL); resp.StatusCode != 200 || body != "ok" || len(srv.Requests()) != 2 {
		t.Fatalf("got %d %q after %d requests", resp.StatusCode, body, len(srv.Requests()))
	}
}

// AttemptTimeout bounds the one attempt of Retries < 0 too, on each of its
// paths (alone, with a Breaker, with Options), both while the response is
// awaited and while its body is read. A stalled server needs real time, as
// in TestAttemptTimeout; the caller's deadline, far past the bound, tells
// which of the two ended the attempt.
func TestAttemptTimeoutBoundsTheSingleAttempt(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stall := func(r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		stall(r)
	})
	var gaveUp atomic.Int32
	for _, tc := range []struct {
		name string
		tr   *Transport
	}{
		{"Retries < 0", &Transport{}},
		{"with a Breaker", &Transport{Breaker: retry.NewBreaker(retry.BreakerOptions{})}},
		{"with Options", &Transport{Options: []retry.Option{retry.OnGiveUp(func(context.Context, *retry.Error) { gaveUp.Add(1) })}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tr.Retries, tc.tr.AttemptTimeout = -1, 50*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err, rep := send(t, tc.tr, ctx, "GET", srv.URL, nil)
			if resp != nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || rep.Attempts != 1 {
				t.Fatalf("response %v, err %v, caller's context %v, %d attempts; want the attempt's own timeout", resp, err, ctx.Err(), rep.Attempts)
			}
			resp, err, _ = send(t, tc.tr, ctx, "GET", srv.URL+"/body", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if string(b) != "part" || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("read %q, %v (caller's context %v); want the part, then the attempt's own timeout", b, err, ctx.Err())
			}
		})
	}
	if gaveUp.Load() != 1 {
		t.Fatalf("OnGiveUp called %d times, want once", gaveUp.Load())
	}
}

func TestRequestIsNotModified(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	c := &http.Client{Transport: &Transport{Strategy: noWait(), AttemptHeader: "Retry-Attempt", IdempotencyKey: true}}
	req, _ := http.NewRequest("PUT", srv.URL, bytes.NewReader([]byte("data")))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != 0 {
		t.Fatalf("the caller's headers changed: %v", req.Header)
	}
}

// A base RoundTripper that returns a response with a nil Body breaks its
// contract, but net/http's Client tolerates it as an empty body
// (golang.org/issue/38095), and so does the Transport, on every path: the
// failed responses it drains before a retry, the response it returns when
// retrying stops on one, the one it wraps for AttemptTimeout, and the one
// of a single attempt with Retries < 0. The caller gets an empty body.
func TestNilResponseBodyFromTheBaseReadsAsNoBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tr       *Transport
		handler  func(int, http.ResponseWriter, *http.Request)
		status   int
		attempts int
	}{
		{"retried, then success", &Transport{}, failFirst(2, 503), 200, 3},
		{"retries run out", &Transport{}, failFirst(9, 503), 503, 3},
		{"AttemptTimeout", &Transport{AttemptTimeout: time.Minute}, failFirst(1, 503), 200, 2},
		{"Retries < 0", &Transport{Retries: -1}, failFirst(1, 503), 503, 1},
		{"Retries < 0 with a Breaker", &Transport{Retries: -1, Breaker: retry.NewBreaker(retry.BreakerOptions{})}, failFirst(1, 503), 503, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.handler)
			real := &http.Transport{}
			t.Cleanup(real.CloseIdleConnections)
			tr := tc.tr
			tr.Strategy = noWait()
			tr.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := real.RoundTrip(r)
				if err == nil {
					discard(resp)
					resp.Body = nil // the broken contract
				}
				return resp, err
			})
			resp, err, rep := send(t, tr, t.Context(), http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || rep.Attempts != tc.attempts {
				t.Fatalf("%d after %d attempts; want %d after %d", resp.StatusCode, rep.Attempts, tc.status, tc.attempts)
			}
			if resp.Body == nil {
				t.Fatal("a nil Body; want an empty one")
			}
			if b, err := io.ReadAll(resp.Body); len(b) != 0 || err != nil {
				t.Fatalf("read %q, %v", b, err)
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
