package httpretry

// Tests of HTTP/2 streams the server resets or abandons, against real
// HTTP/2 over TLS on loopback. A stream reset by a handler's panic comes
// from net/http's own server. REFUSED_STREAM and GOAWAY with a chosen last
// stream id cannot be made with net/http's server, and the root module may
// not import golang.org/x/net/http2, so h2Server speaks the few frames these
// tests need (RFC 9113, section 6) over a connection an httptest server
// accepted and negotiated "h2" on.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// h2Base is a client transport that speaks HTTP/2 to srv, trusting its
// certificate.
func h2Base(t *testing.T, srv *httptest.Server) *http.Transport {
	t.Helper()
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.ForceAttemptHTTP2 = true
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// A stream the server resets (here RST_STREAM INTERNAL_ERROR, which
// net/http's server sends when a handler panics with http.ErrAbortHandler)
// may have been processed: a GET is retried, a POST is not.
func TestHTTP2ResetStreamIsRetriedOnlyWhenIdempotent(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 1 {
			panic(http.ErrAbortHandler) // HTTP/2: RST_STREAM on this stream
		}
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := &Transport{Base: h2Base(t, srv), Strategy: noWait()}

	var first error
	tr.OnAttempt = firstAttempt(&first)
	resp, err, rep := send(t, tr, context.Background(), "GET", srv.URL, nil)
	if err != nil {
		t.Fatalf("GET: %v after %d attempts (first: %v)", err, rep.Attempts, first)
	}
	discard(resp)
	if resp.ProtoMajor != 2 || rep.Attempts != 2 || n.Load() != 2 {
		t.Fatalf("GET: %s after %d attempts, %d requests", resp.Proto, rep.Attempts, n.Load())
	}
	if first == nil || !strings.Contains(first.Error(), "INTERNAL_ERROR") {
		t.Fatalf("the first attempt failed with %v, not a reset stream", first)
	}

	n.Store(0)
	resp, err, rep = send(t, tr, context.Background(), "POST", srv.URL, strings.NewReader("charge $10"))
	discard(resp)
	if err == nil || !errors.Is(err, retry.ErrNotRetryable) || rep.Attempts != 1 || n.Load() != 1 {
		t.Fatalf("POST: err %v after %d attempts, %d requests", err, rep.Attempts, n.Load())
	}
}

// A stream the server refused (RST_STREAM REFUSED_STREAM) was not processed
// (RFC 9113, section 8.7): it is sent again whatever the method. net/http's
// client retries a refused stream itself when it can rewind the body; here
// the body cannot be rewound (no GetBody) and was never read, because the
// request waits for 100-continue, so the refusal reaches the Transport, whose
// guard can still send the unread body.
func TestHTTP2RefusedStreamIsRetriedWhateverTheMethod(t *testing.T) {
	srv := newH2Server(t, func(n int, stream uint32, f *h2Frames) h2Action {
		if n == 1 {
			f.write(h2RSTStream, 0, stream, h2Code(h2RefusedStream))
			return h2Done
		}
		return h2Respond
	})
	base := h2Base(t, srv.Server)
	base.ExpectContinueTimeout = time.Minute // the body waits for the server's 100
	req, _ := http.NewRequest("POST", srv.URL, io.NopCloser(strings.NewReader("charge $10")))
	req.Header.Set("Expect", "100-continue")
	req.ContentLength = int64(len("charge $10"))
	var rep Report
	req = req.WithContext(WithReport(context.Background(), &rep))
	var first error
	tr := &Transport{Base: base, Strategy: noWait(), OnAttempt: firstAttempt(&first)}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST: %v after %d attempts (first: %v)", err, rep.Attempts, first)
	}
	discard(resp)
	if first == nil || !strings.Contains(first.Error(), "REFUSED_STREAM") {
		t.Fatalf("the first attempt failed with %v, not a refused stream", first)
	}
	if bodies := srv.bodies(); rep.Attempts != 2 || len(bodies) != 2 || bodies[1] != "charge $10" {
		t.Fatalf("%d attempts; the server saw bodies %q", rep.Attempts, bodies)
	}
}

