package forrst_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/httpretry"
	"github.com/retrykit/retry/internal/retrytest"
)

// Retries at one layer across services (the client's own part, an answered
// failure left to a caller that retries, is TestConformance's): the server
// marks the function's context on the client's retries (Retry-Attempt), so
// that the function's own calls leave their retries to the client; an HTTP
// back end behind it that always fails sees 3 requests for the client's
// first attempt and 1 for each retry.
func TestForrstLayersDoNotMultiply(t *testing.T) {
	var backHits atomic.Int32
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backHits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer back.Close()
	downstream := &http.Client{Transport: &httpretry.Transport{Strategy: noWait(3)}}

	var marked []bool
	var s forrst.Server
	s.Register("orders.get", func(ctx context.Context, _ json.RawMessage) (any, error) {
		marked = append(marked, retry.CallerRetries(ctx))
		req, _ := http.NewRequestWithContext(ctx, "GET", back.URL, nil)
		resp, err := downstream.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return nil, forrst.Fail(forrst.CodeUnavailable, "the back end is down")
	}, forrst.WithGuidance(forrst.CodeUnavailable, forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 5}))
	srv := newServer(t, &s)

	client := &forrst.Client{URL: srv.URL, Strategy: noWait(3)}
	err := client.Call(context.Background(), "orders.get", nil, nil)
	wantCallError(t, err, forrst.CodeUnavailable, http.StatusServiceUnavailable)
	if len(marked) != 3 || marked[0] || !marked[1] || !marked[2] || backHits.Load() != 5 {
		t.Fatalf("function contexts marked %v, back end hit %d times, want [false true true] and 5", marked, backHits.Load())
	}

}

// Three loops in one process, none told of the others: an application's
// retry.Do around a Forrst client whose HTTP client's Transport retries too.
// Each loop marks the work it hands on, so a function that always fails runs
// 3 times, whether the application returns the client's error or an error of
// its own that says nothing about retrying.
func TestApplicationLoopAroundAForrstClientDoesNotMultiply(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	s.Register("orders.get", func(context.Context, json.RawMessage) (any, error) {
		runs.Add(1)
		return nil, forrst.Fail(forrst.CodeUnavailable, "down")
	}, forrst.WithGuidance(forrst.CodeUnavailable, forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 5}))
	srv := newServer(t, &s)
	client := &forrst.Client{
		URL:        srv.URL,
		Strategy:   noWait(3),
		HTTPClient: &http.Client{Transport: &httpretry.Transport{Strategy: noWait(3), IdempotencyKey: true}}, // POSTs retried too
	}
	for name, wrap := range map[string]func(error) error{
		"the client's error": func(err error) error { return err },
		"an error of its own": func(err error) error {
			return fmt.Errorf("orders unavailable: %v", err) // %v: the chain is cut
		},
	} {
		runs.Store(0)
		attempts := 0
		err := retry.Do(context.Background(), noWait(3), func(ctx context.Context) error {
			attempts++
			return wrap(client.Call(ctx, "orders.get", nil, nil))
		})
		if err == nil || attempts != 3 || runs.Load() != 3 {
			t.Errorf("%s: %v after %d attempts, the function ran %d times; want 3 and 3", name, err, attempts, runs.Load())
		}
	}
	// With the application's loop unmarked, the client and its Transport
	// still do not multiply (3 runs: the application does not retry an error
	// it did not mark), but the application's loop does when it marks its
	// error transient: 3 × 3.
	for want, wrap := range map[int32]func(error) error{3: func(err error) error { return err }, 9: retry.Transient} {
		runs.Store(0)
		_ = retry.Do(context.Background(), noWait(3), func(ctx context.Context) error {
			return wrap(client.Call(ctx, "orders.get", nil, nil))
		}, retry.Unmarked())
		if runs.Load() != want {
			t.Errorf("unmarked: the function ran %d times, want %d", runs.Load(), want)
		}
	}
	// No loop marks: every layer multiplies, 9 runs, 27 with a transient
	// error.
	unmarked := &forrst.Client{URL: client.URL, Strategy: client.Strategy, HTTPClient: client.HTTPClient, Options: []retry.Option{retry.Unmarked()}}
	for want, wrap := range map[int32]func(error) error{9: func(err error) error { return err }, 27: retry.Transient} {
		runs.Store(0)
		_ = retry.Do(context.Background(), noWait(3), func(ctx context.Context) error {
			return wrap(unmarked.Call(ctx, "orders.get", nil, nil))
		}, retry.Unmarked())
		if runs.Load() != want {
			t.Errorf("no marks: the function ran %d times, want %d", runs.Load(), want)
		}
	}
}

