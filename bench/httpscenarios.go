package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
)

// The HTTP scenarios send one GET through each library's HTTP integration
// to a loopback server shared by all, read the response body to its end and
// close it:
//
//   - success: GET / answers 200 "ok" at once.
//   - two retries: GET /flaky answers 503 twice for the request, then 200
//     "ok" (3 requests reach the server), with no delay between attempts.
//
// Every row uses its library the same way: an *http.Client whose Transport
// is the library's (or, for bare, the base *http.Transport itself), and
// client.Do with a request made per call with the caller's context. Each
// library has its own base *http.Transport, a clone of
// http.DefaultTransport (the default settings), so that the connection pools
// do not interfere; its connections stay alive from one call to the next.
//
// A scenario returns an error unless the final response is 200 with the body
// "ok".

// HTTPLib is one HTTP library under test. Like a Lib, it is not safe for
// concurrent use: its runs share one body buffer.
type HTTPLib struct {
	// Name identifies the library in benchmark names and in the table.
	Name string
	// Success runs the success scenario once.
	Success Scenario
	// TwoRetries runs the two-retries scenario once; nil if the library
	// does not retry (bare).
	TwoRetries Scenario

	base  *http.Transport
	dials *atomic.Int64
}

// Dials returns how many connections the library's base transport has
// dialled: 1 if it kept reusing one connection.
func (l *HTTPLib) Dials() int64 { return l.dials.Load() }

// CloseIdleConnections closes the idle connections of the library's base
// transport.
func (l *HTTPLib) CloseIdleConnections() { l.base.CloseIdleConnections() }

// The server's paths, and its 503 body: a failed response has a small body,
// as real ones do, which a library must drain or close before it retries, or
// lose the connection.
const (
	okPath      = "/"
	flakyPath   = "/flaky"
	reqIDHeader = "X-Req"
	failures    = 2 // 503s per /flaky request before its 200
)

var (
	okBody          = []byte("ok")
	unavailableBody = []byte("unavailable")
)

// testServer is the loopback server shared by every HTTP library.
type testServer struct {
	*httptest.Server
	requests atomic.Int64 // requests served, on every path

	mu    sync.Mutex
	tries map[string]int // /flaky requests seen per X-Req, until their 200
}

// Requests returns how many requests the server has served.
func (s *testServer) Requests() int64 { return s.requests.Load() }

// Pending returns how many /flaky request ids have not had their 200 yet.
func (s *testServer) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tries)
}

