package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// The Standard strategy retries errors marked as retryable, with jittered
// exponential backoff and a retry quota. Share one strategy per service.
func ExampleDo() {
	s := retry.NewStandard(retry.StandardOptions{
		Backoff: retry.Constant(time.Millisecond), // keep the example fast
	})
	attempts := 0
	err := retry.Do(context.Background(), s, func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return retry.Transient(errors.New("connection reset"))
		}
		return nil
	})
	fmt.Println(attempts, err)
	// Output: 3 <nil>
}

// When the loop gives up, its error wraps both the operation's last error and
// the reason it stopped.
func ExampleDo_givingUp() {
	errUnavailable := errors.New("service unavailable")
	err := retry.Do(context.Background(), &retry.Simple{Backoff: retry.Constant(0)},
		func(ctx context.Context) error { return retry.Transient(errUnavailable) })

	var re *retry.Error
	fmt.Println(errors.Is(err, errUnavailable), errors.Is(err, retry.ErrMaxAttempts))
	fmt.Println(errors.As(err, &re), re.Attempts)
	fmt.Println(err)
	// Output:
	// true true
	// true 3
	// retry: gave up after 3 attempts (attempts exhausted): service unavailable
}

func ExampleDoValue() {
	s := &retry.Simple{Backoff: retry.Constant(0)}
	calls := 0
	balance, err := retry.DoValue(context.Background(), s, func(ctx context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, retry.Throttled(errors.New("slow down"))
		}
		return 1250, nil
	}, retry.AttemptTimeout(2*time.Second))
	fmt.Println(balance, err, calls)
	// Output: 1250 <nil> 2
}

// An error type classifies itself with a RetryInfo method; Classify finds it
// anywhere in a chain of wrapped errors.
type statusError struct {
	code       int
	retryAfter time.Duration
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d", e.code) }

func (e *statusError) RetryInfo() retry.Info {
	switch {
	case e.code == 429:
		return retry.Info{Safety: retry.Safe, Throttle: true, RetryAfter: e.retryAfter, Fault: retry.FaultClient}
	case e.code >= 500:
		return retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer}
	}
	return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
}

func Example_classifiedError() {
	for _, err := range []error{
		fmt.Errorf("get /users: %w", &statusError{code: 503}),
		fmt.Errorf("get /users: %w", &statusError{code: 429, retryAfter: 2 * time.Second}),
		fmt.Errorf("get /users: %w", &statusError{code: 404}),
	} {
		info := retry.Classify(err)
		fmt.Printf("%v: retryable=%v throttle=%v retry-after=%v\n", err, info.Retryable(), info.Throttle, info.RetryAfter)
	}
	// Output:
	// get /users: status 503: retryable=true throttle=false retry-after=0s
	// get /users: status 429: retryable=true throttle=true retry-after=2s
	// get /users: status 404: retryable=false throttle=false retry-after=0s
}

// One TokenBucket given to several strategies is one retry quota for all of
// them: when the service fails for every client in the process, retries stop
// for all of them together.
func Example_sharedQuota() {
	quota := retry.NewTokenBucket(28) // two retries' worth
	users := retry.NewStandard(retry.StandardOptions{Bucket: quota, Backoff: retry.Constant(0)})
	orders := retry.NewStandard(retry.StandardOptions{Bucket: quota, Backoff: retry.Constant(0)})

	down := func(ctx context.Context) error { return retry.Transient(errors.New("503")) }
	fmt.Println(retry.Do(context.Background(), users, down)) // pays for two retries
	fmt.Println(retry.Do(context.Background(), orders, down))
	fmt.Println("tokens left:", quota.Available())
	// Output:
	// retry: gave up after 3 attempts (attempts exhausted): 503
	// retry: gave up after 1 attempt (retry quota exhausted: retry needs 14 tokens, scope "" has 0): 503
	// tokens left: 0
}

