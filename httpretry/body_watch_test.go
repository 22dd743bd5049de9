package httpretry

// The request-body watch against net/http's own resend, and what held
// when a body misbehaves.

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// streamBody is a body that is not one of the in-memory readers, so that it
// is watched.
type streamBody struct{ r io.Reader }

func (b *streamBody) Read(p []byte) (int, error) { return b.r.Read(p) }

// net/http sends a replayable request (a PUT with an Idempotency-Key) again
// itself, with a body from GetBody, when a reused connection dies before the
// response. When that body fails to read, the failure is the caller's as on
// any other send: one attempt, a "request body failed" error, and nothing
// for the Breaker. The server here reads every PUT and hangs up on it
// unanswered, on a connection a warm-up GET left idle.
func TestBodyThatFailsOnNetHTTPsOwnResendIsTheCallers(t *testing.T) {
	var mu sync.Mutex
	served := map[string]bool{} // connections that carried a request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		reused := served[r.RemoteAddr]
		served[r.RemoteAddr] = true
		mu.Unlock()
		if r.Method == http.MethodPut && reused { // a PUT on the warm-up's connection
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
	tr := &Transport{Base: base, Strategy: noWait(), Breaker: b}
	for i := range 4 {
		// A warm-up GET straight through the base leaves a connection idle.
		warm, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := base.RoundTrip(warm)
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)

		putFailingOnResend(t, tr, srv.URL, true, i)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if st := b.State(host); st != retry.BreakerClosed {
		t.Errorf("breaker %v after 4 requests whose own bodies failed; want closed", st)
	}
}

// dataAndError yields its data and its error in the same Read, as the
// io.Reader contract allows.
type dataAndError struct {
	data []byte
	err  error
	done bool
}

func (b *dataAndError) Read(p []byte) (int, error) {
	if b.done {
		return 0, b.err
	}
	b.done = true
	return copy(p, b.data), b.err
}

// Held: a body whose one Read returns data and an error together is a body
// failure: one attempt, not retried, the error says so.
func TestBodyReadWithDataAndErrorIsTheBodysFailure(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	tr := &Transport{Base: &http.Transport{}, Strategy: noWait()}
	t.Cleanup(tr.CloseIdleConnections)
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(t.Context(), &rep), http.MethodPut, srv.URL, nil)
	req.ContentLength = 100
	req.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(&dataAndError{data: []byte("0123456789"), err: io.ErrUnexpectedEOF}), nil
	}
	req.Body, _ = req.GetBody()
	resp, err := tr.RoundTrip(req)
	discard(resp)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "request body failed") || rep.Attempts != 1 {
		t.Fatalf("%d attempts, err = %v; want 1 and a request body failure", rep.Attempts, err)
	}
}

// Held: a PUT with Expect: 100-continue whose server answers 503 without
// reading the body (no 100 Continue) is retried with GetBody's body; the
// unread body is closed by net/http, which the watch does not take for the
// body's failure, and the retry's body arrives whole, once.
func TestExpectContinueRefusedThenRetried(t *testing.T) {
	var n atomic.Int32
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Connection", "close")
			http.Error(w, "busy", http.StatusServiceUnavailable) // the body unread: no 100 Continue
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	base := &http.Transport{ExpectContinueTimeout: time.Minute}
	t.Cleanup(base.CloseIdleConnections)
	tr := &Transport{Base: base, Strategy: noWait()}
	payload := strings.Repeat("y", 1000)
	var reads atomic.Int32
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(t.Context(), &rep), http.MethodPut, srv.URL, nil)
	req.ContentLength = int64(len(payload))
	req.Header.Set("Expect", "100-continue")
	req.GetBody = func() (io.ReadCloser, error) {
		reads.Add(1)
		return io.NopCloser(&streamBody{strings.NewReader(payload)}), nil
	}
	req.Body, _ = req.GetBody()
	resp, err := tr.RoundTrip(req)
	discard(resp)
	if err != nil || resp.StatusCode != http.StatusOK || rep.Attempts != 2 || n.Load() != 2 || len(bodies) != 1 || bodies[0] != payload {
		t.Fatalf("err %v, %d attempts, %d requests, bodies %d; want 200 after 2, the second with the whole body", err, rep.Attempts, n.Load(), len(bodies))
	}
}

