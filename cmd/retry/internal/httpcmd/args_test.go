package httpcmd

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// echoServer answers every request with 200 and "METHOD BODY", and records
// the requests.
func echoServer(t *testing.T) *server {
	t.Helper()
	s := &server{script: []int{200}, header: http.Header{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(httptest.NewRecorder(), r) // records the request; its answer is dropped
		reqs := s.requests()
		io.WriteString(w, r.Method+" ")
		w.Write(reqs[len(reqs)-1].body)
	}))
	t.Cleanup(s.Close)
	return s
}

// The short flags curl users type run together, a value after its letter
// or in the next argument, as curl reads them.
func TestHTTPCombinedShortFlags(t *testing.T) {
	t.Parallel()
	s := echoServer(t)
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"-fsS"}, "GET "},
		{[]string{"-sS", "-XPOST"}, "POST "},
		{[]string{"-sSXPUT", "-dx=1"}, "PUT x=1"},
		{[]string{"-sSd", "a=1"}, "POST a=1"},
		{[]string{"-fsSL", "-o-"}, "GET "},
		{[]string{"-attempts", "1"}, "GET "}, // a long flag with one dash is still one
	} {
		out, errOut, code := clitest.Run(t, "", append(append([]string{"http"}, tc.args...), s.URL)...)
		if code != 0 || out != tc.out {
			t.Errorf("%q: exit status %d, stdout %q, stderr %q; want 0 and %q", tc.args, code, out, errOut, tc.out)
		}
	}
}

// --data, --data-binary and --data-raw are curl's: -d @FILE drops the
// file's line breaks, --data-binary keeps them, --data-raw sends the @;
// several are joined with &. --header is -H.
func TestHTTPDataFlagsAsCurl(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "form")
	if err := os.WriteFile(file, []byte("a=1\r\nb=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := echoServer(t)
	for _, tc := range []struct {
		args []string
		body string
	}{
		{[]string{"--data", "@" + file}, "a=1b=2"},
		{[]string{"--data-binary", "@" + file}, "a=1\r\nb=2\n"},
		{[]string{"--data-raw", "@" + file}, "@" + file},
		{[]string{"-d", "x=1", "--data-raw", "y=2", "--data", "z=3"}, "x=1&y=2&z=3"},
		{[]string{"--header", "Content-Type: text/plain", "--data-binary", "@-"}, "from stdin\n"},
	} {
		out, errOut, code := clitest.Run(t, "from stdin\n", append(append([]string{"http"}, tc.args...), s.URL)...)
		if code != 0 || out != "POST "+tc.body {
			t.Errorf("%q: exit status %d, stdout %q, stderr %q; want 0 and POST %q", tc.args, code, out, errOut, tc.body)
		}
	}
	if ct := s.requests()[4].header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("--header: Content-Type %q, want text/plain", ct)
	}
}

