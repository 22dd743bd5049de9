package awsretry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/awsretry"
)

// ended records the calls a Trace's Done saw end.
type ended struct {
	mu    sync.Mutex
	calls []endedCall
}

type endedCall struct {
	attempts int
	err      error
}

func (e *ended) trace() *retry.Trace {
	return &retry.Trace{Done: func(_ context.Context, _ string, attempts int, _ time.Duration, err error) {
		e.mu.Lock()
		e.calls = append(e.calls, endedCall{attempts, err})
		e.mu.Unlock()
	}}
}

func (e *ended) list() []endedCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]endedCall(nil), e.calls...)
}

// A client whose RetryMaxAttempts is below the strategy's (AWS_MAX_ATTEMPTS
// in the environment does it for every client): the SDK's wrapper ends the
// call once its attempts are made, without asking the Retryer for a retry.
// The call is not held for good: once it has waited a second for the
// question, the next call's start ends it, and the hooks see it end after
// its 2 attempts, the reason ErrMaxAttempts. Before, every such call stayed
// parked, and its Done never came. A call whose retry waits longer than
// that second, asked for as usual, is not taken for ended.
func TestCallTheSDKEndsWithoutAskingIsNotHeld(t *testing.T) {
	s := newService(t, failing)
	synctest.Test(t, func(t *testing.T) {
		var seen ended
		st := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(5 * time.Second)})
		r := awsretry.New(awsretry.Options{Strategy: st, RetryOptions: []retry.Option{retry.WithTrace(seen.trace())}})
		client := func(maxAttempts int) *dynamodb.Client { return ddbInBubble(s, r, maxAttempts) }
		capped := client(2)
		const calls = 4
		for i := range calls {
			before := s.requests.Load()
			if err := getItem(t.Context(), capped); err == nil || s.requests.Load()-before != 2 {
				t.Fatalf("call %d: %v after %d requests, want the SDK's give-up after 2", i+1, err, s.requests.Load()-before)
			}
			if n := awsretry.Parked(r); n != 1 {
				t.Fatalf("after call %d: %d calls parked, want 1 (its own)", i+1, n)
			}
			if got := len(seen.list()); got != i {
				t.Fatalf("after call %d: %d calls seen ended, want %d", i+1, got, i)
			}
			time.Sleep(time.Second)
		}
		// A call of the client without the cap ends the last one on its
		// start, and makes its own 3 attempts, its retries 5 s apart.
		if err := getItem(t.Context(), client(0)); !errors.Is(err, retry.ErrMaxAttempts) {
			t.Fatalf("the uncapped call: %v, want the strategy's ErrMaxAttempts", err)
		}
		if n := awsretry.Parked(r); n != 0 {
			t.Fatalf("%d calls parked after the last, want none", n)
		}
		got := seen.list()
		if len(got) != calls+1 {
			t.Fatalf("%d calls seen ended, want %d", len(got), calls+1)
		}
		for i, c := range got[:calls] {
			if c.attempts != 2 || !errors.Is(c.err, retry.ErrMaxAttempts) || !strings.Contains(c.err.Error(), "without asking") {
				t.Fatalf("capped call %d ended after %d attempts with %v, want 2 and the SDK's unasked end", i+1, c.attempts, c.err)
			}
		}
		if last := got[calls]; last.attempts != 3 || strings.Contains(last.err.Error(), "without asking") {
			t.Fatalf("the uncapped call ended after %d attempts with %v, want 3 and the strategy's refusal", last.attempts, last.err)
		}
	})
}

