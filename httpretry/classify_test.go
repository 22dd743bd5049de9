package httpretry

// Tests of failures to read a response, and of a connection the server
// closes before it reads the request, against real servers on loopback.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// firstFails is a handler whose first request is answered by fail, if set,
// on the hijacked connection, and the others with 200 "ok". It counts requests and
// keeps their bodies.
type firstFails struct {
	fail   func(t *testing.T, conn net.Conn)
	t      *testing.T
	mu     sync.Mutex
	bodies []string
}

func (h *firstFails) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.bodies = append(h.bodies, string(body))
	n := len(h.bodies)
	h.mu.Unlock()
	if n > 1 || h.fail == nil {
		io.WriteString(w, "ok")
		return
	}
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		h.t.Error(err)
		return
	}
	defer conn.Close()
	h.fail(h.t, conn)
}

func (h *firstFails) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

// wantReadFailureOutcome checks the end of a request whose first attempt
// failed reading the response: a GET made 2 attempts and got the 200, a POST
// 1 and stopped as not retryable.
func wantReadFailureOutcome(t *testing.T, rep Report, requests, attempts int, resp *http.Response, err error) {
	t.Helper()
	if rep.Attempts != attempts || requests != attempts {
		t.Fatalf("err %v after %d attempts, %d requests; want %d", err, rep.Attempts, requests, attempts)
	}
	if attempts == 2 && (err != nil || resp.StatusCode != 200) {
		t.Fatalf("GET: err %v", err)
	}
	if attempts == 1 && !errors.Is(err, retry.ErrNotRetryable) {
		t.Fatalf("POST: err %v, want ErrNotRetryable", err)
	}
}

// readFailureCase is a request whose first attempt fails reading the
// response, and the attempts it makes, as wantReadFailureOutcome checks.
type readFailureCase struct {
	method   string
	body     io.Reader
	attempts int
}

// readFailureCases are a GET, sent again after a read failure, and a POST,
// which is not; each call gives bodies of their own.
func readFailureCases() []readFailureCase {
	return []readFailureCase{{"GET", nil, 2}, {"POST", strings.NewReader("charge $10"), 1}}
}

// firstAttempt returns an OnAttempt that keeps the first attempt's error.
func firstAttempt(err *error) func(Attempt) {
	return func(a Attempt) {
		if a.N == 1 {
			*err = a.Err
		}
	}
}

// A TLS record that fails its integrity check after the handshake completed
// (here the server writes a record of random bytes under the session) is a
// read failure of the response: a GET is retried, a POST is not.
func TestTLSRecordErrorAfterTheHandshakeIsARetriedReadFailure(t *testing.T) {
	for _, c := range readFailureCases() {
		t.Run(c.method, func(t *testing.T) {
			h := &firstFails{t: t, fail: func(t *testing.T, conn net.Conn) {
				// Application data, TLS 1.2 on the wire, 32 bytes that no
				// key decrypts.
				record := append([]byte{0x17, 0x03, 0x03, 0x00, 0x20}, make([]byte, 32)...)
				if _, err := conn.(*tls.Conn).NetConn().Write(record); err != nil {
					t.Error(err)
				}
			}}
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			base := srv.Client().Transport.(*http.Transport)
			t.Cleanup(base.CloseIdleConnections)

			var first error
			tr := &Transport{Base: base, Strategy: noWait(), OnAttempt: firstAttempt(&first)}
			resp, err, rep := send(t, tr, context.Background(), c.method, srv.URL, c.body)
			discard(resp)
			var oe *net.OpError
			if !errors.As(first, &oe) || oe.Op != "local error" || !strings.Contains(first.Error(), "bad record MAC") {
				t.Fatalf("the first attempt failed with %v, not a record error", first)
			}
			wantReadFailureOutcome(t, rep, len(h.requests()), c.attempts, resp, err)
		})
	}
}

// TLS failures of the handshake stay permanent: a server that does not speak
// TLS, and a server that refuses the client's protocol versions with an
// alert. Neither is tried twice.
func TestTLSHandshakeFailuresStayPermanent(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	t.Cleanup(plain.Close)
	modern := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	modern.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
	modern.Config.ErrorLog = log.New(io.Discard, "", 0)
	modern.StartTLS()
	t.Cleanup(modern.Close)
	old := modern.Client().Transport.(*http.Transport).Clone()
	old.TLSClientConfig.MaxVersion = tls.VersionTLS12
	t.Cleanup(old.CloseIdleConnections)

	for _, c := range []struct {
		name  string
		base  *http.Transport
		url   string
		check func(error) bool
	}{
		{"not TLS", &http.Transport{}, "https://" + strings.TrimPrefix(plain.URL, "http://"),
			func(err error) bool { var rec tls.RecordHeaderError; return errors.As(err, &rec) && rec.Conn != nil }},
		{"protocol version alert", old, modern.URL,
			func(err error) bool {
				var oe *net.OpError
				return errors.As(err, &oe) && oe.Op == "remote error" && strings.Contains(err.Error(), "protocol version")
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.base.CloseIdleConnections()
			resp, err, rep := send(t, &Transport{Base: c.base, Strategy: noWait()}, context.Background(), "GET", c.url, nil)
			discard(resp)
			if err == nil || !c.check(err) {
				t.Fatalf("err %v, not the error the case is about", err)
			}
			if rep.Attempts != 1 || !errors.Is(err, retry.ErrNotRetryable) {
				t.Fatalf("%d attempts, err %v", rep.Attempts, err)
			}
		})
	}
}

// closeFirstListener closes the first connection it accepts at once, as a
// server closing an idle connection does.
type closeFirstListener struct {
	net.Listener
	closed atomic.Bool
}