// -I sends HEAD and prints the head; -L is accepted (redirects are followed
// anyway); -o - is stdout; a URL without a scheme is http://.
func TestHTTPHeadLocationOutputAndScheme(t *testing.T) {
	t.Parallel()
	s := echoServer(t)
	redirect := httptest.NewServer(http.RedirectHandler(s.URL+"/there", http.StatusFound))
	t.Cleanup(redirect.Close)
	out, errOut, code := clitest.Run(t, "", "http", "-I", s.URL)
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(out, "\r\n\r\n") || s.requests()[0].method != http.MethodHead {
		t.Errorf("-I: exit status %d, stdout %q, stderr %q; want HEAD's status line and headers alone", code, out, errOut)
	}
	if out, errOut, code = clitest.Run(t, "", "http", "-L", redirect.URL); code != 0 || out != "GET " {
		t.Errorf("-L: exit status %d, stdout %q, stderr %q; want the redirect followed", code, out, errOut)
	}
	dir := t.TempDir()
	cmd := []string{"http", "-o", "-", s.URL}
	if out, errOut, code = runRetryIn(t, dir, cmd...); code != 0 || out != "GET " {
		t.Errorf("-o -: exit status %d, stdout %q, stderr %q; want the body on stdout", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error("-o - wrote a file named -")
	}
	if out, errOut, code = clitest.Run(t, "", "http", strings.TrimPrefix(s.URL, "http://")+"/x"); code != 0 || out != "GET " {
		t.Errorf("no scheme: exit status %d, stdout %q, stderr %q; want http://", code, out, errOut)
	}
}

// runRetryIn is clitest.Run in the directory dir, where a relative -o FILE
// would be written.
func runRetryIn(t *testing.T, dir string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	cmd := exec.Command(clitest.Bin(), args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// --retry N is curl's: N retries, N+1 attempts.
func TestHTTPRetryFlag(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 503)
	if _, errOut, code := clitest.Run(t, "", "http", "--retry", "4", "--delay", "1ms", s.URL); code != 1 || len(s.requests()) != 5 {
		t.Errorf("--retry 4: exit status %d after %d requests, want 1 after 5; stderr %q", code, len(s.requests()), errOut)
	}
}

// -m/--max-time limits each attempt, as curl's limits each transfer, and
// the message names the limit that ran out, never a bare "context
// deadline exceeded".
func TestHTTPTimeLimitsNamed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", "0.2", "--retry", "1"}, "no response after 2 attempts (attempts exhausted): --max-time 200ms ran out"},
		{[]string{"--max-time", "200ms", "--attempts", "1"}, "--max-time 200ms ran out"},
		{[]string{"--attempt-timeout", "200ms", "--attempts", "1"}, "--attempt-timeout 200ms ran out"},
		{[]string{"--timeout", "300ms"}, "--timeout 300ms expired"},
	} {
		_, errOut, code := clitest.Run(t, "", append(append([]string{"http", "--delay", "1ms"}, tc.args...), hang.URL)...)
		if code != 28 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "context deadline") {
			t.Errorf("%q: exit status %d, stderr %q; want 28 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// --compressed asks for gzip or deflate and decodes it; without it the
// body is written as it came, as curl writes it; a body that is not the
// gzip it claims to be is said to be so, exit 61.
func TestHTTPCompressed(t *testing.T) {
	t.Parallel()
	var gz, zl bytes.Buffer
	g := gzip.NewWriter(&gz)
	g.Write([]byte("hello gzip\n"))
	g.Close()
	z := zlib.NewWriter(&zl)
	z.Write([]byte("hello deflate\n"))
	z.Close()
	bodies := map[string][]byte{"/gzip": gz.Bytes(), "/deflate": zl.Bytes(), "/bad": []byte("plain text, not gzip\n")}
	var accept []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = append(accept, r.Header.Get("Accept-Encoding"))
		enc := strings.TrimPrefix(r.URL.Path, "/")
		if enc == "bad" {
			enc = "gzip"
		}
		w.Header().Set("Content-Encoding", enc)
		w.Write(bodies[r.URL.Path])
	}))
	t.Cleanup(srv.Close)
	if out, errOut, code := clitest.Run(t, "", "http", "--compressed", srv.URL+"/gzip"); code != 0 || out != "hello gzip\n" {
		t.Errorf("gzip: exit status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := clitest.Run(t, "", "http", "--compressed", srv.URL+"/deflate"); code != 0 || out != "hello deflate\n" {
		t.Errorf("deflate: exit status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := clitest.Run(t, "", "http", srv.URL+"/gzip"); code != 0 || out != gz.String() {
		t.Errorf("without --compressed: exit status %d, stdout %q, stderr %q; want the gzip as it came", code, out, errOut)
	}
	_, errOut, code := clitest.Run(t, "", "http", "--compressed", srv.URL+"/bad")
	if code != 61 || !strings.Contains(errOut, "the body is not valid gzip") {
		t.Errorf("bad gzip: exit status %d, stderr %q; want 61 and that the body is not gzip", code, errOut)
	}
	if want := []string{"gzip, deflate", "gzip, deflate", "", "gzip, deflate"}; strings.Join(accept, "|") != strings.Join(want, "|") {
		t.Errorf("Accept-Encoding %q, want %q: asked for with --compressed alone", accept, want)
	}
}

// -w fills in curl's common variables, and warns of one it does not know.
func TestHTTPWriteOutVariables(t *testing.T) {
	t.Parallel()
	s := newServer(t, "hello\n", 503, 200)
	redirect := httptest.NewServer(http.RedirectHandler(s.URL+"/there", http.StatusFound))
	t.Cleanup(redirect.Close)
	format := `%{http_code} %{response_code} %{num_retries} %{num_redirects} %{size_download} %{url_effective} %{method} ` +
		`%{content_type}|%{http_version} %{remote_ip} %{exitcode} %header{content-length} %{time_total} %{time_connect} %{bogus}100%%\n`
	out, errOut, code := clitest.Run(t, "", "http", "--delay", "1ms", "-w", format, redirect.URL)
	if code != 0 {
		t.Fatalf("exit status %d, stderr %q", code, errOut)
	}
	want := regexp.MustCompile(`^hello\n200 200 1 1 6 ` + regexp.QuoteMeta(s.URL+"/there") + ` GET text/plain; charset=utf-8\|1\.1 127\.0\.0\.1 0 6 \d+\.\d{6} \d+\.\d{6} 100%\n$`)
	if !want.MatchString(out) {
		t.Errorf("stdout %q, want it to match %s", out, want)
	}
	if strings.Count(errOut, "unknown --write-out variable %{bogus}") != 1 {
		t.Errorf("stderr %q, want one warning of %%{bogus}", errOut)
	}
	// %{stderr} sends the rest to stderr; a call that failed has its status.
	out, errOut, code = clitest.Run(t, "", "http", "--attempts", "1", "-w", `%{http_code}%{stderr}%{exitcode}`, "http://"+closedAddr(t)+"/")
	if code != 7 || out != "000" || !strings.HasSuffix(errOut, "7") {
		t.Errorf("no response: exit status %d, stdout %q, stderr %q; want 7, 000 and 7 on stderr", code, out, errOut)
	}
}
