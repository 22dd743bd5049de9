package httpcmd

import (
	"bufio"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// rawServer answers every connection on loopback with serve, after reading
// the request's head, and returns its URL.
func rawServer(t *testing.T, serve func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				serve(c.(*net.TCPConn))
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// A call that fails for want of a whole response exits as curl would for
// the same failure.
func TestHTTPExitStatusesAsCurl(t *testing.T) {
	t.Parallel()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	clientCert := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	clientCert.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	clientCert.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake fails on purpose
	clientCert.StartTLS()
	defer clientCert.Close()

	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	defer loop.Close()

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"TLS to a server that speaks plain HTTP", []string{strings.Replace(plain.URL, "http://", "https://", 1)}, 35},
		{"a TLS server's alert", []string{"-k", clientCert.URL}, 35},
		{"closed before any response", []string{rawServer(t, func(c *net.TCPConn) {})}, 52},
		{"reset", []string{rawServer(t, func(c *net.TCPConn) { c.SetLinger(0) })}, 56},
		{"a body cut short", []string{rawServer(t, func(c *net.TCPConn) {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello"))
		})}, 18},
		// The close comes after the bad chunk (a FIN: the request was read,
		// so it is no reset), and the client reads what came before it.
		{"malformed chunked encoding", []string{rawServer(t, func(c *net.TCPConn) {
			c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZZ\r\n"))
		})}, 56},
		{"a body that is not the gzip it says", []string{"--compressed", rawServer(t, func(c *net.TCPConn) {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 22\r\n\r\nplain text, not gzip\r\n"))
		})}, 61},
		{"a redirect loop", []string{loop.URL}, 47},
	} {
		_, errOut, code := clitest.Run(t, "", append([]string{"http", "--attempts", "1", "-o", os.DevNull}, tc.args...)...)
		if code != tc.want {
			t.Errorf("%s: exit status %d, want %d (curl's); stderr %q", tc.name, code, tc.want, errOut)
		}
	}
}

// A reset during the body exits 56, as curl's "failure receiving network
// data". The reset comes once retry has read the head (-v reports the
// attempt's response then): a reset before would drop the head unread,
// which is the "reset" case of TestHTTPExitStatusesAsCurl.
func TestHTTPResetDuringTheBody(t *testing.T) {
	t.Parallel()
	headRead := make(chan struct{})
	ctx := t.Context()
	url := rawServer(t, func(c *net.TCPConn) {
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nhello"))
		select {
		case <-headRead:
		case <-ctx.Done():
		}
		c.SetLinger(0)
	})
	cmd, errOut := clitest.Start(t, "http", "-v", "--attempts", "1", "-o", os.DevNull, url)
	errOut.Await(t, "retry: attempt 1: 200 OK")
	close(headRead)
	if code := clitest.WaitExit(t, cmd); code != 56 {
		t.Errorf("exit status %d, want 56 (curl's); stderr %q", code, errOut)
	}
}

// A proxy that cannot be reached is no connection (7), and one whose name
// does not resolve curl's 5.
func TestHTTPProxyExitStatuses(t *testing.T) {
	for proxy, want := range map[string]int{"http://127.0.0.1:1": 7, "http://no-such-proxy.invalid:8080": 5} {
		t.Setenv("HTTP_PROXY", proxy)
		t.Setenv("http_proxy", proxy)
		_, errOut, code := clitest.Run(t, "", "http", "--attempts", "1", "http://example.invalid/")
		if code != want {
			t.Errorf("proxy %s: exit status %d, want %d (curl's); stderr %q", proxy, code, want, errOut)
		}
	}
}

// --connect-timeout bounds the TLS handshake too, as curl's does: a server
// that takes the connection and never answers the handshake times out in
// about D, not in the default transport's 10 s.
func TestHTTPConnectTimeoutCoversTheTLSHandshake(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	start := time.Now()
	_, errOut, code := clitest.Run(t, "", "http", "--attempts", "1", "--connect-timeout", "300ms", "https://"+ln.Addr().String()+"/")
	if elapsed := time.Since(start); code != 28 || elapsed > 5*time.Second {
		t.Errorf("exit status %d after %v, want 28 (curl's timeout) well before the default 10s; stderr %q", code, elapsed.Round(time.Millisecond), errOut)
	}
}

// A POST without an Idempotency-Key whose connection was reset after it was
// sent is not repeated, and the message says how to let it be, as for a
// final 503; a failure no retry mends (TLS to a plain server) gets no such
// advice, nor does a POST that carries a key.
func TestHTTPResetPOSTSuggestsAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	reset := rawServer(t, func(c *net.TCPConn) { c.SetLinger(0) })
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(plain.Close)
	const advice = "a POST that may have reached the server is not repeated without an Idempotency-Key; add --idempotency-key"
	for _, tc := range []struct {
		name   string
		args   []string
		advise bool
	}{
		{"a POST reset", []string{"-d", "x=1", reset}, true},
		{"a POST to TLS that speaks plain HTTP", []string{"-d", "x=1", strings.Replace(plain.URL, "http://", "https://", 1)}, false},
		{"a POST with a key", []string{"--attempts", "1", "-H", "Idempotency-Key: k1", "-d", "x=1", reset}, false},
	} {
		_, errOut, code := clitest.Run(t, "", append([]string{"http", "--delay", "1ms"}, tc.args...)...)
		if code == 0 || strings.Contains(errOut, advice) != tc.advise {
			t.Errorf("%s: exit status %d, stderr %q; advice given %v, want %v", tc.name, code, errOut, !tc.advise, tc.advise)
		}
	}
}
