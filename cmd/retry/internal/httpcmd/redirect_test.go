package httpcmd

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// TestHTTPCredentialsStayWithTheirOrigin: the credentials of -u and of -H
// Authorization, Cookie and Proxy-Authorization go to every hop of a
// redirect chain on the origin (scheme, host and port) they were given for,
// and to no other, as curl sends them since 7.83 (CVE-2022-27776). net/http
// compares host names only: a redirect to another port of the same host, or
// from https to http (the password in clear text) or back, carried them.
func TestHTTPCredentialsStayWithTheirOrigin(t *testing.T) {
	t.Parallel()
	hops := &hopLog{}
	a := httptest.NewServer(hops)
	t.Cleanup(a.Close)
	b := httptest.NewServer(hops)
	t.Cleanup(b.Close)
	both := bothSchemes(t, hops) // http and https on one port
	next := func(from, to string) string { return from + "?next=" + url.QueryEscape(to) }
	for _, tc := range []struct {
		name  string
		url   string
		trust []bool // per hop: whether it gets the credentials
	}{
		{"the same origin", next(a.URL+"/start", "/end"), []bool{true, true}},
		{"another port", next(a.URL+"/start", b.URL+"/end"), []bool{true, false}},
		{"https to http", next("https://"+both+"/start", "http://"+both+"/end"), []bool{true, false}},
		{"http to https", next("http://"+both+"/start", "https://"+both+"/end"), []bool{true, false}},
		{"back to the origin", next(a.URL+"/start", next(b.URL+"/mid", a.URL+"/end")), []bool{true, false, true}},
	} {
		for _, creds := range []struct{ args, headers []string }{
			{[]string{"-u", "ann:s3cret", "-H", "Cookie: session=s3cret"}, []string{"Authorization", "Cookie"}},
			{[]string{"-H", "Authorization: Bearer s3cret", "-H", "Proxy-Authorization: Basic czNjcmV0"}, []string{"Authorization", "Proxy-Authorization"}},
		} {
			args := append(append([]string{"http", "-k", "--attempts", "1"}, creds.args...), tc.url)
			if out, errOut, code := clitest.Run(t, "", args...); code != 0 || out != "end\n" {
				t.Fatalf("%s %q: exit status %d, stdout %q, stderr %q; want 0 and the last hop's body", tc.name, creds.args, code, out, errOut)
			}
			got := hops.take()
			if len(got) != len(tc.trust) {
				t.Fatalf("%s %q: hops %v, want %d", tc.name, creds.args, got, len(tc.trust))
			}
			for i, h := range got {
				for _, name := range creds.headers {
					if sent := h.header.Get(name) != ""; sent != tc.trust[i] {
						t.Errorf("%s %q: hop %d, %s, got %s %q; want it: %v", tc.name, creds.args, i+1, h.url, name, h.header.Get(name), tc.trust[i])
					}
				}
			}
		}
	}
}

// hop is a request as a hop of a redirect chain received it.
type hop struct {
	url    string // scheme, host and path
	header http.Header
}

// hopLog is a handler that records each request and redirects it to its
// query's next URL, if it has one, or else answers 200 with its path's last
// element.
type hopLog struct {
	mu   sync.Mutex
	hops []hop
}

func (l *hopLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	l.mu.Lock()
	l.hops = append(l.hops, hop{scheme + "://" + r.Host + r.URL.Path, r.Header.Clone()})
	l.mu.Unlock()
	if next := r.URL.Query().Get("next"); next != "" {
		http.Redirect(w, r, next, http.StatusFound)
		return
	}
	w.Write([]byte(r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:] + "\n"))
}

// take returns the hops recorded so far and forgets them.
func (l *hopLog) take() []hop {
	l.mu.Lock()
	defer l.mu.Unlock()
	hops := l.hops
	l.hops = nil
	return hops
}

// bothSchemes starts a loopback server that serves h over http and https on
// one port, and returns its host:port: a connection that opens with a TLS
// handshake record gets TLS, with a self-signed certificate.
func bothSchemes(t *testing.T, h http.Handler) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = sniffingListener{srv.Listener, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// sniffingListener hands out a connection as TLS if its first byte opens a
// TLS handshake record, and as plain TCP otherwise.
type sniffingListener struct {
	net.Listener
	tls *tls.Config
}

func (l sniffingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := peekedConn{c, bufio.NewReader(c)}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a client that sends nothing does not stall the test's server
	first, err := pc.r.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err == nil && first[0] == 0x16 { // TLS's handshake content type
		return tls.Server(pc, l.tls), nil
	}
	return pc, nil
}

// peekedConn is a connection read through r, which has peeked at it.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// origin spells out a scheme's default port and ignores the host name's
// case, as curl compares the port number and the host name: a redirect from
// http://h/ to http://H:80/ stays home.
func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://h/a", "http://H:80/b", true},
		{"https://h/", "https://h:443/", true},
		{"http://[::1]/", "http://[::1]:80/", true},
		{"http://h/", "https://h/", false},
		{"http://h/", "http://h:8080/", false},
		{"https://h:443/", "http://h:443/", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if same := origin(a) == origin(b); same != tc.same {
			t.Errorf("%s and %s: the same origin %v, want %v", tc.a, tc.b, same, tc.same)
		}
	}
}
