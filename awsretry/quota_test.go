package awsretry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// notFoundAfterRetry fails each call's first attempt with a 500 and answers
// its retry with DynamoDB's ResourceNotFoundException.
func notFoundAfterRetry(w http.ResponseWriter, r *http.Request, _ int64) {
	if firstAttemptOf(r) {
		ddbError(w, 500, "InternalServerError")
		return
	}
	ddbError(w, 400, "ResourceNotFoundException")
}

// A retry the service answers with a client fault (NotFound) gives its
// cost back: the quota is whole after the call (aws/aws-sdk-go-v2#3186).
// The SDK's standard retryer, beside it with the same quota through
// RateLimiter, keeps the cost.
func TestRetryAnsweredNotFoundGivesItsCostBack(t *testing.T) {
	s := newService(t, notFoundAfterRetry)
	q := retry.NewTokenBucket(500)
	st := retry.NewStandard(retry.StandardOptions{Bucket: q, Backoff: retry.Constant(time.Millisecond)})
	err := getItem(context.Background(), ddb(s, awsretry.New(awsretry.Options{Strategy: st})))
	if !strings.Contains(err.Error(), "ResourceNotFoundException") || s.requests.Load() != 2 {
		t.Fatalf("err = %v after %d requests, want NotFound after 2", err, s.requests.Load())
	}
	if got := q.Available(); got != 500 {
		t.Fatalf("quota after the call = %d, want 500", got)
	}

	sdkQ := retry.NewTokenBucket(500)
	sdk := sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.RateLimiter = awsretry.RateLimiter(sdkQ)
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
	_ = getItem(context.Background(), ddb(s, sdk))
	if got := sdkQ.Available(); got == 500 {
		t.Fatalf("the SDK's standard retryer's quota = %d: it gave the cost back too, the test shows nothing", got)
	}
}

// RateLimiter lends a retry.Quota to the SDK's standard retryer: when the
// quota is dry, the SDK's retry fails with an error that wraps
// ErrQuotaExhausted, and nothing more is sent.
func TestRateLimiterLendsAQuota(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 500, "InternalServerError") })
	q := retry.NewTokenBucket(20) // one retry of cost 14
	sdk := sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.RateLimiter = awsretry.RateLimiter(q)
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
	err := getItem(context.Background(), ddb(s, sdk))
	if !errors.Is(err, retry.ErrQuotaExhausted) {
		t.Fatalf("err = %v, want ErrQuotaExhausted", err)
	}
	if s.requests.Load() != 2 || q.Available() != 6 {
		t.Fatalf("requests = %d, quota = %d, want 2 and 6", s.requests.Load(), q.Available())
	}
	if awsretry.RateLimiter(nil) == nil {
		t.Fatal("RateLimiter(nil) is nil")
	}
}

// With a Breaker, an open circuit fails the SDK call at once with an error
// that wraps ErrCircuitOpen, and sends nothing.
func TestOpenCircuitSendsNothing(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 503, "ServiceUnavailable") })
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Minute})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast(), Breaker: b}))
	var err error
	for range 10 {
		if err = getItem(context.Background(), c); errors.Is(err, retry.ErrCircuitOpen) {
			break
		}
	}
	if !errors.Is(err, retry.ErrCircuitOpen) {
		t.Fatalf("err = %v after 10 calls, want ErrCircuitOpen", err)
	}
	sent := s.requests.Load()
	start := time.Now()
	err = getItem(context.Background(), c)
	if !errors.Is(err, retry.ErrCircuitOpen) || s.requests.Load() != sent {
		t.Fatalf("err = %v, requests %d -> %d: want ErrCircuitOpen and none sent", err, sent, s.requests.Load())
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the refusal took %v", d)
	}
	if b.State("DynamoDB us-east-1") != retry.BreakerOpen {
		t.Fatalf("state of the call's scope = %v, want open", b.State("DynamoDB us-east-1"))
	}
}

// An answered client fault is no failure to the breaker: a table of
// NotFounds never opens it.
func TestClientFaultsDoNotOpenTheCircuit(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { ddbError(w, 400, "ResourceNotFoundException") })
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4})
	c := ddb(s, awsretry.New(awsretry.Options{Breaker: b}))
	for range 30 {
		if err := getItem(context.Background(), c); errors.Is(err, retry.ErrCircuitOpen) {
			t.Fatalf("circuit opened on client faults: %v", err)
		}
	}
	if s.requests.Load() != 30 {
		t.Fatalf("requests = %d, want 30 (one per call)", s.requests.Load())
	}
}
