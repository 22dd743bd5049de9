package httpretry

// Helpers shared by the package's tests: loopback servers (the kit's, in
// internal/retrytest), requests with a Report, and bodies and base
// transports that count what they see.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// server is a loopback HTTP server whose handler is told the request's
// number (1 for the first) and which records every request it sees.
type server = retrytest.Server

func newServer(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	return retrytest.NewServer(t, h)
}

// failFirst answers the first n requests with status (and a short body), the
// rest with 200 "ok".
func failFirst(n, status int) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i <= n {
			http.Error(w, "failure "+fmt.Sprint(i), status)
			return
		}
		io.WriteString(w, "ok")
	}
}

// noWait retries at once: tests of what is retried need no waiting.
func noWait() *retry.Simple { return &retry.Simple{Backoff: retry.Constant(0)} }

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// resetServer closes the first n connections' requests with a TCP reset
// (SetLinger(0)) after reading the request, and answers the rest.
func resetServer(t *testing.T, n int) *server {
	return newServer(t, func(i int, w http.ResponseWriter, r *http.Request) {
		if i > n {
			io.WriteString(w, "ok")
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	})
}

// virtual runs f in a synctest bubble with a base transport that keeps no
// idle connections: a goroutine waiting on a real socket is not durably
// blocked, so idle connections would stop the bubble's clock.
func virtual(t *testing.T, f func(t *testing.T, base *http.Transport)) {
	synctest.Test(t, func(t *testing.T) {
		base := &http.Transport{DisableKeepAlives: true}
		f(t, base)
		base.CloseIdleConnections()
	})
}

// errReadAfterClose is what a countingBody returns when read after a close.
var errReadAfterClose = errors.New("read after close")

// countingBody wraps a body (a request's, or a response's from a real
// transport) and counts the bytes read from it and its closes. Once closed,
// it refuses reads, so a body closed too early cannot be sent again.
type countingBody struct {
	rc     io.ReadCloser
	onRead func(total int64) // if set, told the bytes read so far after each read
	mu     sync.Mutex
	read   int64
	closes int
}

func newCountingBody(s string) *countingBody {
	return &countingBody{rc: io.NopCloser(strings.NewReader(s))}
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	closed := b.closes > 0
	b.mu.Unlock()
	if closed {
		return 0, errReadAfterClose
	}
	n, err := b.rc.Read(p) // unlocked: a Close must not wait for a blocked read
	b.mu.Lock()
	b.read += int64(n)
	total := b.read
	b.mu.Unlock()
	if b.onRead != nil {
		b.onRead(total)
	}
	return n, err
}

func (b *countingBody) Close() error {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	return b.rc.Close()
}

func (b *countingBody) counts() (read int64, closes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read, b.closes
}

// observed wraps a real base transport: it records the requests the
// Transport gives it and wraps the bodies of the real responses in
// countingBody, with onRead if set.
type observed struct {
	base   http.RoundTripper
	onRead func(total int64)
	mu     sync.Mutex
	reqs   []*http.Request
	bodies []*countingBody
}

func (o *observed) RoundTrip(r *http.Request) (*http.Response, error) {
	o.mu.Lock()
	o.reqs = append(o.reqs, r)
	o.mu.Unlock()
	resp, err := o.base.RoundTrip(r)
	if resp != nil {
		b := &countingBody{rc: resp.Body, onRead: o.onRead}
		resp.Body = b
		o.mu.Lock()
		o.bodies = append(o.bodies, b)
		o.mu.Unlock()
	}
	return resp, err
}

func (o *observed) CloseIdleConnections() {
	if c, ok := o.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (o *observed) calls() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.reqs...)
}

func (o *observed) responses() []*countingBody {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*countingBody(nil), o.bodies...)
}

// roundTripFunc is a base transport made of a function; the two tests that
// use it delegate to a real transport and add one step no server can cause.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// send makes one request through tr with a Report.
func send(t *testing.T, tr *Transport, ctx context.Context, method, url string, body io.Reader) (*http.Response, error, Report) {
	t.Helper()
	var rep Report
	req, err := http.NewRequestWithContext(WithReport(ctx, &rep), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	return resp, err, rep
}

// discard reads and closes a response's body, if there is a response.
func discard(resp *http.Response) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// answer returns a handler that answers request n with statuses[n-1] (the
// last repeats) and the header pairs of headers[n-1], if any; 200 answers "ok".
func answer(statuses []int, headers ...[]string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n-1 < len(headers) {
			h := headers[n-1]
			for i := 0; i+1 < len(h); i += 2 {
				w.Header().Add(h[i], h[i+1])
			}
		}
		status := statuses[min(n, len(statuses))-1]
		if status == http.StatusOK {
			io.WriteString(w, "ok")
			return
		}
		http.Error(w, "failure "+strconv.Itoa(n), status)
	}
}

// hostOf is the scope of requests to srv: its host and port.
func hostOf(srv *server) string { return strings.TrimPrefix(srv.URL, "http://") }
