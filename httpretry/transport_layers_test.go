package httpretry

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

// A reset the caller could not see is fixed by the Transport inside one
// attempt of the caller's retries (the contract's failures, answered ones,
// are left to the caller: TestConformance): alone in work whose caller
// retries, and under an application's own loop.
func TestCallerRetriesLeaveResetsToTheTransport(t *testing.T) {
	ctx, done := retry.WithCallerRetries(context.Background())
	defer done()
	reset := resetServer(t, 1)
	resp, err, rep := send(t, &Transport{Strategy: noWait()}, ctx, "GET", reset.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 200 || rep.Attempts != 2 {
		t.Fatalf("reset: err %v, report %+v", err, rep)
	}

	reset = resetServer(t, 1)
	loop := &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}
	attempts := 0
	err = retry.Do(context.Background(), loop, func(ctx context.Context) error {
		attempts++
		req, err := http.NewRequestWithContext(ctx, "GET", reset.URL, nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: &Transport{Strategy: noWait()}}).Do(req)
		if err != nil {
			return err
		}
		discard(resp)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", reset.URL, resp.Status)
		}
		return nil
	})
	if err != nil || attempts != 1 || len(reset.Requests()) != 2 {
		t.Fatalf("reset: %v after %d attempts of the loop, %d requests; want the Transport to fix it", err, attempts, len(reset.Requests()))
	}
}