// A GOAWAY whose last stream id (0: none) is below the request's stream says
// the server never processed it (RFC 9113, section 6.8): a POST is sent again.
// net/http's client hands this one back (a non-zero error code on a
// connection's first stream) instead of retrying it itself.
func TestHTTP2GoAwayBelowTheStreamIsRetriedWhateverTheMethod(t *testing.T) {
	srv := newH2Server(t, func(n int, stream uint32, f *h2Frames) h2Action {
		if n == 1 {
			f.write(h2GoAway, 0, 0, h2GoAwayPayload(0, h2EnhanceYourCalm))
			return h2Done
		}
		return h2Respond
	})
	var first error
	tr := &Transport{Base: h2Base(t, srv.Server), Strategy: noWait(), OnAttempt: firstAttempt(&first)}
	resp, err, rep := send(t, tr, context.Background(), "POST", srv.URL, strings.NewReader("charge $10"))
	if err != nil {
		t.Fatalf("POST: %v after %d attempts (first: %v)", err, rep.Attempts, first)
	}
	discard(resp)
	if first == nil || !strings.Contains(first.Error(), "GOAWAY") {
		t.Fatalf("the first attempt failed with %v, not a GOAWAY", first)
	}
	if bodies := srv.bodies(); rep.Attempts != 2 || len(bodies) != 2 || bodies[1] != "charge $10" || srv.conns.Load() != 2 {
		t.Fatalf("%d attempts, %d connections; the server saw bodies %q", rep.Attempts, srv.conns.Load(), bodies)
	}
}

// A connection closed after a GOAWAY that covers the request's stream (its
// last stream id is the request's) leaves the request maybe processed: a GET
// is sent again, a POST is not.
func TestHTTP2GoAwayCoveringTheStreamIsRetriedOnlyWhenIdempotent(t *testing.T) {
	for _, c := range readFailureCases() {
		t.Run(c.method, func(t *testing.T) {
			srv := newH2Server(t, func(n int, stream uint32, f *h2Frames) h2Action {
				if n == 1 {
					f.write(h2GoAway, 0, 0, h2GoAwayPayload(stream, h2NoError))
					return h2Hangup
				}
				return h2Respond
			})
			var first error
			tr := &Transport{Base: h2Base(t, srv.Server), Strategy: noWait(), OnAttempt: firstAttempt(&first)}
			resp, err, rep := send(t, tr, context.Background(), c.method, srv.URL, c.body)
			discard(resp)
			if first == nil || !strings.Contains(first.Error(), "GOAWAY") {
				t.Fatalf("the first attempt failed with %v, not a GOAWAY", first)
			}
			if rep.Attempts != c.attempts || len(srv.bodies()) != c.attempts {
				t.Fatalf("err %v after %d attempts, %d requests; want %d", err, rep.Attempts, len(srv.bodies()), c.attempts)
			}
			if c.attempts == 1 && !errors.Is(err, retry.ErrNotRetryable) {
				t.Fatalf("err %v, want ErrNotRetryable", err)
			}
			if c.attempts == 2 && err != nil {
				t.Fatalf("err %v", err)
			}
		})
	}
}

// A connection whose server goes silent fails the client's HTTP/2 health
// check (HTTP2Config.SendPingTimeout, PingTimeout: its PING is never
// acknowledged), and net/http ends the request with "http2: client
// connection lost": a read failure, since the server may have processed the
// request. A GET is sent again, on a new connection; a POST is not.
//
// The timeouts are real and small: the health check's timers would run in a
// synctest bubble, but the client's read loop waits on the loopback socket,
// which is not durably blocking, so the bubble's clock would never reach
// them. Nothing here asserts a duration.
func TestHTTP2ConnectionLostToTheHealthCheckIsARetriedReadFailure(t *testing.T) {
	for _, c := range readFailureCases() {
		t.Run(c.method, func(t *testing.T) {
			var n atomic.Int32
			release := make(chan struct{})
			defer close(release)
			ln := &silencingListener{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if n.Add(1) == 1 {
					ln.silence() // the connections so far: this request's
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				io.WriteString(w, "ok")
			}))
			ln.Listener = srv.Listener
			srv.Listener = ln
			srv.EnableHTTP2 = true
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			base := h2Base(t, srv)
			base.HTTP2 = &http.HTTP2Config{SendPingTimeout: 50 * time.Millisecond, PingTimeout: 250 * time.Millisecond}

			var first error
			tr := &Transport{Base: base, Strategy: noWait(), OnAttempt: firstAttempt(&first)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err, rep := send(t, tr, ctx, c.method, srv.URL, c.body)
			discard(resp)
			if first == nil || !strings.Contains(first.Error(), "client connection lost") {
				t.Fatalf("the first attempt failed with %v, not a lost connection", first)
			}
			wantReadFailureOutcome(t, rep, int(n.Load()), c.attempts, resp, err)
			if c.attempts == 2 && (resp.ProtoMajor != 2 || ln.accepted.Load() != 2) {
				t.Fatalf("%s over %d connections; want HTTP/2 over 2", resp.Proto, ln.accepted.Load())
			}
		})
	}
}

// silencingListener's connections go silent on demand: once silence is
// called, whatever the server writes on the connections accepted so far is
// dropped, as by a peer gone or a path that loses every packet, while it
// still reads what the client sends.
type silencingListener struct {
	net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []*silencingConn
}

func (l *silencingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	sc := &silencingConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, sc)
	l.mu.Unlock()
	return sc, nil
}

func (l *silencingListener) silence() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.silent.Store(true)
	}
}