// Held: a 307 through an http.Client over the Transport: the Client replays
// the body with GetBody for the second hop; each hop's watched copy sends it
// whole, once.
func TestRedirectWithABodyIsSentWholeOnEachHop(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
			return
		}
		io.WriteString(w, "ok")
	})
	tr := &Transport{Base: &http.Transport{}, Strategy: noWait()}
	t.Cleanup(tr.CloseIdleConnections)
	payload := strings.Repeat("z", 500)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/a", nil)
	req.ContentLength = int64(len(payload))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(&streamBody{strings.NewReader(payload)}), nil }
	req.Body, _ = req.GetBody()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	discard(resp)
	reqs := srv.Requests()
	if err != nil || len(reqs) != 2 || reqs[0].Body != payload || reqs[1].Body != payload {
		t.Fatalf("err %v, %d requests; want 2, each with the whole body", err, len(reqs))
	}
}

// Held: inMemory on odd bodies does not panic: io.NopCloser(nil) and a
// NopCloser-like type of the caller's are not taken for in-memory ones.
func TestInMemoryOddBodies(t *testing.T) {
	for _, rc := range []io.ReadCloser{
		io.NopCloser(nil),
		struct {
			io.Reader
			io.Closer
		}{strings.NewReader("x"), io.NopCloser(nil)},
	} {
		if inMemory(rc) {
			t.Errorf("inMemory(%T) = true", rc)
		}
	}
}

// The HTTP/2 variant: net/http's HTTP/2 client sends a refused stream
// (REFUSED_STREAM) again itself, with a body from GetBody. When that body
// fails to read, the failure is the caller's: one attempt, a request body
// failure, nothing for the Breaker.
func TestBodyThatFailsOnHTTP2sOwnResendIsTheCallers(t *testing.T) {
	srv := newH2Server(t, func(n int, stream uint32, f *h2Frames) h2Action {
		if n%2 == 1 { // the first send of each PUT
			f.write(h2RSTStream, 0, stream, h2Code(h2RefusedStream))
			return h2Done
		}
		return h2Respond
	})
	base := h2Base(t, srv.Server)
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
	tr := &Transport{Base: base, Strategy: noWait(), Breaker: b}
	for i := range 4 {
		putFailingOnResend(t, tr, srv.URL, false, i)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	if st := b.State(host); st != retry.BreakerClosed {
		t.Errorf("breaker %v after 4 requests whose own bodies failed; want closed", st)
	}
}

// Every Read of a watched body (and of a guarded one) allocated: note took
// the address of its err parameter for the CompareAndSwap, which moved every
// call's err to the heap (go build -gcflags=-m: "moved to heap: err"), a
// successful read's included. A watched body should cost its reads nothing:
// an 8 MiB upload read in 32 KiB pieces made 256 allocations more.
func TestWatchedBodyReadsAllocateNothing(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPut, "http://example.invalid/", &streamBody{strings.NewReader(strings.Repeat("x", 1<<20))})
	r, w := watch(req)
	if w == nil {
		t.Fatal("test bug: the body is not watched")
	}
	p := make([]byte, 16)
	if n := testing.AllocsPerRun(1000, func() { _, _ = r.Body.Read(p) }); n != 0 {
		t.Errorf("%v allocations per Read of a watched body; want 0", n)
	}
	g := &guardedBody{rc: io.NopCloser(&streamBody{strings.NewReader(strings.Repeat("x", 1<<20))})}
	if n := testing.AllocsPerRun(1000, func() { _, _ = g.Read(p) }); n != 0 {
		t.Errorf("%v allocations per Read of a guarded body; want 0", n)
	}
}

// putFailingOnResend sends PUT number i of a test through tr to url, a
// streamed body whose GetBody's copy fails to read after 10 bytes, with an
// Idempotency-Key if keyed, and fails t unless the PUT failed after one
// attempt with a request body failure.
func putFailingOnResend(t *testing.T, tr *Transport, url string, keyed bool, i int) {
	t.Helper()
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(t.Context(), &rep), http.MethodPut, url, &streamBody{strings.NewReader(strings.Repeat("x", 100))})
	req.ContentLength = 100
	if keyed {
		req.Header.Set(IdempotencyKeyHeader, "k")
	}
	req.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(&brokenBody{n: 10, err: io.ErrUnexpectedEOF}), nil
	}
	var firstErr error
	tr.OnAttempt = func(a Attempt) {
		if a.N == 1 {
			firstErr = a.Err
		}
	}
	resp, err := tr.RoundTrip(req)
	discard(resp)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "request body failed") || rep.Attempts != 1 {
		t.Errorf("PUT %d: %d attempts (the first failed with %v), err = %v; want 1 attempt and a request body failure",
			i+1, rep.Attempts, firstErr, err)
	}
}