// budget is a custom Strategy: it wraps another and allows retries only while
// they stay under a tenth of first attempts, as Google's SRE book advises.
type budget struct {
	retry.Strategy
	requests, retries int // a real one would use atomics and decay
}

var errBudget = fmt.Errorf("retry budget spent: %w", retry.ErrQuotaExhausted)

func (b *budget) AcquireInitialToken(scope string) (retry.Token, error) {
	b.requests++
	return b.Strategy.AcquireInitialToken(scope)
}

func (b *budget) RefreshToken(t retry.Token, err error) (retry.Token, error) {
	if (b.retries+1)*10 > b.requests {
		// Spend the token with a refusal so the inner strategy ends the request.
		_, _ = b.Strategy.RefreshToken(t, retry.Permanent(err))
		return retry.Token{}, errBudget
	}
	next, rerr := b.Strategy.RefreshToken(t, err)
	if rerr == nil {
		b.retries++
	}
	return next, rerr
}

func Example_customStrategy() {
	s := &budget{Strategy: &retry.Simple{Backoff: retry.Constant(0)}}
	failing := func(ctx context.Context) error { return retry.Transient(errors.New("timeout")) }
	attempts := 0
	for range 20 {
		_ = retry.Do(context.Background(), s, failing,
			retry.OnAttemptFailed(func(context.Context, int, error) { attempts++ }))
	}
	fmt.Printf("%d requests, %d attempts, %d retries\n", s.requests, attempts, s.retries)
	// Output: 20 requests, 22 attempts, 2 retries
}

// A client that retries on its own, used inside a loop that retries too: the
// loop marks its attempts, so the client makes one attempt for a failure the
// loop will judge anyway and hands it up (ErrOuterLoop). The service sees 3
// requests, not 3 × 3, though the loop's operation returns an error of its
// own.
func ExampleCallerRetries() {
	requests := 0
	noWait := &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}
	// client stands for a retrying client: httpretry.Transport, the Forrst
	// client and the gRPC interceptors apply this rule themselves.
	client := func(ctx context.Context) error {
		return retry.Do(ctx, noWait, func(context.Context) error {
			requests++
			return retry.Transient(errors.New("503 Service Unavailable"))
		}, retry.BeforeRetry(func(ctx context.Context, _ int, _ error) error {
			if retry.CallerRetries(ctx) {
				return retry.ErrOuterLoop // the caller retries this failure
			}
			return nil
		}))
	}
	err := retry.Do(context.Background(), noWait, func(ctx context.Context) error {
		if err := client(ctx); err != nil {
			return fmt.Errorf("loading the order failed: %v", err)
		}
		return nil
	})
	fmt.Println(requests, "requests")
	fmt.Println(err)
	// Output:
	// 3 requests
	// retry: gave up after 3 attempts (attempts exhausted): loading the order failed: retry: gave up after 1 attempt (left to the caller's retries): 503 Service Unavailable
}

// A job queue keeps a job's retry state in its own store between attempts,
// where no token can live, and asks Next when to run the job again.
func ExampleSimple_Next() {
	type job struct {
		retries int           // retries made so far
		wait    time.Duration // the wait before the last attempt
	}
	policy := &retry.Simple{MaxAttempts: 4, Backoff: retry.Exponential{Base: time.Second, Max: time.Minute, Jitter: retry.NoJitter}}
	j := job{}
	for {
		failure := retry.Transient(errors.New("upstream unavailable")) // what the job's attempt returned
		wait, err := policy.Next(j.retries, j.wait, failure)
		if err != nil {
			fmt.Println("giving up:", errors.Is(err, retry.ErrMaxAttempts))
			break
		}
		j = job{retries: j.retries + 1, wait: wait} // stored with the job, run again after wait
		fmt.Println("retry", j.retries, "in", wait)
	}
	// Output:
	// retry 1 in 1s
	// retry 2 in 2s
	// retry 3 in 4s
	// giving up: true
}
