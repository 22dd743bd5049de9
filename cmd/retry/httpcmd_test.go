package main

import (
	"bytes"
	"encoding/pem"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// seen is a request as a test server received it.
type seen struct {
	method string
	header http.Header
	body   []byte
}

// server is a loopback test server that answers the statuses in script, one
// per request (the last one for every request after), and records requests.
type server struct {
	*httptest.Server
	script []int
	body   string // the body of a 2xx response

	mu     sync.Mutex
	reqs   []seen
	header http.Header // added to every failed response
}

func newServer(t *testing.T, body string, script ...int) *server {
	t.Helper()
	s := &server{script: script, body: body, header: http.Header{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, seen{r.Method, r.Header.Clone(), body})
	status := s.script[min(len(s.reqs), len(s.script))-1]
	if status >= 300 {
		for k, v := range s.header {
			w.Header()[k] = v
		}
	}
	s.mu.Unlock()
	if status >= 300 {
		w.WriteHeader(status)
		io.WriteString(w, http.StatusText(status)+"\n")
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, s.body)
}

// setHeader adds a header to the failed responses to come.
func (s *server) setHeader(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header.Set(name, value)
}

// requests returns the requests received so far.
func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func TestHTTPRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	body := "hello, world\n\x00\xff\r\nno newline at the end"
	s := newServer(t, body, 503, 503, 200)
	out, errOut, code := runRetry(t, "", "http", s.URL+"/x")
	if code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
	}
	if out != body {
		t.Errorf("stdout %q, want the body %q exactly", out, body)
	}
	if n := len(s.requests()); n != 3 {
		t.Errorf("the server saw %d requests, want 3", n)
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing without -v", errOut)
	}
}

func TestHTTPStreamsALargeBody(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	s := newServer(t, body, 200)
	out, _, code := runRetry(t, "", "http", s.URL)
	if code != 0 || out != body {
		t.Errorf("exit status %d, %d bytes on stdout; want 0 and the %d bytes of the body", code, len(out), len(body))
	}
}

func TestHTTPGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 503)
	out, errOut, code := runRetry(t, "", "http", "--attempts", "2", s.URL)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("the server saw %d requests, want 2", n)
	}
	if out != "Service Unavailable\n" {
		t.Errorf("stdout %q, want the last response's body", out)
	}
	if want := "retry: server answered 503 Service Unavailable after 2 attempts (attempts exhausted)\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
}

func TestHTTPDoesNotRetry404(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 404)
	out, errOut, code := runRetry(t, "", "http", s.URL)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("the server saw %d requests, want 1", n)
	}
	if out != "Not Found\n" {
		t.Errorf("stdout %q, want the response's body", out)
	}
	for _, want := range []string{"404 Not Found", "after 1 attempt", "not retried"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not contain %q", errOut, want)
		}
	}
}

func TestHTTPRedirectIsFollowed(t *testing.T) {
	t.Parallel()
	s := newServer(t, "moved here\n", 200)
	redirect := httptest.NewServer(http.RedirectHandler(s.URL+"/new", http.StatusFound))
	t.Cleanup(redirect.Close)
	out, errOut, code := runRetry(t, "", "http", "-v", redirect.URL)
	if code != 0 || out != "moved here\n" {
		t.Errorf("exit status %d, stdout %q; stderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "GET "+s.URL+"/new: 200 OK") {
		t.Errorf("stderr %q does not name the new URL", errOut)
	}
}

func TestHTTPPostIsNotRepeatedWithoutAKey(t *testing.T) {
	t.Parallel()
	s := newServer(t, "created\n", 503, 200)
	_, errOut, code := runRetry(t, "", "http", "-d", "a=1", s.URL)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(reqs))
	}
	if reqs[0].method != http.MethodPost || string(reqs[0].body) != "a=1" {
		t.Errorf("the server saw %s %q, want POST \"a=1\"", reqs[0].method, reqs[0].body)
	}
	if ct := reqs[0].header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type %q, want curl's default for -d", ct)
	}
	if !strings.Contains(errOut, "--idempotency-key") {
		t.Errorf("stderr %q does not point to --idempotency-key", errOut)
	}
}