// A call the SDK ended without asking, followed within its second by many
// calls whose every parking is asked for: the ended call is found behind
// them all once its second is up, and none of theirs is taken for ended.
func TestCallTheSDKEndsWithoutAskingIsFoundBehindOthers(t *testing.T) {
	s := newService(t, failing)
	synctest.Test(t, func(t *testing.T) {
		var seen ended
		st := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(0), Capacity: 1 << 20})
		r := awsretry.New(awsretry.Options{Strategy: st, RetryOptions: []retry.Option{retry.WithTrace(seen.trace())}})
		client := func(maxAttempts int) *dynamodb.Client { return ddbInBubble(s, r, maxAttempts) }
		_ = getItem(t.Context(), client(1))
		const others = 100 // 3 parkings each, all asked for
		for range others {
			if err := getItem(t.Context(), client(0)); !errors.Is(err, retry.ErrMaxAttempts) {
				t.Fatalf("an uncapped call: %v, want the strategy's ErrMaxAttempts", err)
			}
		}
		if n, got := awsretry.Parked(r), len(seen.list()); n != 1 || got != others {
			t.Fatalf("within the second: %d parked, %d seen ended; want 1 and %d", n, got, others)
		}
		time.Sleep(time.Second)
		_ = getItem(t.Context(), client(0))
		got := seen.list()
		if n := awsretry.Parked(r); n != 0 || len(got) != others+2 {
			t.Fatalf("after the second: %d parked, %d seen ended; want 0 and %d", n, len(got), others+2)
		}
		unasked := 0
		for _, c := range got {
			if strings.Contains(c.err.Error(), "without asking") {
				unasked++
				if c.attempts != 1 {
					t.Fatalf("the capped call ended after %d attempts, want 1", c.attempts)
				}
			}
		}
		if unasked != 1 {
			t.Fatalf("%d calls taken for ended by the SDK, want 1", unasked)
		}
	})
}

// slowHTTP makes each request wait d before it is sent.
type slowHTTP struct {
	d  time.Duration
	hc *http.Client
}

func (s slowHTTP) Do(r *http.Request) (*http.Response, error) {
	time.Sleep(s.d)
	return s.hc.Do(r)
}

// A call whose attempt fails while the calls the SDK ended without asking
// are being ended, their hooks slow, is not taken for one of them: its
// wait for the SDK's question starts once they are done. Before, a call
// started meanwhile took it for ended after a second, and the SDK's retry
// it asked for then failed with ErrInvalidToken.
func TestCallParkedBehindSlowHooksIsNotTakenForEnded(t *testing.T) {
	s := newService(t, failing)
	synctest.Test(t, func(t *testing.T) {
		var slowed atomic.Bool
		tr := &retry.Trace{Done: func(context.Context, string, int, time.Duration, error) {
			if slowed.CompareAndSwap(false, true) {
				time.Sleep(2 * time.Second) // the first call ended: a slow hook
			}
		}}
		st := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(time.Millisecond)})
		r := awsretry.New(awsretry.Options{Strategy: st, RetryOptions: []retry.Option{retry.WithTrace(tr)}})
		client := func(maxAttempts int, hc dynamodb.HTTPClient) *dynamodb.Client {
			return dynamodb.New(dynamodb.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(s.URL), Retryer: r, HTTPClient: hc,
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: maxAttempts,
			})
		}
		_ = getItem(t.Context(), client(1, inBubble())) // A: ended by the SDK unasked, at 0 s
		time.Sleep(900 * time.Millisecond)
		before := s.requests.Load()
		done := make(chan error, 1)
		go func() { // B: its first attempt fails at 1.1 s, and ends A, whose hook takes 2 s
			done <- getItem(t.Context(), client(0, slowHTTP{200 * time.Millisecond, inBubble()}))
		}()
		time.Sleep(1300 * time.Millisecond)
		_ = getItem(t.Context(), client(1, inBubble())) // C starts while B is in A's hook
		err := <-done
		if n := s.requests.Load() - before - 1; n != 3 || !errors.Is(err, retry.ErrMaxAttempts) || strings.Contains(err.Error(), "without asking") {
			t.Fatalf("B made %d attempts and failed with %v; want its 3 and the strategy's ErrMaxAttempts", n, err)
		}
	})
}
