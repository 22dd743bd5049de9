package httpcmd

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// TestMain builds the retry command, which the tests run as a user would.
func TestMain(m *testing.M) {
	os.Exit(clitest.Main(m))
}

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
	out, errOut, code := clitest.Run(t, "", "http", s.URL+"/x")
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
	out, _, code := clitest.Run(t, "", "http", s.URL)
	if code != 0 || out != body {
		t.Errorf("exit status %d, %d bytes on stdout; want 0 and the %d bytes of the body", code, len(out), len(body))
	}
}

func TestHTTPGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", 503)
	out, errOut, code := clitest.Run(t, "", "http", "--attempts", "2", s.URL)
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
	out, errOut, code := clitest.Run(t, "", "http", s.URL)
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
	out, errOut, code := clitest.Run(t, "", "http", "-v", redirect.URL)
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
	_, errOut, code := clitest.Run(t, "", "http", "-d", "a=1", s.URL)
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
	out, errOut, code := clitest.Run(t, "", "http", "--idempotency-key", "-d", "a=1", s.URL)
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
	_, errOut, code := clitest.Run(t, "", "http", "-H", "X-One: 1", "-H", "X-Two:  two words ",
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
	_, errOut, code := clitest.Run(t, "", "http", "-X", "PUT", "--data-binary", "@"+file, s.URL)
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
	_, errOut, code := clitest.Run(t, "line 1\nline 2\n", "http", "--idempotency-key", "--data-binary", "@-", s.URL)
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
	_, errOut, code := clitest.Run(t, "", "http", "--timeout", "500ms", s.URL)
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
	_, errOut, code := clitest.Run(t, "", "http", "--timeout", "300ms", hang.URL)
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
	_, errOut, code := clitest.Run(t, "", "http", "-v", "http://"+closedAddr(t)+"/")
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
	_, errOut, code := clitest.Run(t, "", "http", "-v", s.URL)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errOut)
	}
	got := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], "retry: attempt 1: 503 Service Unavailable, retrying in ") ||
		got[1] != "retry: attempt 2: 200 OK" {
		t.Errorf("stderr:\n%s\nwant a line per attempt", errOut)
	}
}

// partThenHang serves the first part of a body ("first part\n") and then
// nothing more until the client hangs up or t ends; it counts requests.
func partThenHang(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	requests := new(atomic.Int32)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, "first part\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	return slow, requests
}

// An attempt whose -m runs out in its body is not retried: the body is
// already being written out. It ends the call with curl's exit status 28,
// after one request, the part that came written, as --help says.
func TestHTTPMaxTimeInTheBodyIsNotRetried(t *testing.T) {
	t.Parallel()
	slow, requests := partThenHang(t)
	out, errOut, code := clitest.Run(t, "", "http", "--delay", "1ms", "-m", "300ms", slow.URL)
	if code != 28 || out != "first part\n" || requests.Load() != 1 {
		t.Errorf("exit status %d, stdout %q, %d requests, stderr %q; want 28, the part that came, 1 request", code, out, requests.Load(), errOut)
	}
}

func TestHTTPStreamsTheBodyUntilTheTimeout(t *testing.T) {
	t.Parallel()
	slow, _ := partThenHang(t)
	out, errOut, code := clitest.Run(t, "", "http", "--timeout", "500ms", slow.URL)
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
		name := cli.SignalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, "", 503)
			s.setHeader("Retry-After", "30")
			// -v: each attempt is reported, with the wait after it.
			cmd, errOut := clitest.Start(t, "http", "-v", s.URL)
			errOut.Await(t, "retry: attempt 1: 503 Service Unavailable, retrying in 30s")
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := clitest.WaitExit(t, cmd)
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
			out, errOut, code := clitest.Run(t, "", append(append([]string{"http"}, tc.args...), s.URL)...)
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
	_, errOut, code := clitest.Run(t, "", "http", "-v", "--attempts", "5", "--delay", "1ms", "--max-delay", "0", "http://"+closedAddr(t)+"/")
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
	_, errOut, code := clitest.Run(t, "", "http", "-v", "--delay", "1h", "--max-delay", "50ms", "http://"+closedAddr(t)+"/")
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
	out, errOut, code := clitest.Run(t, "", "http", "--attempt-timeout", "200ms", "--delay", "1ms", srv.URL)
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