func TestHTTPPostWithIdempotencyKeyIsRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t, "created\n", 503, 503, 201)
	out, errOut, code := runRetry(t, "", "http", "--idempotency-key", "-d", "a=1", s.URL)
	if code != 0 || out != "created\n" {
		t.Fatalf("exit status %d, stdout %q; stderr:\n%s", code, out, errOut)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("the server saw %d requests, want 3", len(reqs))
	}
	key := reqs[0].header.Get("Idempotency-Key")
	if key == "" {
		t.Fatal("no Idempotency-Key header")
	}
	for i, r := range reqs {
		if got := r.header.Get("Idempotency-Key"); got != key {
			t.Errorf("attempt %d: Idempotency-Key %q, want %q as on the first", i+1, got, key)
		}
		if r.method != http.MethodPost || string(r.body) != "a=1" {
			t.Errorf("attempt %d: %s %q, want POST \"a=1\"", i+1, r.method, r.body)
		}
	}
}

func TestHTTPHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 200)
	_, errOut, code := runRetry(t, "", "http", "-H", "X-One: 1", "-H", "X-Two:  two words ",
		"-H", "X-One: again", "-H", "Content-Type: application/json", "-d", `{"a":1}`, "-X", "PUT", s.URL)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	r := s.requests()[0]
	if got := r.header.Values("X-One"); len(got) != 2 || got[0] != "1" || got[1] != "again" {
		t.Errorf("X-One: %q, want [1 again]", got)
	}
	if got := r.header.Get("X-Two"); got != "two words" {
		t.Errorf("X-Two: %q, want %q", got, "two words")
	}
	if got := r.header.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
		t.Errorf("Content-Type: %q, want only the one -H gave", got)
	}
	if r.method != http.MethodPut {
		t.Errorf("method %s, want PUT (-X)", r.method)
	}
}

func TestHTTPDataFromFileOnEveryAttempt(t *testing.T) {
	t.Parallel()
	data := make([]byte, 200<<10)
	rnd := rand.NewChaCha8([32]byte{1})
	_, _ = rnd.Read(data)
	copy(data, "line one\r\nline two\n\x00")
	file := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, "stored\n", 503, 500, 200)
	_, errOut, code := runRetry(t, "", "http", "-X", "PUT", "-d", "@"+file, s.URL)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("the server saw %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if !bytes.Equal(r.body, data) {
			t.Errorf("attempt %d: a body of %d bytes differs from the file's %d", i+1, len(r.body), len(data))
		}
	}
}

func TestHTTPDataFromStdin(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 503, 200)
	_, errOut, code := runRetry(t, "line 1\nline 2\n", "http", "--idempotency-key", "-d", "@-", s.URL)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	for i, r := range s.requests() {
		if string(r.body) != "line 1\nline 2\n" || r.method != http.MethodPost {
			t.Errorf("attempt %d: %s %q, want POST of the standard input", i+1, r.method, r.body)
		}
	}
}

func TestHTTPTimeoutShorterThanRetryAfter(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 503)
	s.setHeader("Retry-After", "30")
	start := time.Now()
	_, errOut, code := runRetry(t, "", "http", "--timeout", "500ms", s.URL)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %s: it waited for the Retry-After", elapsed)
	}
	if code == 0 {
		t.Error("exit status 0, want a failure")
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("the server saw %d requests, want 1", n)
	}
	for _, want := range []string{"Retry-After: 30", "--timeout 500ms"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not contain %q", errOut, want)
		}
	}
}

func TestHTTPTimeoutOfAHangingServer(t *testing.T) {
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
	start := time.Now()
	_, errOut, code := runRetry(t, "", "http", "--timeout", "300ms", hang.URL)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %s", elapsed)
	}
	if code != 28 {
		t.Errorf("exit status %d, want 28 (curl's timeout)", code)
	}
	if !strings.Contains(errOut, "retry: no response: --timeout 300ms expired (1 attempt made)") {
		t.Errorf("stderr %q does not blame the timeout", errOut)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	_, errOut, code := runRetry(t, "", "http", "-v", "http://"+closedAddr(t)+"/")
	if code != 7 {
		t.Errorf("exit status %d, want 7 (curl's connect failure)", code)
	}
	for _, want := range []string{"retry: attempt 1: ", "retrying in", "retry: no response after 3 attempts (attempts exhausted)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not contain %q", errOut, want)
		}
	}
}

func TestHTTPVerbose(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 503, 200)
	_, errOut, code := runRetry(t, "", "http", "-v", s.URL)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	got := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], "retry: attempt 1: 503 Service Unavailable, retrying in ") ||
		got[1] != "retry: attempt 2: 200 OK" {
		t.Errorf("stderr:\n%s\nwant a line per attempt", errOut)
	}
}

