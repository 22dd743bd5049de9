package httpretry

// Request bodies that were never read, and failed chunked responses, on
// loopback: a real http.Transport against real servers, a refused dial to a
// closed port.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// A body larger than BufferBody and without GetBody cannot be buffered, but
// as long as the transport has not read a byte of it, it is as good as new:
// after a refused dial it is sent on the retry, whole and once, and closed
// once.
func TestUnreadBodyOverBufferBodyIsSentAfterARefusedDial(t *testing.T) {
	payload := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	const bufferBody = 1024
	bodies := map[string]func(t *testing.T) io.ReadCloser{
		"MultiReader": func(*testing.T) io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader(payload[:1000]), strings.NewReader(payload[1000:])))
		},
		"pipe": func(t *testing.T) io.ReadCloser {
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < len(payload); i += 4096 {
					if _, err := pw.Write([]byte(payload[i : i+4096])); err != nil {
						return // the reader was closed
					}
				}
				pw.Close()
			}()
			t.Cleanup(func() { pr.Close() })
			return pr
		},
	}
	for name, open := range bodies {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, failFirst(0, 0))
			base := refusedOnce(t, 1)
			defer base.CloseIdleConnections()
			obs := &observed{base: base}
			body := &countingBody{rc: open(t)} // no GetBody
			tr := &Transport{Base: obs, Strategy: noWait(), BufferBody: bufferBody}
			resp, err, rep := send(t, tr, context.Background(), "POST", srv.URL, body)
			if err != nil {
				t.Fatalf("err %v, report %+v", err, rep)
			}
			discard(resp)
			reqs := srv.Requests()
			if resp.StatusCode != 200 || len(obs.calls()) != 2 || rep.Attempts != 2 || rep.Reason != nil || len(reqs) != 1 {
				t.Fatalf("got %d after %d attempts (report %+v); the server saw %d requests, want 1",
					resp.StatusCode, len(obs.calls()), rep, len(reqs))
			}
			if reqs[0].Body != payload {
				t.Fatalf("the server received %d bytes, not the %d-byte payload", len(reqs[0].Body), len(payload))
			}
			if read, closes := body.counts(); read != int64(len(payload)) || closes != 1 {
				t.Fatalf("body: %d bytes read, %d closes; want %d read, closed once", read, closes, len(payload))
			}
		})
	}
}

// countingConn counts the bytes read or written on a connection, and
// signals progress after each read.
type countingConn struct {
	net.Conn
	read, written *atomic.Int64
	progress      chan struct{}
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.read != nil {
		c.read.Add(int64(n))
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.written != nil {
		c.written.Add(int64(n))
	}
	return n, err
}

// countingListener counts the bytes its connections write.
type countingListener struct {
	net.Listener
	written *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, written: l.written}, nil
}

