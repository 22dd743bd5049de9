package httpretry

// Request bodies that were never read, and failed chunked responses, on
// loopback: a real http.Transport against real servers, a refused dial to a
// closed port.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
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
			reqs := srv.requests()
			if resp.StatusCode != 200 || len(obs.calls()) != 2 || rep.Attempts != 2 || rep.Reason != nil || len(reqs) != 1 {
				t.Fatalf("got %d after %d attempts (report %+v); the server saw %d requests, want 1",
					resp.StatusCode, len(obs.calls()), rep, len(reqs))
			}
			if reqs[0].body != payload {
				t.Fatalf("the server received %d bytes, not the %d-byte payload", len(reqs[0].body), len(payload))
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