func TestHTTPFlagsAfterTheURL(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 503, 503, 200)
	out, errOut, code := runRetry(t, "", "http", s.URL, "-v", "--attempts", "2", "-H", "X-After: yes")
	if code != 1 || out != "Service Unavailable\n" {
		t.Errorf("exit status %d, stdout %q: --attempts 2 after the URL was ignored", code, out)
	}
	if !strings.Contains(errOut, "retry: attempt 1: 503") {
		t.Errorf("stderr %q: -v after the URL was ignored", errOut)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].header.Get("X-After") != "yes" {
		t.Errorf("the server saw %d requests, X-After %q", len(reqs), reqs[0].header.Get("X-After"))
	}
}

func TestHTTPUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http"}, "no URL"},
		{[]string{"http", "http://a/", "http://b/"}, "one URL at a time"},
		{[]string{"http", "example.com/x"}, "did you mean http://example.com/x"},
		{[]string{"http", "ftp://example.com/"}, "only http and https"},
		{[]string{"http", "--attempts", "0", "http://a/"}, "--attempts must be at least 1"},
		{[]string{"http", "--timeout", "-1s", "http://a/"}, "--timeout must not be negative"},
		{[]string{"http", "--delay", "-1s", "http://a/"}, "--delay must not be negative"},
		{[]string{"http", "http://a:99999/"}, "the port must be a number from 1 to 65535"},
		{[]string{"http", "http://a:0/"}, "the port must be a number from 1 to 65535"},
		{[]string{"http", "-H", "X(: y", "http://a/"}, "want a header as 'Name: value'"},
		{[]string{"http", "-H", "X: a\r\nInjected: yes", "http://a/"}, "may not hold control characters"},
		{[]string{"http", "--max-delay", "-1s", "http://a/"}, "--max-delay must not be negative"},
		{[]string{"http", "--attempt-timeout", "-1s", "http://a/"}, "--attempt-timeout must not be negative"},
		{[]string{"http", "-H", "no colon", "http://a/"}, "want a header as 'Name: value'"},
		{[]string{"http", "-d", "a", "-d", "b", "http://a/"}, "give the body once"},
		{[]string{"http", "-d", "@/no/such/file", "http://a/"}, "no such file"},
		{[]string{"http", "-X", "BAD METHOD", "http://a/"}, "invalid method"},
		{[]string{"http", "--bogus", "http://a/"}, "flag provided but not defined: -bogus"},
	} {
		out, errOut, code := runRetry(t, "", tc.args...)
		if code != 2 {
			t.Errorf("%q: exit status %d, want 2", tc.args, code)
		}
		// One line says what is wrong, one points to -h: no Go error dump.
		if strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "retry http: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, `"retry http -h"`) {
			t.Errorf("%q: stderr %q, want the message %q and a pointer to -h", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestHTTPHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"http", "-h"}, {"http", "http://a/", "--help"}} {
		out, _, code := runRetry(t, "", args...)
		if code != 0 {
			t.Errorf("%q: exit status %d, want 0", args, code)
		}
		for _, want := range []string{"usage: retry http", "--idempotency-key", "Exit status", "Examples:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: the usage does not mention %q", args, want)
			}
		}
	}
}

func TestHTTPStreamsTheBodyUntilTheTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first part\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	out, errOut, code := runRetry(t, "", "http", "--timeout", "500ms", slow.URL)
	if code != 28 {
		t.Errorf("exit status %d, want 28", code)
	}
	if out != "first part\n" {
		t.Errorf("stdout %q, want the part of the body that came", out)
	}
	if !strings.Contains(errOut, "retry: response body incomplete: --timeout 500ms expired") {
		t.Errorf("stderr %q does not say the body was cut short", errOut)
	}
}

func TestHTTPSignalStopsTheWait(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("signals cannot be sent on Windows")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		name := signalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, "", 503)
			s.setHeader("Retry-After", "30")
			cmd, errOut := startRetry(t, "http", s.URL)
			waitFor(t, "the first request", func() bool { return len(s.requests()) > 0 })
			time.Sleep(50 * time.Millisecond) // let the wait begin
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd)
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %s to stop", elapsed)
			}
			if code != 128+int(sig) {
				t.Errorf("exit status %d, want %d (%s)", code, 128+int(sig), name)
			}
			if !strings.Contains(errOut.String(), "retry: stopped by "+name) {
				t.Errorf("stderr %q does not say it was stopped by %s", errOut, name)
			}
			if n := len(s.requests()); n != 1 {
				t.Errorf("the server saw %d requests, want 1", n)
			}
		})
	}
}