// A failed response with a chunked body (no Content-Length, several flushes)
// of up to drainLimit bytes is drained to its end, so that the retry reuses
// its connection; a longer one is abandoned with its connection. The server
// sends the last chunk only once the client has read everything before it,
// so the end of the body always comes in a read of its own, as it does from
// a server that flushes its body and finishes later.
func TestChunkedFailedBodyWithinTheDrainLimitIsDrained(t *testing.T) {
	for _, tc := range []struct {
		size  int
		conns int32
	}{
		{drainLimit - 1, 1},
		{drainLimit, 1},
		{drainLimit + 1, 2},
	} {
		t.Run(strconv.Itoa(tc.size), func(t *testing.T) {
			var written, read atomic.Int64
			progress := make(chan struct{}, 1)
			var hits, conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				piece := strings.Repeat("x", tc.size/4)
				for i := range 4 {
					if i == 3 {
						piece += strings.Repeat("y", tc.size-4*len(piece))
					}
					io.WriteString(w, piece)
					w.(http.Flusher).Flush()
				}
				// Hold the last chunk until the client has read all the rest, or
				// gone.
				for read.Load() < written.Load() {
					select {
					case <-progress:
					case <-r.Context().Done():
						return
					}
				}
			}))
			srv.Listener = &countingListener{Listener: srv.Listener, written: &written}
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			var d net.Dialer
			base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: c, read: &read, progress: progress}, nil
			}}
			defer base.CloseIdleConnections()
			obs := &observed{base: base}
			var chunked atomic.Bool
			tr := &Transport{Base: obs, Strategy: noWait(), OnAttempt: func(a Attempt) {
				if a.N == 1 && a.Response != nil {
					chunked.Store(a.Response.ContentLength == -1 && slices.Equal(a.Response.TransferEncoding, []string{"chunked"}))
				}
			}}
			resp, err, _ := send(t, tr, context.Background(), "GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !chunked.Load() {
				t.Fatal("the 503 was not chunked")
			}
			bodies := obs.responses()
			if resp.StatusCode != 200 || string(b) != "ok" || len(bodies) != 2 {
				t.Fatalf("got %d %q after %d attempts, want 200 after 2", resp.StatusCode, b, len(bodies))
			}
			if n, _ := bodies[0].counts(); n != int64(tc.size) || conns.Load() != tc.conns {
				t.Fatalf("the 503's %d-byte chunked body: %d bytes drained; %d connections, want %d",
					tc.size, n, conns.Load(), tc.conns)
			}
		})
	}
}

// brokenBody yields n bytes of 'x', then fails with err, as an upload whose
// source breaks midway does.
type brokenBody struct {
	n   int
	err error
}

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, b.err
	}
	k := min(len(p), b.n)
	for i := range k {
		p[i] = 'x'
	}
	b.n -= k
	return k, nil
}

// A request whose own body fails to read midway (io.ErrUnexpectedEOF after
// 10 of 100 bytes) is the caller's fault, whatever the path it takes through
// the Transport: it is not sent again, the error says the request body failed
// and wraps the body's error, and a Breaker counts it as neither a failure
// nor a success, so that four of them leave a healthy host's circuit closed
// (it opens on 4 failures) and a GET to it goes through.
func TestRequestBodyThatFailsToReadIsNotRetriedNorTheHostsFailure(t *testing.T) {
	h1 := func(t *testing.T) (string, http.RoundTripper) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		}))
		t.Cleanup(srv.Close)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		return srv.URL, base
	}
	h2 := func(t *testing.T) (string, http.RoundTripper) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL, h2Base(t, srv)
	}
	withGetBody := func(req *http.Request) {
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(&brokenBody{n: 10, err: io.ErrUnexpectedEOF}), nil
		}
		req.Body, _ = req.GetBody()
	}
	withoutGetBody := func(req *http.Request) {
		req.Body = io.NopCloser(&brokenBody{n: 10, err: io.ErrUnexpectedEOF})
	}
	for _, tc := range []struct {
		name    string
		server  func(t *testing.T) (string, http.RoundTripper)
		tr      *Transport
		body    func(*http.Request)
		breaker bool
	}{
		{"GetBody", h1, &Transport{}, withGetBody, true},
		{"GetBody over HTTP/2", h2, &Transport{}, withGetBody, true},
		{"GetBody with AttemptTimeout", h1, &Transport{AttemptTimeout: time.Minute}, withGetBody, true},
		{"no GetBody", h1, &Transport{}, withoutGetBody, true},
		{"no GetBody, over BufferBody", h1, &Transport{BufferBody: 5}, withoutGetBody, true},
		{"Retries < 0 with a Breaker", h1, &Transport{Retries: -1}, withGetBody, true},
		{"Retries < 0 with a Breaker, no GetBody", h1, &Transport{Retries: -1}, withoutGetBody, true},
		{"Retries < 0", h1, &Transport{Retries: -1}, withGetBody, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, base := tc.server(t)
			tr := tc.tr
			tr.Base, tr.Strategy = base, noWait()
			var b *retry.Breaker
			if tc.breaker {
				b = retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
				tr.Breaker = b
			}
			for range 4 {
				var rep Report
				req, _ := http.NewRequestWithContext(WithReport(t.Context(), &rep), http.MethodPut, url, nil)
				req.ContentLength = 100
				tc.body(req)
				resp, err := tr.RoundTrip(req)
				discard(resp)
				var re *retry.Error
				if !errors.As(err, &re) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "request body failed") {
					t.Fatalf("err = %v; want a *retry.Error that says the request body failed and wraps io.ErrUnexpectedEOF", err)
				}
				if re.Attempts != 1 || rep.Attempts != 1 {
					t.Fatalf("%d attempts (report %d); want 1: a body that failed to read is not sent again", re.Attempts, rep.Attempts)
				}
				if retry.Classify(err).Retryable() {
					t.Fatalf("err = %v is retryable; want it not", err)
				}
			}
			if b == nil {
				return
			}
			host := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
			if st := b.State(host); st != retry.BreakerClosed {
				t.Fatalf("breaker %v after 4 requests whose own bodies failed; want closed", st)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			resp, err := tr.RoundTrip(req)
			discard(resp)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("a GET to the healthy host: %v; want 200", err)
			}
		})
	}
}

