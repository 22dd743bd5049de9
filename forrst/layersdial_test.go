package forrst_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
)

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
	down := httptest.NewServer(http.NotFoundHandler())
	dead := down.Listener.Addr().String()
	down.Close()
	var dials atomic.Int32
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1)%3 != 0 {
			addr = dead
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
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
	down := httptest.NewServer(http.NotFoundHandler())
	dead := down.Listener.Addr().String()
	down.Close()
	var dials atomic.Int32
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1)%3 != 0 {
			addr = dead
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
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
