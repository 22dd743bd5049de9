package httpretry

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

type attemptTag struct{}

// The Transport's Options reach retry.DoValue beside its own hooks: the
// caller's OnRetry runs, each attempt's request carries the context a
// Trace's AttemptStart made for it, and the Transport's own rules (its Report, its
// drain, its give-up on a response) keep working.
func TestTransportOptions(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var tags []string
	observed := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		tag, _ := r.Context().Value(attemptTag{}).(string)
		tags = append(tags, tag)
		return base.RoundTrip(r)
	})
	var retried []int
	tr := &Transport{Base: observed, Strategy: noWait(), Options: []retry.Option{
		retry.WithTrace(&retry.Trace{AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
			return context.WithValue(ctx, attemptTag{}, "attempt "+strconv.Itoa(n))
		}}),
		retry.OnRetry(func(_ context.Context, n int, _ time.Duration, _ error) { retried = append(retried, n) }),
	}}
	resp, err, rep := send(t, tr, context.Background(), "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	discard(resp)
	if resp.StatusCode != 200 || rep.Attempts != 3 || len(retried) != 2 || retried[1] != 2 {
		t.Fatalf("status %d after %d attempts, retried after %v", resp.StatusCode, rep.Attempts, retried)
	}
	if len(tags) != 3 || tags[0] != "attempt 1" || tags[2] != "attempt 3" {
		t.Fatalf("the base saw the contexts %q", tags)
	}

	// With a limit of one retry, the Transport's own rule ends the loop and
	// the caller's OnGiveUp hears it.
	var reason error
	tr.Retries = 1
	tr.Options = append(tr.Options, retry.OnGiveUp(func(_ context.Context, e *retry.Error) { reason = e.Reason }))
	srv = newServer(t, failFirst(5, 503))
	resp, err, rep = send(t, tr, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || rep.Attempts != 2 || reason != retry.ErrMaxAttempts || rep.Reason != retry.ErrMaxAttempts {
		t.Fatalf("err %v, %d attempts, reason %v, report %v", err, rep.Attempts, reason, rep.Reason)
	}
}
