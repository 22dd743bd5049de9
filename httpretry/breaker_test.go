package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// handClock is a clock the test moves by hand.
type handClock struct{ d atomic.Int64 }

var handEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *handClock) now() time.Time           { return handEpoch.Add(time.Duration(c.d.Load())) }
func (c *handClock) advance(by time.Duration) { c.d.Add(int64(by)) }

// outage is a loopback server that answers 200 "ok" until it is down, then
// 503 until it is up again, and counts every request it sees.
type outage struct {
	*server
	down atomic.Bool
	hits atomic.Int32
}

func newOutage(t *testing.T) *outage {
	o := &outage{}
	o.server = newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		o.hits.Add(1)
		if o.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	return o
}

// TestBreakerOutage runs a real server through an outage behind a Transport
// with a Breaker: the circuit opens, requests then fail fast with
// retry.ErrCircuitOpen and reach the server only as probes, a failed probe
// reopens it for twice as long, and successful probes close it.
func TestBreakerOutage(t *testing.T) {
	srv := newOutage(t)
	other := newOutage(t) // another host: a scope of its own
	var clock handClock
	b := retry.NewBreaker(retry.BreakerOptions{
		MinAttempts: 4, FailureRate: 0.5, Window: time.Minute,
		OpenFor: time.Second, MaxOpenFor: 10 * time.Second, Probes: 2,
		Now: clock.now,
	})
	tr := &Transport{Breaker: b, Strategy: noWait(), Base: &http.Transport{}}
	t.Cleanup(tr.CloseIdleConnections)
	host := hostOf(srv.server)
	get := func(u string) (*http.Response, error, Report) {
		t.Helper()
		resp, err, rep := send(t, tr, t.Context(), http.MethodGet, u, nil)
		discard(resp)
		return resp, err, rep
	}
	refused := func(when string) {
		t.Helper()
		before := srv.hits.Load()
		resp, err, rep := get(srv.URL)
		if resp != nil || !errors.Is(err, retry.ErrCircuitOpen) || rep.Attempts != 0 || !errors.Is(rep.Reason, retry.ErrCircuitOpen) {
			t.Fatalf("%s: got %v, %v, %+v; want a refusal with retry.ErrCircuitOpen and no attempt", when, resp, err, rep)
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 0 {
			t.Fatalf("%s: %v is no *retry.Error of 0 attempts", when, err)
		}
		if got := srv.hits.Load(); got != before {
			t.Fatalf("%s: the server saw %d requests while the circuit was open", when, got-before)
		}
	}

	for range 3 {
		if resp, err, _ := get(srv.URL); err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthy: %v, %v", resp, err)
		}
	}

	// The outage: requests fail until the circuit opens.
	srv.down.Store(true)
	for i := 0; b.State(host) != retry.BreakerOpen; i++ {
		if i == 10 {
			t.Fatalf("the circuit did not open after %d failed requests (%d hits)", i, srv.hits.Load())
		}
		resp, err, _ := get(srv.URL)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("during the outage: %v, %v; want the 503 back", resp, err)
		}
	}
	for range 5 {
		refused("open")
	}
	if resp, err, _ := get(other.URL); err != nil || resp.StatusCode != 200 || other.hits.Load() != 1 {
		t.Fatalf("another host while this one's circuit is open: %v, %v", resp, err)
	}

	// OpenFor passes while the server is still down: one probe goes
	// through, fails, and the circuit opens again, for 2 s this time.
	clock.advance(time.Second)
	if s := b.State(host); s != retry.BreakerHalfOpen {
		t.Fatalf("after OpenFor: %v, want half-open", s)
	}
	before := srv.hits.Load()
	resp, err, rep := get(srv.URL)
	if err != nil || resp.StatusCode != 503 || rep.Attempts != 1 || !errors.Is(rep.Reason, retry.ErrCircuitOpen) {
		t.Fatalf("failed probe: %v, %v, %+v; want the 503 after 1 attempt, retry refused by the circuit", resp, err, rep)
	}
	if got := srv.hits.Load() - before; got != 1 {
		t.Fatalf("failed probe: the server saw %d requests, want 1", got)
	}
	clock.advance(time.Second)
	refused("open again, 1 s into a 2 s spell")

	// The server comes back; after the doubled spell, two probes close it.
	srv.down.Store(false)
	clock.advance(time.Second)
	for i := range 2 {
		if resp, err, _ := get(srv.URL); err != nil || resp.StatusCode != 200 {
			t.Fatalf("probe %d: %v, %v", i+1, resp, err)
		}
	}
	if s := b.State(host); s != retry.BreakerClosed {
		t.Fatalf("after 2 successful probes: %v, want closed", s)
	}
	before = srv.hits.Load()
	for range 3 {
		if resp, err, _ := get(srv.URL); err != nil || resp.StatusCode != 200 {
			t.Fatalf("closed again: %v, %v", resp, err)
		}
	}
	if got := srv.hits.Load() - before; got != 3 {
		t.Fatalf("closed again: the server saw %d of 3 requests", got)
	}
}

