package main

import (
	"bufio"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
	} {
		_, errOut, code := runRetry(t, "", append([]string{"http", "--attempts", "1"}, tc.args...)...)
		if code != tc.want {
			t.Errorf("%s: exit status %d, want %d (curl's); stderr %q", tc.name, code, tc.want, errOut)
		}
	}
}
