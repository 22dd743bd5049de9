package httpcmd

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// -o writes the body to a file and nothing to stdout.
func TestHTTPOutputFile(t *testing.T) {
	t.Parallel()
	s := newServer(t, "hello\n", 200)
	path := filepath.Join(t.TempDir(), "body")
	out, errOut, code := clitest.Run(t, "", "http", "-o", path, s.URL)
	if code != 0 || out != "" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and nothing on stdout", code, out, errOut)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "hello\n" {
		t.Errorf("file holds %q (%v), want the body", data, err)
	}
	_, errOut, code = clitest.Run(t, "", "http", "--output", filepath.Join(t.TempDir(), "no", "such", "dir"), s.URL)
	if code != 23 || !strings.Contains(errOut, "cannot write the body") {
		t.Errorf("unwritable -o: exit status %d, stderr %q; want 23 and why", code, errOut)
	}
}

// -f: a final 4xx or 5xx prints no body and exits 22, as curl --fail;
// without it the body is printed and the status is 1.
func TestHTTPFail(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 404)
	out, errOut, code := clitest.Run(t, "", "http", "-f", s.URL)
	if code != 22 || out != "" || !strings.Contains(errOut, "404 Not Found") {
		t.Errorf("-f: exit status %d, stdout %q, stderr %q; want 22, no body, and the status", code, out, errOut)
	}
	out, _, code = clitest.Run(t, "", "http", s.URL)
	if code != 1 || out != "Not Found\n" {
		t.Errorf("without -f: exit status %d, stdout %q; want 1 and the body", code, out)
	}
	if out, _, code = clitest.Run(t, "", "http", "--fail", newServer(t, "ok\n", 200).URL); code != 0 || out != "ok\n" {
		t.Errorf("--fail on a 200: exit status %d, stdout %q; want 0 and the body", code, out)
	}
}

// -A sets the User-Agent, which is retry/VERSION by default; -H wins over
// both. -u sends basic authentication.
func TestHTTPUserAgentAndUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		wantAgent string // "" = a prefix of retry/
	}{
		{nil, ""},
		{[]string{"-A", "probe/1.0"}, "probe/1.0"},
		{[]string{"--user-agent", "probe/2.0", "-H", "User-Agent: mine"}, "mine"},
	} {
		s := newServer(t, "ok\n", 200)
		args := append(append([]string{"http", "-u", "ann:s3:cret"}, tc.args...), s.URL)
		if _, errOut, code := clitest.Run(t, "", args...); code != 0 {
			t.Fatalf("%q: exit status %d, stderr %q", args, code, errOut)
		}
		h := s.requests()[0].header
		agents := h.Values("User-Agent")
		switch {
		case len(agents) != 1:
			t.Errorf("%q: User-Agent %q, want one", args, agents)
		case tc.wantAgent == "" && !strings.HasPrefix(agents[0], "retry/"):
			t.Errorf("%q: User-Agent %q, want retry/VERSION", args, agents[0])
		case tc.wantAgent != "" && agents[0] != tc.wantAgent:
			t.Errorf("%q: User-Agent %q, want %q", args, agents[0], tc.wantAgent)
		}
		r := http.Request{Header: h}
		if user, pass, ok := r.BasicAuth(); !ok || user != "ann" || pass != "s3:cret" {
			t.Errorf("%q: basic auth %q %q %v, want ann and s3:cret", args, user, pass, ok)
		}
	}
	if _, errOut, code := clitest.Run(t, "", "http", "-u", "ann", "http://a/"); code != 2 || !strings.Contains(errOut, "USER:PASSWORD") {
		t.Errorf("-u without a password: exit status %d, stderr %q; want 2 and why", code, errOut)
	}
}