// A request body that fails because the caller's context ended (a reader
// tied to it) is the caller giving up, not a body that broke: the error is
// the cancellation's, not a body failure, and the breaker counts nothing.
func TestRequestBodyThatFailsAsTheCallerGivesUpIsTheCallersCancellation(t *testing.T) {
	srv := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	for _, retries := range []int{0, -1} {
		t.Run("Retries="+strconv.Itoa(retries), func(t *testing.T) {
			b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
			tr := &Transport{Base: &http.Transport{}, Strategy: noWait(), Breaker: b, Retries: retries}
			t.Cleanup(tr.CloseIdleConnections)
			for range 4 {
				ctx, cancel := context.WithCancel(t.Context())
				r, w := io.Pipe()
				go func() {
					_, _ = w.Write([]byte("0123456789"))
					cancel()
					w.CloseWithError(ctx.Err()) // the source ends with the caller's context
				}()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, r)
				req.ContentLength = 100
				resp, err := tr.RoundTrip(req)
				discard(resp)
				if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "request body failed") {
					t.Fatalf("err = %v; want the caller's cancellation, not a body failure", err)
				}
			}
			if st := b.State(hostOf(srv)); st != retry.BreakerClosed {
				t.Fatalf("breaker %v after 4 requests the caller gave up; want closed", st)
			}
		})
	}
}

// The bodies http.NewRequest makes of a bytes.Buffer, bytes.Reader or
// strings.Reader (io.NopCloser around it), and those their GetBody returns,
// cannot fail to read, so the Transport sends them without a watch (and
// without copying the request); every other body is watched.
func TestInMemoryBodiesAreToldFromOthers(t *testing.T) {
	for _, tc := range []struct {
		name string
		body io.Reader
		want bool
	}{
		{"bytes.Buffer", bytes.NewBufferString("x"), true},
		{"bytes.Reader", bytes.NewReader([]byte("x")), true},
		{"strings.Reader", strings.NewReader("x"), true},
		{"a reader of the caller's", &brokenBody{n: 1, err: io.ErrUnexpectedEOF}, false},
		{"a strings.Reader behind another", io.MultiReader(strings.NewReader("x")), false},
		{"io.NopCloser of a strings.Reader", io.NopCloser(strings.NewReader("x")), true},
		{"io.NopCloser of a reader of the caller's", io.NopCloser(&brokenBody{n: 1, err: io.ErrUnexpectedEOF}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPut, "http://example.invalid/", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := inMemory(req.Body); got != tc.want {
				t.Errorf("inMemory(Body) = %v; want %v", got, tc.want)
			}
			if req.GetBody == nil {
				return
			}
			replay, _ := req.GetBody()
			if got := inMemory(replay); got != tc.want {
				t.Errorf("inMemory(GetBody()) = %v; want %v", got, tc.want)
			}
		})
	}
}
