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
	"github.com/retrykit/retry/internal/retrytest"
)

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
		var clock retrytest.Clock
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 2, OpenFor: time.Second, Now: clock.Now})
		tr := &Transport{Base: base, Breaker: b, Strategy: noWait(), Retries: retries}
		u := "http://" + retrytest.DeadAddr(t) + "/"
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
				if len(srv.Requests()) != 2 {
					t.Fatalf("%d requests; want 2, the retry refused", len(srv.Requests()))
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