func (s *testServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	switch r.URL.Path {
	case okPath:
		w.Write(okBody)
	case flakyPath:
		id := r.Header.Get(reqIDHeader)
		if id == "" {
			http.Error(w, "no "+reqIDHeader+" header", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.tries[id]++
		n := s.tries[id]
		if n > failures {
			delete(s.tries, id)
		}
		s.mu.Unlock()
		if n <= failures {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(unavailableBody)
			return
		}
		w.Write(okBody)
	default:
		http.NotFound(w, r)
	}
}

var (
	serverOnce sync.Once
	server     *testServer
)

// Server returns the loopback server, started on first use and left running
// until the process exits.
func Server() *testServer {
	serverOnce.Do(func() {
		server = &testServer{tries: map[string]int{}}
		server.Server = httptest.NewServer(server)
	})
	return server
}

// reqIDs numbers the /flaky requests of the whole process.
var reqIDs atomic.Uint64

// getter sends GETs through one *http.Client and checks their responses,
// reading each body into a buffer it reuses.
type getter struct {
	client *http.Client
	buf    bytes.Buffer
}

func (g *getter) get(ctx context.Context, url string, flaky bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if flaky {
		req.Header.Set(reqIDHeader, strconv.FormatUint(reqIDs.Add(1), 10))
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	g.buf.Reset()
	_, err = g.buf.ReadFrom(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(g.buf.Bytes(), okBody) {
		return fmt.Errorf("GET %s: %s %q, want 200 %q", url, resp.Status, g.buf.Bytes(), okBody)
	}
	return nil
}

// scenarios returns the success scenario through success and the
// two-retries scenario through twoRetries (none if twoRetries is nil).
func scenarios(success, twoRetries *http.Client) (Scenario, Scenario) {
	srv := Server()
	okURL, flakyURL := srv.URL+okPath, srv.URL+flakyPath
	g1 := &getter{client: success}
	s := func(ctx context.Context) error { return g1.get(ctx, okURL, false) }
	if twoRetries == nil {
		return s, nil
	}
	g2 := &getter{client: twoRetries}
	return s, func(ctx context.Context) error { return g2.get(ctx, flakyURL, true) }
}

// newBase returns a base transport with the default settings, and a count
// of the connections it dials (its default dialer, counted).
func newBase() (*http.Transport, *atomic.Int64) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dial := t.DialContext
	n := new(atomic.Int64)
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return t, n
}

// HTTPLibs builds every HTTP library's clients once and returns the table
// of HTTP libraries, bare first. The success ratios are relative to the row
// named "bare", the two-retries ratios to the row named "httpretry".
func HTTPLibs() []HTTPLib {
	return []HTTPLib{
		bareHTTPLib(),
		httpretryLib(),
		retryablehttpLib(),
		failsafeHTTPLib(),
	}
}

// bareHTTPLib: the base transport alone, with no retries: the baseline of
// the success scenario.
func bareHTTPLib() HTTPLib {
	base, dials := newBase()
	success, _ := scenarios(&http.Client{Transport: base}, nil)
	return HTTPLib{Name: "bare", Success: success, base: base, dials: dials}
}

// httpretryLib: retrykit's httpretry.Transport over the base transport.
// Success uses the zero configuration (a Standard strategy owned by the
// Transport: 3 attempts, jittered exponential backoff, a retry quota per
// host). Two retries uses a Simple strategy with no delay and no quota, as
// in the core table; 503 is one of its default retryable statuses.
func httpretryLib() HTTPLib {
	base, dials := newBase()
	success, twoRetries := scenarios(
		&http.Client{Transport: &httpretry.Transport{Base: base}},
		&http.Client{Transport: &httpretry.Transport{
			Base:     base,
			Strategy: &retry.Simple{Backoff: retry.Constant(0)},
		}},
	)
	return HTTPLib{Name: "httpretry", Success: success, TwoRetries: twoRetries, base: base, dials: dials}
}

// retryablehttpLib: hashicorp/go-retryablehttp through StandardClient(),
// the *http.Client its README documents for code that takes one, so that
// the row is used like the others (its Transport turns each request into a
// retryablehttp.Request and runs Client.Do, which sends each attempt with
// Client.HTTPClient.Do). HTTPClient is an *http.Client over the base
// transport; Logger is nil so that nothing is logged. Success keeps the
// default retry settings (NewClient: 4 retries, 1s to 30s exponential
// backoff, DefaultRetryPolicy, which retries 503). Two retries sets
// RetryWaitMin = RetryWaitMax = 0, which makes DefaultBackoff's wait 0 (it
// still starts a timer for it).
func retryablehttpLib() HTTPLib {
	base, dials := newBase()
	inner := &http.Client{Transport: base}
	newClient := func() *retryablehttp.Client {
		c := retryablehttp.NewClient()
		c.HTTPClient = inner
		c.Logger = nil
		return c
	}
	success := newClient()
	zero := newClient()
	zero.RetryWaitMin, zero.RetryWaitMax = 0, 0
	s, t := scenarios(success.StandardClient(), zero.StandardClient())
	return HTTPLib{Name: "go-retryablehttp", Success: s, TwoRetries: t, base: base, dials: dials}
}

// failsafeHTTPLib: failsafe-go's failsafehttp.NewRoundTripper over the base
// transport, with a policy from failsafehttp.NewRetryPolicyBuilder(), its
// HTTP retry policy (2 retries; 429 and 5xx but 501 are retried; no delay
// unless the response has a Retry-After), for both scenarios.
//
// failsafehttp does not close the body of a response it retries, so each
// retried 503 would keep its connection busy, and leak it, until the
// caller closed a body it never sees: the policy's OnRetryScheduled
// listener drains and closes it, the fix a caller has to add.
func failsafeHTTPLib() HTTPLib {
	base, dials := newBase()
	policy := failsafehttp.NewRetryPolicyBuilder().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
			if resp := e.LastResult(); resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}).
		Build()
	client := &http.Client{Transport: failsafehttp.NewRoundTripper(base, policy)}
	s, t := scenarios(client, client)
	return HTTPLib{Name: "failsafe-go", Success: s, TwoRetries: t, base: base, dials: dials}
}