func (l *closeFirstListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.closed.CompareAndSwap(false, true) {
			return c, err
		}
		c.Close()
	}
}

// notifyingConn tells when the client transport closes it.
type notifyingConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *notifyingConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// A connection the server closes before the request is sent never carried
// it: net/http reports "http: server closed idle connection", and on a fresh
// connection does not retry it itself. The Transport sends it again whatever
// its method. The client's request waits (in httptrace's GotConn) until
// net/http has seen the close, so that the error is this one and not a
// failed write.
func TestServerClosedIdleConnectionIsRetriedWhateverTheMethod(t *testing.T) {
	h := &firstFails{t: t} // the listener fails the first connection
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = &closeFirstListener{Listener: srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	var (
		dialer net.Dialer
		mu     sync.Mutex
		firstC *notifyingConn
	)
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if firstC == nil {
			firstC = &notifyingConn{Conn: c, closed: make(chan struct{})}
			return firstC, nil
		}
		return c, nil
	}}
	t.Cleanup(base.CloseIdleConnections)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		mu.Lock()
		c := firstC
		mu.Unlock()
		if info.Conn != net.Conn(c) {
			return
		}
		select {
		case <-c.closed:
		case <-time.After(10 * time.Second): // a bound on a broken test, not a wait the test needs
			t.Error("the server's close never reached the client")
		}
	}}

	var first error
	tr := &Transport{Base: base, Strategy: noWait(), OnAttempt: firstAttempt(&first)}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	resp, err, rep := send(t, tr, ctx, "POST", srv.URL, strings.NewReader("charge $10"))
	if err != nil {
		t.Fatalf("POST: %v after %d attempts (first: %v)", err, rep.Attempts, first)
	}
	discard(resp)
	if first == nil || !strings.Contains(first.Error(), "server closed idle connection") {
		t.Fatalf("the first attempt failed with %v, not a closed idle connection", first)
	}
	if bodies := h.requests(); rep.Attempts != 2 || len(bodies) != 1 || bodies[0] != "charge $10" {
		t.Fatalf("%d attempts; the server saw bodies %q", rep.Attempts, bodies)
	}
}

// A response Go cannot parse (a status line without a status, a status code
// that is not a number, a header line without a colon) is a read failure of
// the response, as urllib3 has it: a GET is retried, a POST is not.
func TestMalformedResponseIsARetriedReadFailure(t *testing.T) {
	for _, answer := range []string{
		"HELLO\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
	} {
		for _, c := range readFailureCases() {
			t.Run(c.method+" "+strings.Fields(answer)[0], func(t *testing.T) {
				h := &firstFails{t: t, fail: func(t *testing.T, conn net.Conn) { io.WriteString(conn, answer) }}
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)
				base := &http.Transport{}
				t.Cleanup(base.CloseIdleConnections)
				var first error
				tr := &Transport{Base: base, Strategy: noWait(), OnAttempt: firstAttempt(&first)}
				resp, err, rep := send(t, tr, context.Background(), c.method, srv.URL, c.body)
				discard(resp)
				if first == nil || !strings.Contains(first.Error(), "malformed") {
					t.Fatalf("the first attempt failed with %v, not a malformed response", first)
				}
				wantReadFailureOutcome(t, rep, len(h.requests()), c.attempts, resp, err)
			})
		}
	}
}

// FuzzMessageKind: sorting an error's text never panics, knows only the
// messages it names (whole, or by their fixed start), and finds one through
// a wrapping error but not inside another message.
func FuzzMessageKind(f *testing.F) {
	for _, s := range []string{
		msgServerClosedIdle,
		"stream error: stream ID 1; REFUSED_STREAM; received from peer",
		"stream error: stream ID 3; HTTP_1_1_REQUIRED",
		"stream error: stream ID 3",
		"http2: Transport: cannot retry err [stream error: stream ID 1; REFUSED_STREAM] after Request.Body was written; define Request.GetBody to avoid this error",
		"http2: Transport: cannot retry err [http2: Transport: cannot retry err [",
		msgGracefulGoAway,
		"http2: Transport received GOAWAY from server ErrCode:ENHANCE_YOUR_CALM",
		`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`,
		`Get "http://x/": http: server closed idle connection`,
		`malformed HTTP response "HELLO"`,
		`malformed HTTP request "GET"`,
		msgConnLost,
		msgConnLost + ": more",
		"http2: Transport: cannot retry err [" + msgConnLost + "] after Request.Body was written; define Request.GetBody to avoid this error",
	} {
		f.Add(s)
	}
	prefixes := []string{msgServerClosedIdle, msgMalformed, msgStreamError, msgCannotRetry, msgGoAwayAbove, msgGracefulGoAway, msgGoAwayClosed, msgConnLost}
	f.Fuzz(func(t *testing.T, msg string) {
		kind, ok := messageKind(msg)
		named := false
		for _, p := range prefixes {
			named = named || strings.HasPrefix(msg, p)
		}
		if ok && !named {
			t.Fatalf("%q sorted as %v, but it is none of the messages", msg, kind)
		}
		if !ok && kind != 0 {
			t.Fatalf("%q: kind %v for an unknown message", msg, kind)
		}
		if k, found := textKind(fmt.Errorf("Get %q: %w", "http://x/", errors.New(msg))); k != kind || found != ok {
			t.Fatalf("%q wrapped: %v %v, alone: %v %v", msg, k, found, kind, ok)
		}
		if _, found := textKind(errors.New("upstream said: " + msg)); found {
			t.Fatalf("%q found inside another message", msg)
		}
	})
}