// A TLS server with a certificate of its own is refused, unless -k accepts
// any certificate or --cacert trusts the one that signed it.
func TestHTTPTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure\n") }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := clitest.Run(t, "", "http", "--attempts", "1", srv.URL); code != 60 || !strings.Contains(errOut, "certificate") {
		t.Errorf("untrusted: exit status %d, stderr %q; want 60 (curl's) and a certificate error", code, errOut)
	}
	for _, args := range [][]string{{"-k"}, {"--insecure"}, {"--cacert", ca}} {
		out, errOut, code := clitest.Run(t, "", append(append([]string{"http"}, args...), srv.URL)...)
		if code != 0 || out != "secure\n" {
			t.Errorf("%q: exit status %d, stdout %q, stderr %q; want 0 and the body", args, code, out, errOut)
		}
	}
	for _, file := range []string{notPEM, filepath.Join(dir, "missing.pem")} {
		if _, errOut, code := clitest.Run(t, "", "http", "--cacert", file, srv.URL); code != 2 || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "--cacert") {
			t.Errorf("--cacert %s: exit status %d, stderr %q; want 2 and one line", file, code, errOut)
		}
	}
	if _, errOut, code := clitest.Run(t, "", "http", "--connect-timeout", "-1s", srv.URL); code != 2 || !strings.Contains(errOut, "--connect-timeout must not be negative") {
		t.Errorf("--connect-timeout -1s: exit status %d, stderr %q; want 2", code, errOut)
	}
}

// -w reports the final status, the retries and the time after the body;
// it reports 000 when no response came.
func TestHTTPWriteOut(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 503, 200)
	out, errOut, code := clitest.Run(t, "", "http", "--delay", "1ms", "-w", `%{http_code} %{num_retries} %{time_total}\n`, s.URL)
	if code != 0 {
		t.Fatalf("exit status %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^ok\n200 1 \d+\.\d{6}\n$`).MatchString(out) {
		t.Errorf("stdout %q, want the body and \"200 1 SECONDS\"", out)
	}
	out, _, code = clitest.Run(t, "", "http", "--attempts", "1", "--write-out", "%{http_code}", "http://"+closedAddr(t)+"/")
	if code != 7 || out != "000" {
		t.Errorf("no response: exit status %d, stdout %q; want 7 and 000", code, out)
	}
}

// -w's %{num_retries} counts the retries of the whole transfer, as curl's
// does: a 503 retried, its retry answered with a redirect, and the target's
// 200 at once are one retry, not the last hop's none.
func TestHTTPWriteOutCountsRetriesOfEveryHop(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/final" {
			w.Write([]byte("ok"))
			return
		}
		if n.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/final", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	out, errOut, code := clitest.Run(t, "", "http", "--delay", "1ms", "-w", `\n%{http_code} %{num_retries} %{num_redirects}`, srv.URL+"/start")
	if code != 0 || !strings.HasSuffix(out, "\n200 1 1") {
		t.Errorf("exit status %d, stdout %q, stderr %q; want \"200 1 1\": one retry, one redirect", code, out, errOut)
	}
}

// -i prints the status line and the headers before the body.
func TestHTTPInclude(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 200)
	out, errOut, code := clitest.Run(t, "", "http", "-i", s.URL)
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.Contains(out, "Content-Length: 3\r\n") || !strings.HasSuffix(out, "\r\n\r\nok\n") {
		t.Errorf("exit status %d, stdout %q, stderr %q; want the status line, headers, a blank line and the body", code, out, errOut)
	}
}

// -s silences retry's lines on stderr; -S brings back the one that says why
// it failed, but not -v's.
func TestHTTPSilentAndShowError(t *testing.T) {
	t.Parallel()
	addr := "http://" + closedAddr(t) + "/"
	if _, errOut, code := clitest.Run(t, "", "http", "-s", "-v", "--delay", "1ms", addr); code != 7 || errOut != "" {
		t.Errorf("-s: exit status %d, stderr %q; want 7 and nothing", code, errOut)
	}
	_, errOut, code := clitest.Run(t, "", "http", "-s", "-S", "-v", "--delay", "1ms", addr)
	if code != 7 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "retry: no response after 3 attempts") {
		t.Errorf("-sS: exit status %d, stderr %q; want 7 and the one line that says why", code, errOut)
	}
}

// A name that does not resolve exits 6, as in curl; .invalid never does
// (RFC 6761).
func TestHTTPResolveFailure(t *testing.T) {
	t.Parallel()
	_, errOut, code := clitest.Run(t, "", "http", "--attempts", "1", "http://no-such-host.invalid/")
	if code != 6 {
		t.Errorf("exit status %d, stderr %q; want 6", code, errOut)
	}
}