// TestBreakerConnectionsRefused: a host whose connections are refused opens
// the circuit, and then nothing is dialled; with Retries < 0 as well.
func TestBreakerConnectionsRefused(t *testing.T) {
	for _, retries := range []int{0, -1} {
		var dials atomic.Int32
		base := &http.Transport{}
		dial := base.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
		var clock handClock
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 2, OpenFor: time.Second, Now: clock.now})
		tr := &Transport{Base: base, Breaker: b, Strategy: noWait(), Retries: retries}
		u := "http://" + deadAddr(t) + "/"
		for i := 0; ; i++ {
			_, err, _ := send(t, tr, t.Context(), http.MethodGet, u, nil)
			if errors.Is(err, retry.ErrCircuitOpen) {
				break
			}
			if err == nil || i == 5 {
				t.Fatalf("Retries %d: request %d: %v; want refused connections, then an open circuit", retries, i+1, err)
			}
		}
		before := dials.Load()
		for range 3 {
			resp, err, rep := send(t, tr, t.Context(), http.MethodGet, u, nil)
			if resp != nil || !errors.Is(err, retry.ErrCircuitOpen) || rep.Attempts != 0 {
				t.Fatalf("Retries %d: open: %v, %v, %+v", retries, resp, err, rep)
			}
		}
		if got := dials.Load() - before; got != 0 {
			t.Fatalf("Retries %d: %d dials while the circuit was open", retries, got)
		}
	}
}

// A circuit that opens while a request waits to retry refuses the retry,
// and the request's failed response comes back, as when retrying stops for
// any other reason: its status, headers and body, whole when it was drained
// to its end before the wait, and otherwise what was read of it followed by
// an error that says the rest was dropped.
func TestBreakerOpeningDuringTheWaitReturnsTheFailedResponse(t *testing.T) {
	long := strings.Repeat("x", drainLimit+100)
	for _, tc := range []struct {
		name, body string
		whole      bool
	}{
		{"small body", "down for a while", true},
		{"body past the drain limit", long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("X-Request", strconv.Itoa(n))
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, tc.body)
			})
			virtual(t, func(t *testing.T, base *http.Transport) {
				// Two failures open it: the waiting request's and another's,
				// for longer than what is left of the wait.
				b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 2, OpenFor: 5 * time.Second})
				tr := &Transport{Base: base, Breaker: b, Strategy: noWait()}
				type result struct {
					resp *http.Response
					err  error
					rep  Report
				}
				done := make(chan result)
				start := time.Now()
				go func() {
					resp, err, rep := send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
					done <- result{resp, err, rep}
				}()
				time.Sleep(500 * time.Millisecond) // into the first request's 1 s wait
				other, err, _ := send(t, tr, context.Background(), http.MethodGet, srv.URL, nil)
				discard(other)
				if err != nil || other.StatusCode != 503 || b.State(hostOf(srv)) != retry.BreakerOpen {
					t.Fatalf("the other request: %v, %v, circuit %v; want its 503 and an open circuit", other, err, b.State(hostOf(srv)))
				}
				r := <-done
				if r.err != nil || r.resp == nil {
					t.Fatalf("err %v, response %v; want the failed response back", r.err, r.resp)
				}
				defer r.resp.Body.Close()
				if r.resp.StatusCode != 503 || r.resp.Header.Get("X-Request") != "1" || time.Since(start) != time.Second ||
					r.rep.Attempts != 1 || !errors.Is(r.rep.Reason, retry.ErrCircuitOpen) {
					t.Fatalf("%d (request %s) after %v, report %+v; want the first 503 after the 1 s wait, refused by the circuit",
						r.resp.StatusCode, r.resp.Header.Get("X-Request"), time.Since(start), r.rep)
				}
				if len(srv.requests()) != 2 {
					t.Fatalf("%d requests; want 2, the retry refused", len(srv.requests()))
				}
				got, err := io.ReadAll(r.resp.Body)
				if tc.whole && (err != nil || string(got) != tc.body) {
					t.Fatalf("body %q, %v; want %q", got, err, tc.body)
				}
				if !tc.whole && (!errors.Is(err, errBodyDropped) || !strings.HasPrefix(tc.body, string(got))) {
					t.Fatalf("%d bytes of the body, then %v; want a part of it and errBodyDropped", len(got), err)
				}
			})
		})
	}
}