// refused returns the address of a loopback port nothing listens on, and a
// base transport that counts its dials.
func refused(t *testing.T) (url string, base *http.Transport, dials *atomic.Int32) {
	dials = new(atomic.Int32)
	base = &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	t.Cleanup(base.CloseIdleConnections)
	return "http://" + retrytest.DeadAddr(t) + "/", base, dials
}

// A client over a retrying Transport calls a server that is down: the
// Transport retries the refused connection (the client's loop cannot see
// it), gives up, and the client does not retry that give-up again (3 dials,
// not 3 × 3). A Transport with its retries off made no decision: the
// client retries the refused connection itself (3 dials).
func TestClientOverARetryingTransportDoesNotMultiplyRefusedConnections(t *testing.T) {
	for _, retries := range []int{0, -1} {
		url, base, dials := refused(t)
		tr := &httpretry.Transport{Base: base, Strategy: noWait(3), Retries: retries}
		c := &forrst.Client{URL: url, HTTPClient: &http.Client{Transport: tr}, Strategy: noWait(3)}
		err := c.Call(context.Background(), "f", nil, nil)
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "dial" {
			t.Errorf("Retries %d: err = %v, want the refused dial in its chain", retries, err)
		}
		if n := dials.Load(); n != 3 {
			t.Errorf("Retries %d: %d dials for one call, want 3", retries, n)
		}
	}
}

// A Transport does not retry a POST whose answer was lost after it was
// sent: it sees no Idempotency-Key header. Its single attempt decided
// nothing the client cannot judge better: the client knows the call's key,
// retries, and the server replays the stored result.
func TestClientOverATransportRetriesALostAnswerWithItsKey(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	charging(&s, &charges)
	srv, requests := lossy(t, &s, 1)
	tr := &httpretry.Transport{Base: &http.Transport{}, Strategy: noWait(3)}
	t.Cleanup(tr.CloseIdleConnections)
	c := &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: tr}, Strategy: noWait(3)}
	var out struct{ Charge int }
	if err := c.Call(context.Background(), "payments.charge", nil, &out); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if requests.Load() != 2 || charges.Load() != 1 || out.Charge != 1 {
		t.Errorf("requests %d, charges %d, result %+v; want 2 requests, 1 charge, the first charge", requests.Load(), charges.Load(), out)
	}
}

// A caller's loop around Call retries the answered failures the client
// leaves to it, by its own limits: the server's max_attempts does not reach
// it. ServerLimit among its options holds it to max_attempts, as does an
// Independent client, whose give-up the caller's loop does not retry.
func TestCallersLoopHoldsTheServerMaxAttempts(t *testing.T) {
	srv, requests := hostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, failDoc("UNAVAILABLE", `{"allowed":true,"strategy":"immediate","max_attempts":1}`))
	})
	for _, tc := range []struct {
		name        string
		independent bool
		opts        []retry.Option
		want        int32
	}{
		{"the caller's limit alone", false, nil, 5},
		{"ServerLimit", false, []retry.Option{forrst.ServerLimit()}, 2},
		{"an Independent client", true, nil, 2},
	} {
		requests.Store(0)
		c := &forrst.Client{URL: srv.URL, Strategy: noWait(5), Independent: tc.independent}
		err := retry.Do(context.Background(), noWait(5), func(ctx context.Context) error {
			return c.Call(ctx, "f", nil, nil)
		}, tc.opts...)
		if n := requests.Load(); n != tc.want || !errors.Is(err, retry.ErrMaxAttempts) {
			t.Errorf("%s: %d requests, err %v; want %d and a give-up on an attempt limit", tc.name, n, err, tc.want)
		}
		if tc.want == 2 && !errors.Is(err, forrst.ErrServerLimit) {
			t.Errorf("%s: err %v, want ErrServerLimit", tc.name, err)
		}
	}
}