type silencingConn struct {
	net.Conn
	silent atomic.Bool
}

func (c *silencingConn) Write(p []byte) (int, error) {
	if c.silent.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// HTTP/2 frame types, flags and error codes (RFC 9113, sections 6 and 7).
const (
	h2Data            = 0x0
	h2Headers         = 0x1
	h2RSTStream       = 0x3
	h2Settings        = 0x4
	h2Ping            = 0x6
	h2GoAway          = 0x7
	h2FlagEnd         = 0x1 // END_STREAM; ACK on SETTINGS and PING
	h2FlagHeaders     = 0x4 // END_HEADERS
	h2NoError         = 0x0
	h2EnhanceYourCalm = 0xb
)

// h2Action is what h2Server does after its script has seen a request's
// HEADERS.
type h2Action int

const (
	h2Respond h2Action = iota // 100 if a body follows, then 200 once it ends
	h2Done                    // nothing more on this stream
	h2Hangup                  // close the connection, after a TLS close_notify
)

// h2Script is called with each request's HEADERS: n counts the requests
// across connections from 1.
type h2Script func(n int, stream uint32, f *h2Frames) h2Action

// h2Frames writes frames on one connection.
type h2Frames struct {
	mu   sync.Mutex
	conn *tls.Conn
}

func (f *h2Frames) write(typ, flags byte, stream uint32, payload []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	f.conn.Write(append(hdr, payload...))
}

func h2Code(code uint32) []byte { return binary.BigEndian.AppendUint32(nil, code) }

func h2GoAwayPayload(last, code uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, last), code)
}

// h2Server is an httptest TLS server whose "h2" connections are served by a
// script instead of net/http's HTTP/2 server.
type h2Server struct {
	*httptest.Server
	script h2Script
	conns  atomic.Int32
	mu     sync.Mutex
	n      int
	bodyOf map[*h2Frames]map[uint32]int // request number of each open stream
	body   []string                     // the body of request n, at n-1
	open   []*tls.Conn
}

func newH2Server(t *testing.T, script h2Script) *h2Server {
	t.Helper()
	s := &h2Server{script: script, bodyOf: map[*h2Frames]map[uint32]int{}}
	s.Server = httptest.NewUnstartedServer(http.NotFoundHandler())
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.serve(c) },
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	t.Cleanup(func() { // before Close, which waits for the connections
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.open {
			c.Close()
		}
	})
	return s
}

func (s *h2Server) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.body...)
}

// serve reads the client's frames on one connection until it ends.
func (s *h2Server) serve(c *tls.Conn) {
	s.conns.Add(1)
	s.mu.Lock()
	s.open = append(s.open, c)
	s.mu.Unlock()
	defer c.Close()
	f := &h2Frames{conn: c}
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2Preface {
		return
	}
	f.write(h2Settings, 0, 0, nil)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&(1<<31-1)
		switch {
		case typ == h2Settings && flags&h2FlagEnd == 0:
			f.write(h2Settings, h2FlagEnd, 0, nil)
		case typ == h2Ping && flags&h2FlagEnd == 0:
			f.write(h2Ping, h2FlagEnd, 0, payload)
		case typ == h2Headers:
			s.mu.Lock()
			s.n++
			n := s.n
			s.body = append(s.body, "")
			s.mu.Unlock()
			switch s.script(n, stream, f) {
			case h2Hangup:
				c.CloseWrite() // close_notify, then FIN: the client reads all that came before
				io.Copy(io.Discard, c)
				return
			case h2Respond:
				if flags&h2FlagEnd != 0 {
					f.write(h2Headers, h2FlagHeaders|h2FlagEnd, stream, []byte{0x88}) // :status 200
					continue
				}
				// :status 100, a literal with the name of static entry 8.
				f.write(h2Headers, h2FlagHeaders, stream, []byte{0x08, 3, '1', '0', '0'})
				s.mu.Lock()
				if s.bodyOf[f] == nil {
					s.bodyOf[f] = map[uint32]int{}
				}
				s.bodyOf[f][stream] = n
				s.mu.Unlock()
			}
		case typ == h2Data:
			s.mu.Lock()
			n, ok := s.bodyOf[f][stream]
			if ok {
				s.body[n-1] += string(h2DataPayload(flags, payload))
			}
			s.mu.Unlock()
			if ok && flags&h2FlagEnd != 0 {
				f.write(h2Headers, h2FlagHeaders|h2FlagEnd, stream, []byte{0x88})
			}
		}
	}
}

// http2Preface is what every HTTP/2 client sends first (RFC 9113, 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2DataPayload strips a DATA frame's padding (flag 0x8), if any.
func h2DataPayload(flags byte, p []byte) []byte {
	if flags&0x8 == 0 || len(p) == 0 {
		return p
	}
	pad := int(p[0])
	if 1+pad > len(p) {
		return nil
	}
	return p[1 : len(p)-pad]
}
