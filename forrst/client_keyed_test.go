package forrst_test

// Keyed calls over a retrying transport: what the transport's give-up leaves
// to the Client, and what the Server stores.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"

	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
)

// A server restarting: the first dial is refused (a real refused connection
// to a loopback port nothing listens on), the Transport's retry reaches the
// server, which runs the call and loses its answer (a reset). The call's
// POST carries its key in an Idempotency-Key header, so the Transport
// repeats it, and the server replays the stored result: one charge, the
// result returned, as when the dial was not refused first
// (TestClientOverATransportRetriesALostAnswerWithItsKey).
func TestKeyedLostAnswerAfterARefusedDialIsRetried(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	charging(&s, &charges)
	srv, requests := lossy(t, &s, 1)
	base, dials := refusingDials(t, func(n int32) bool { return n == 1 })
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

// Keyed calls over an httpretry.Transport, whose give-ups after several
// attempts the Client leaves decided, so that the layers' attempts do not
// multiply. Here every connection's first two dials are refused and every
// answer is lost: the Transport, which sees the key in the Idempotency-Key
// header, spends its 3 attempts on them and gives up; a Client that retried
// that give-up would start a loop of 3 dials per attempt, 9 in all.
func TestKeyedLostAnswersAfterRefusedDialsDoNotMultiply(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	charging(&s, &charges)
	srv, requests := lossy(t, &s, 100)
	base, dials := refusingDials(t, func(n int32) bool { return n%3 != 0 })
	tr := &httpretry.Transport{Base: base, Strategy: noWait(3)}
	c := &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: tr}, Strategy: noWait(3)}
	err := c.Call(context.Background(), "payments.charge", nil, nil)
	t.Logf("Call: %v; %d dials, %d requests, %d charges", err, dials.Load(), requests.Load(), charges.Load())
	if dials.Load() > 3 {
		t.Errorf("%d dials, want at most 3, the larger layer's attempts", dials.Load())
	}
}

// The same with the Client's per-attempt deadline: each attempt finds its
// first two dials refused and its third request held until the attempt's
// own deadline ends it (ended here by the test once the request arrived).
// The Transport's loop, 3 dials, ends with the attempt's context; a Client
// that retried it would make 9 dials.
func TestKeyedAttemptTimeoutsAfterRefusedDialsDoNotMultiply(t *testing.T) {
	var expire atomic.Pointer[chan struct{}]
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client hang up
		if ch := expire.Swap(nil); ch != nil {
			close(*ch)
		}
		<-r.Context().Done() // held until the client hangs up
	}))
	base, dials := refusingDials(t, func(n int32) bool { return n%3 != 0 })
	trace := &retry.Trace{AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
		ch := make(chan struct{})
		expire.Store(&ch)
		return expiring{ctx, ch}
	}}
	tr := &httpretry.Transport{Base: base, Strategy: noWait(3)}
	c := &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: tr}, Strategy: noWait(3),
		Options: []retry.Option{retry.WithTrace(trace)}}
	err := c.Call(context.Background(), "payments.charge", nil, nil)
	t.Logf("Call: %v; %d dials", err, dials.Load())
	if dials.Load() > 3 {
		t.Errorf("%d dials, want at most 3, the larger layer's attempts", dials.Load())
	}
}
