package forrst_test

// Keyed calls over a retrying transport: what the transport's give-up leaves
// to the Client, and what the Server stores.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"

	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
)

// A server restarting: the first dial is refused (a real refused connection
// to a loopback port nothing listens on), the Transport's retry reaches the
// server, which runs the call and loses its answer (a reset). The Transport
// does not repeat the POST (no Idempotency-Key header), so its give-up,
// after two attempts, decided nothing about the lost answer the client
// cannot judge better: a keyed call is retried and the server replays the
// stored result, as it is when the dial was not refused first
// (TestClientOverATransportRetriesALostAnswerWithItsKey).
func TestKeyedLostAnswerAfterARefusedDialIsRetried(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	charging(&s, &charges)
	srv, requests := lossy(t, &s, 1)
	down := httptest.NewServer(http.NotFoundHandler())
	dead := down.Listener.Addr().String()
	down.Close()
	var dials atomic.Int32
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			addr = dead
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
	tr := &httpretry.Transport{Base: base, Strategy: noWait(3)}
	c := &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: tr}, Strategy: noWait(3)}
	var out struct{ Charge int }
	err := c.Call(context.Background(), "payments.charge", nil, &out)
	if err != nil || requests.Load() != 2 || charges.Load() != 1 || out.Charge != 1 {
		t.Errorf("Call: %v; %d dials, %d requests, %d charges, result %+v; want 2 requests, 1 charge, the first charge",
			err, dials.Load(), requests.Load(), charges.Load(), out)
	}
}

// expiring is an attempt's context whose deadline the test decides: it ends
// with context.DeadlineExceeded when expire is closed, as the context
// retry.AttemptTimeout gives an attempt does when its time is up.
type expiring struct {
	context.Context
	expire <-chan struct{}
}

func (c expiring) Done() <-chan struct{} { return c.expire }

func (c expiring) Err() error {
	select {
	case <-c.expire:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A keyed call whose first attempt runs out of its own time (the Client's
// per-attempt deadline, here ended by the test once the function has
// started) while the server runs the function: the server keeps the
// outcome, and the client's retry gets it replayed, over a plain HTTP client
// as over a retrying Transport. Over the Transport, the attempt's deadline
// ends the Transport's loop after its one attempt with the context's error
// as its reason, which decidedBelow takes for a decision of the
// Transport's, so the client did not retry the timeout it retries over a
// plain HTTP client.
func TestKeyedAttemptTimeoutIsRetriedOverARetryingTransport(t *testing.T) {
	for _, name := range []string{"http.Transport", "httpretry.Transport"} {
		t.Run(name, func(t *testing.T) {
			var charges atomic.Int32
			started := make(chan struct{})
			var s forrst.Server
			s.Register("payments.charge", func(ctx context.Context, _ json.RawMessage) (any, error) {
				n := charges.Add(1)
				if n == 1 {
					close(started)
					<-ctx.Done() // the client hangs up; the function finishes
				}
				return map[string]any{"charge": n}, nil
			})
			var requests atomic.Int32
			handled := make(chan struct{}, 4)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				s.ServeHTTP(w, r)
				handled <- struct{}{}
			}))
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			var rt http.RoundTripper = base
			if name == "httpretry.Transport" {
				rt = &httpretry.Transport{Base: base, Strategy: noWait(3)}
			}
			trace := &retry.Trace{AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
				if n == 1 {
					return expiring{ctx, started}
				}
				<-handled // the first call's outcome is the server's before the retry
				return nil
			}}
			c := &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: rt}, Strategy: noWait(3),
				Options: []retry.Option{retry.WithTrace(trace)}}
			var out struct{ Charge int }
			err := c.Call(context.Background(), "payments.charge", nil, &out)
			if err != nil || charges.Load() != 1 || out.Charge != 1 {
				t.Errorf("Call: %v; %d requests, %d charges, result %+v; want the first charge replayed", err, requests.Load(), charges.Load(), out)
			}
		})
	}
}

// A function that acted and then fails with CANCELLED of its own (the payer
// cancelled at a later step), with guidance that forbids a retry, while its
// caller is still there: the failure is not the caller's going away, and
// the Server doc says a failure with "allowed": false is stored and
// replayed like a result. The Server forgets every CANCELLED, so the same
// key ran the function again.
func TestOwnCancelledFailureWithAKeyIsStored(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("payments.charge", func(ctx context.Context, _ json.RawMessage) (any, error) {
		runs.Add(1) // the card was authorised
		return nil, forrst.GuidanceFor(forrst.Fail(forrst.CodeCancelled, "the payer cancelled the confirmation"), forrst.RetryData{Allowed: false})
	})
	srv := newServer(t, &s)
	first := post(t, srv.URL, requestDoc("req_1", "payments.charge", "", keyExt("order_1")))
	second := post(t, srv.URL, requestDoc("req_2", "payments.charge", "", keyExt("order_1")))
	if runs.Load() != 1 || second.code() != first.code() {
		t.Errorf("the function ran %d times for one key (codes %q, %q); want once, the failure replayed", runs.Load(), first.code(), second.code())
	}
}
