package awsretry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// The SDK's loop makes the attempts; the Retryer decides with the
// strategy: two 500s and a success are three requests, one call.
func TestSDKLoopRetriesWhatTheStrategyGrants(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		if n < 3 {
			ddbError(w, 500, "InternalServerError")
			return
		}
		ddbItem(w)
	})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast()}))
	if err := getItem(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if got := s.requests.Load(); got != 3 {
		t.Fatalf("requests = %d, want 3", got)
	}
}

// A strategy's limit on attempts ends the call, with its reason wrapped.
func TestStrategyLimitEndsTheCall(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		ddbError(w, 503, "ServiceUnavailable")
	})
	st := retry.NewStandard(retry.StandardOptions{MaxAttempts: 2, Backoff: retry.Constant(time.Millisecond)})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: st}))
	err := getItem(context.Background(), c)
	if !errors.Is(err, retry.ErrMaxAttempts) {
		t.Fatalf("err = %v, want ErrMaxAttempts", err)
	}
	if got := s.requests.Load(); got != 2 {
		t.Fatalf("requests = %d, want 2", got)
	}
}
