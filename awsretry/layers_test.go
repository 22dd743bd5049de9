package awsretry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// outer is the application's loop: three attempts, waits of a millisecond.
func outer() *retry.Standard {
	return retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(time.Millisecond)})
}

// One layer: inside the application's retry.Do, an answered failure is one
// request per outer attempt: three outer attempts reach the service three
// times, not nine, and the outer loop retries the SDK's error as the
// failure it is.
func TestOneLayerInsideDo(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) {
		ddbError(w, 500, "InternalServerError")
	})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast()}))
	attempts := 0
	err := retry.Do(context.Background(), outer(), func(ctx context.Context) error {
		attempts++
		return getItem(ctx, c)
	})
	if attempts != 3 || s.requests.Load() != 3 {
		t.Fatalf("outer attempts = %d, requests = %d, want 3 and 3", attempts, s.requests.Load())
	}
	if !errors.Is(err, retry.ErrMaxAttempts) || !errors.Is(err, retry.ErrOuterLoop) {
		t.Fatalf("err = %v, want the outer loop's ErrMaxAttempts over the inner one's ErrOuterLoop", err)
	}
}

// An application that turns the SDK's error into one of its own, which
// says nothing about retrying, still has it retried as the failure left to
// it: the Retryer tells the outer attempt.
func TestOneLayerWhenTheCallerRewritesTheError(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) {
		ddbError(w, 503, "ServiceUnavailable")
	})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast()}))
	attempts := 0
	_ = retry.Do(context.Background(), outer(), func(ctx context.Context) error {
		attempts++
		if err := getItem(ctx, c); err != nil {
			return errors.New("lookup failed")
		}
		return nil
	})
	if attempts != 3 || s.requests.Load() != 3 {
		t.Fatalf("outer attempts = %d, requests = %d, want 3 and 3", attempts, s.requests.Load())
	}
}

// Failures the caller cannot see or judge, a reset before any answer, keep
// the SDK's retries inside the outer attempt; and Independent keeps them for
// answers too, whose give-up the outer loop then does not retry (a
// *retry.Error is a whole loop's outcome): three requests either way.
func TestOneLayerKeepsRetriesOfUnansweredFailures(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, n int64) {
		if n%3 != 0 {
			reset(w)
			return
		}
		ddbItem(w)
	})
	c := ddb(s, awsretry.New(awsretry.Options{Strategy: fast()}))
	attempts := 0
	err := retry.Do(context.Background(), outer(), func(ctx context.Context) error {
		attempts++
		return getItem(ctx, c)
	})
	if err != nil || attempts != 1 || s.requests.Load() != 3 {
		t.Fatalf("err = %v, outer attempts = %d, requests = %d, want nil, 1, 3", err, attempts, s.requests.Load())
	}

	s2 := newService(t, func(w http.ResponseWriter, _ *http.Request, n int64) {
		ddbError(w, 500, "InternalServerError")
	})
	c2 := ddb(s2, awsretry.New(awsretry.Options{Strategy: fast(), Independent: true}))
	attempts = 0
	_ = retry.Do(context.Background(), outer(), func(ctx context.Context) error { attempts++; return getItem(ctx, c2) })
	if attempts != 1 || s2.requests.Load() != 3 {
		t.Fatalf("Independent: outer attempts = %d, requests = %d, want 1 and 3", attempts, s2.requests.Load())
	}
}

// The SDK's standard retryer inside the same loop multiplies: nine
// requests. This is the behaviour the one-layer rule removes.
func TestSDKStandardInsideDoMultiplies(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, _ *http.Request, _ int64) {
		ddbError(w, 500, "InternalServerError")
	})
	c := ddb(s, sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.MaxAttempts = 3
		o.Backoff = sdkretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	}))
	_ = retry.Do(context.Background(), outer(), func(ctx context.Context) error {
		err := getItem(ctx, c)
		if err != nil {
			return retry.Transient(err)
		}
		return nil
	})
	if s.requests.Load() != 9 {
		t.Fatalf("requests = %d, want 9", s.requests.Load())
	}
}