// TestHTTPFinal3xx: a 3xx that is not followed is the final response, a
// success.
func TestHTTPFinal3xx(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		args   []string
		out    string
	}{
		{"304 to a conditional GET", http.StatusNotModified, []string{"-H", `If-None-Match: "v1"`}, ""},
		{"302 without Location", http.StatusFound, nil, "Found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, "", tc.status)
			out, errOut, code := runRetry(t, "", append(append([]string{"http"}, tc.args...), s.URL)...)
			if code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", code, errOut)
			}
			if out != tc.out || errOut != "" {
				t.Errorf("stdout %q, stderr %q; want %q and nothing", out, errOut, tc.out)
			}
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("the server saw %d requests, want 1", len(reqs))
			}
			if len(tc.args) > 0 && reqs[0].header.Get("If-None-Match") != `"v1"` {
				t.Errorf("If-None-Match: %q, want the -H header", reqs[0].header.Get("If-None-Match"))
			}
		})
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// waits returns the waits that -v reported, in order.
func waits(t *testing.T, stderr string) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for _, line := range strings.Split(stderr, "\n") {
		_, after, ok := strings.Cut(line, ", retrying in ")
		if !ok {
			continue
		}
		d, err := time.ParseDuration(after)
		if err != nil {
			t.Fatalf("wait in %q: %v", line, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// --delay is the base of the backoff: with 1ms, the waits before retries
// 1 to 4 are at most 1, 2, 4 and 8 ms (the default 100ms would all but
// surely exceed one of those bounds).
func TestHTTPDelay(t *testing.T) {
	t.Parallel()
	_, errOut, code := runRetry(t, "", "http", "-v", "--attempts", "5", "--delay", "1ms", "--max-delay", "0", "http://"+closedAddr(t)+"/")
	if code != 7 {
		t.Fatalf("exit status %d, want 7; stderr:\n%s", code, errOut)
	}
	ds := waits(t, errOut)
	if len(ds) != 4 {
		t.Fatalf("%d waits reported, want 4; stderr:\n%s", len(ds), errOut)
	}
	for i, d := range ds {
		if limit := time.Millisecond<<i + time.Millisecond/2; d > limit { // the half: rounding of the report
			t.Errorf("wait %d is %v, want at most %v", i+1, d, limit)
		}
	}
}

// --max-delay caps the waits, however large --delay is.
func TestHTTPMaxDelay(t *testing.T) {
	t.Parallel()
	_, errOut, code := runRetry(t, "", "http", "-v", "--delay", "1h", "--max-delay", "50ms", "http://"+closedAddr(t)+"/")
	if code != 7 {
		t.Fatalf("exit status %d, want 7; stderr:\n%s", code, errOut)
	}
	ds := waits(t, errOut)
	if len(ds) != 2 {
		t.Fatalf("%d waits reported, want 2; stderr:\n%s", len(ds), errOut)
	}
	for i, d := range ds {
		if d > 51*time.Millisecond {
			t.Errorf("wait %d is %v, want at most 50ms", i+1, d)
		}
	}
}

// --attempt-timeout ends an attempt that hangs, and the next one succeeds.
func TestHTTPAttemptTimeout(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			select { // hang until the client gives up on the attempt
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	begin := time.Now()
	out, errOut, code := runRetry(t, "", "http", "--attempt-timeout", "200ms", "--delay", "1ms", srv.URL)
	if code != 0 || out != "ok\n" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and ok", code, out, errOut)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("took %v: the first attempt was not cut short", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// -o writes the body to a file and nothing to stdout.
func TestHTTPOutputFile(t *testing.T) {
	t.Parallel()
	s := newServer(t, "hello\n", 200)
	path := filepath.Join(t.TempDir(), "body")
	out, errOut, code := runRetry(t, "", "http", "-o", path, s.URL)
	if code != 0 || out != "" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and nothing on stdout", code, out, errOut)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "hello\n" {
		t.Errorf("file holds %q (%v), want the body", data, err)
	}
	_, errOut, code = runRetry(t, "", "http", "--output", filepath.Join(t.TempDir(), "no", "such", "dir"), s.URL)
	if code != 23 || !strings.Contains(errOut, "cannot write the body") {
		t.Errorf("unwritable -o: exit status %d, stderr %q; want 23 and why", code, errOut)
	}
}

// -f: a final 4xx or 5xx prints no body and exits 22, as curl --fail;
// without it the body is printed and the status is 1.
func TestHTTPFail(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 404)
	out, errOut, code := runRetry(t, "", "http", "-f", s.URL)
	if code != 22 || out != "" || !strings.Contains(errOut, "404 Not Found") {
		t.Errorf("-f: exit status %d, stdout %q, stderr %q; want 22, no body, and the status", code, out, errOut)
	}
	out, _, code = runRetry(t, "", "http", s.URL)
	if code != 1 || out != "Not Found\n" {
		t.Errorf("without -f: exit status %d, stdout %q; want 1 and the body", code, out)
	}
	if out, _, code = runRetry(t, "", "http", "--fail", newServer(t, "ok\n", 200).URL); code != 0 || out != "ok\n" {
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
		if _, errOut, code := runRetry(t, "", args...); code != 0 {
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
	if _, errOut, code := runRetry(t, "", "http", "-u", "ann", "http://a/"); code != 2 || !strings.Contains(errOut, "USER:PASSWORD") {
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
	if _, errOut, code := runRetry(t, "", "http", "--attempts", "1", srv.URL); code != 3 || !strings.Contains(errOut, "certificate") {
		t.Errorf("untrusted: exit status %d, stderr %q; want 3 and a certificate error", code, errOut)
	}
	for _, args := range [][]string{{"-k"}, {"--insecure"}, {"--cacert", ca}} {
		out, errOut, code := runRetry(t, "", append(append([]string{"http"}, args...), srv.URL)...)
		if code != 0 || out != "secure\n" {
			t.Errorf("%q: exit status %d, stdout %q, stderr %q; want 0 and the body", args, code, out, errOut)
		}
	}
	for _, file := range []string{notPEM, filepath.Join(dir, "missing.pem")} {
		if _, errOut, code := runRetry(t, "", "http", "--cacert", file, srv.URL); code != 2 || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "--cacert") {
			t.Errorf("--cacert %s: exit status %d, stderr %q; want 2 and one line", file, code, errOut)
		}
	}
	if _, errOut, code := runRetry(t, "", "http", "--connect-timeout", "-1s", srv.URL); code != 2 || !strings.Contains(errOut, "--connect-timeout must not be negative") {
		t.Errorf("--connect-timeout -1s: exit status %d, stderr %q; want 2", code, errOut)
	}
}

// -w reports the final status, the retries and the time after the body;
// it reports 000 when no response came.
func TestHTTPWriteOut(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 503, 200)
	out, errOut, code := runRetry(t, "", "http", "--delay", "1ms", "-w", `%{http_code} %{num_retries} %{time_total}\n`, s.URL)
	if code != 0 {
		t.Fatalf("exit status %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^ok\n200 1 \d+\.\d{6}\n$`).MatchString(out) {
		t.Errorf("stdout %q, want the body and \"200 1 SECONDS\"", out)
	}
	out, _, code = runRetry(t, "", "http", "--attempts", "1", "--write-out", "%{http_code}", "http://"+closedAddr(t)+"/")
	if code != 7 || out != "000" {
		t.Errorf("no response: exit status %d, stdout %q; want 7 and 000", code, out)
	}
}

// -i prints the status line and the headers before the body.
func TestHTTPInclude(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 200)
	out, errOut, code := runRetry(t, "", "http", "-i", s.URL)
	if code != 0 || !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.Contains(out, "Content-Length: 3\r\n") || !strings.HasSuffix(out, "\r\n\r\nok\n") {
		t.Errorf("exit status %d, stdout %q, stderr %q; want the status line, headers, a blank line and the body", code, out, errOut)
	}
}

// -s silences retry's lines on stderr; -S brings back the one that says why
// it failed, but not -v's.
func TestHTTPSilentAndShowError(t *testing.T) {
	t.Parallel()
	addr := "http://" + closedAddr(t) + "/"
	if _, errOut, code := runRetry(t, "", "http", "-s", "-v", "--delay", "1ms", addr); code != 7 || errOut != "" {
		t.Errorf("-s: exit status %d, stderr %q; want 7 and nothing", code, errOut)
	}
	_, errOut, code := runRetry(t, "", "http", "-s", "-S", "-v", "--delay", "1ms", addr)
	if code != 7 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "retry: no response after 3 attempts") {
		t.Errorf("-sS: exit status %d, stderr %q; want 7 and the one line that says why", code, errOut)
	}
}

// A name that does not resolve exits 6, as in curl; .invalid never does
// (RFC 6761).
func TestHTTPResolveFailure(t *testing.T) {
	t.Parallel()
	_, errOut, code := runRetry(t, "", "http", "--attempts", "1", "http://no-such-host.invalid/")
	if code != 6 {
		t.Errorf("exit status %d, stderr %q; want 6", code, errOut)
	}
}
