package main

import (
	"context"
	"errors"
	"os"
	"time"

	avastv4 "github.com/avast/retry-go/v4"
	avastv5 "github.com/avast/retry-go/v5"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	smithytime "github.com/aws/smithy-go/time"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/retrykit/retry"
	sethvargo "github.com/sethvargo/go-retry"
)

// Scenario runs one retry scenario once, through one library, and returns
// what the library returned. Every library runs the same scenarios:
//
//   - success: the operation succeeds on its first call.
//   - two retries: the operation fails twice with an error the library
//     retries, then succeeds (3 calls), with no delay between attempts.
type Scenario func(ctx context.Context) error

// Lib is one library under test: its scenarios, built on state shared by
// every run, and a count of the operation's calls in the last run.
//
// A Lib is not safe for concurrent use: its runs share one call counter.
type Lib struct {
	// Name identifies the library in benchmark names and in the table.
	Name string
	// Success runs the success scenario once; nil if the library has no
	// row for it.
	Success Scenario
	// TwoRetries runs the two-retries scenario once; nil if the library
	// has no row for it.
	TwoRetries Scenario

	op *flaky
}

// Calls returns how many times the last scenario run called the operation.
func (l *Lib) Calls() int { return l.op.calls }

// flaky is the operation under retry. A run resets it, then each call
// fails until fail calls have failed, returning a preallocated error, and
// succeeds from then on. Calling it allocates nothing.
// both makes a library whose two scenarios differ only in how many times
// the operation fails: run makes one call.
func both(name string, f *flaky, run func(context.Context) error) Lib {
	return Lib{
		Name:       name,
		Success:    func(ctx context.Context) error { f.reset(0); return run(ctx) },
		TwoRetries: func(ctx context.Context) error { f.reset(2); return run(ctx) },
		op:         f,
	}
}

type flaky struct {
	calls int
	fail  int
	err   error
}

func (f *flaky) reset(fail int) { f.calls, f.fail = 0, fail }

func (f *flaky) call() error {
	f.calls++
	if f.calls <= f.fail {
		return f.err
	}
	return nil
}

// Libs builds every library's shared state once and returns the table of
// libraries, retrykit first. The ratios in the table are relative to the
// row named "retrykit".
func Libs() []Lib {
	return []Lib{
		retrykitLib(),
		retrykitUnmarkedLib(),
		retrykitStandardLib(),
		retrykitAdaptiveLib(),
		retrykitBudgetLib(),
		cenkaltiLib(),
		avastV4Lib(),
		avastV5Lib(),
		avastV5SharedLib(),
		sethvargoLib(),
		failsafeLib(),
		awsLib(),
	}
}

// maxAttempts is the attempt limit every library is configured with where
// it has one: the first call and two retries.
const maxAttempts = 3

// retrykitLib: the strategy is shared by every call, as it is meant to be.
// Success uses a default Standard (token-bucket quota); two retries uses a
// Simple with no delay and no quota, like most of the peers. The error is
// marked retryable once with retry.Transient.
func retrykitLib() Lib {
	f := &flaky{err: retry.Transient(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	standard := retry.NewStandard(retry.StandardOptions{})
	simple := &retry.Simple{Backoff: retry.Constant(0)}
	return Lib{
		Name: "retrykit",
		Success: func(ctx context.Context) error {
			f.reset(0)
			return retry.Do(ctx, standard, op)
		},
		TwoRetries: func(ctx context.Context) error {
			f.reset(2)
			return retry.Do(ctx, simple, op)
		},
		op: f,
	}
}

// retrykitUnmarkedLib: retrykitLib with retry.Unmarked, which leaves the
// operation's context as it is: no mark for the retrying clients inside the
// operation, and no allocation. The options are built once, as a hot path
// would hold them.
func retrykitUnmarkedLib() Lib {
	f := &flaky{err: retry.Transient(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	standard := retry.NewStandard(retry.StandardOptions{})
	simple := &retry.Simple{Backoff: retry.Constant(0)}
	unmarked := []retry.Option{retry.Unmarked()}
	return Lib{
		Name: "retrykit-unmarked",
		Success: func(ctx context.Context) error {
			f.reset(0)
			return retry.Do(ctx, standard, op, unmarked...)
		},
		TwoRetries: func(ctx context.Context) error {
			f.reset(2)
			return retry.Do(ctx, simple, op, unmarked...)
		},
		op: f,
	}
}

// retrykitStandardLib: a shared Standard strategy with no delay and an
// explicit 500-token bucket, for two retries only.
//
// Each retry takes 14 tokens from the bucket, 28 per run; the final
// successful retry refunds only its own retry's cost, 14. So each run
// leaves the bucket 14 tokens lower and, without a top-up, the quota would
// correctly drain after about 35 runs and retries would stop. The scenario
// refunds those 14 tokens after each Do, a single atomic add that stands in
// for the first-attempt successes that refill the quota in real traffic.
func retrykitStandardLib() Lib {
	f := &flaky{err: retry.Transient(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	b := retry.NewTokenBucket(retry.DefaultBucketCapacity)
	s := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(0), Bucket: b})
	return Lib{
		Name: "retrykit-standard",
		TwoRetries: func(ctx context.Context) error {
			f.reset(2)
			err := retry.Do(ctx, s, op)
			b.Refund(retry.DefaultRetryCost)
			return err
		},
		op: f,
	}
}

// retrykitAdaptiveLib: a shared Adaptive, the default of httpretry and the
// Forrst client, on success only: a service that fails two attempts of
// every three is one Adaptive rightly stops retrying (client-side
// throttling), so a run of two retries after another is no steady state.
func retrykitAdaptiveLib() Lib {
	f := &flaky{err: retry.Transient(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	s := retry.NewAdaptive(retry.AdaptiveOptions{})
	return Lib{
		Name: "retrykit-adaptive",
		Success: func(ctx context.Context) error {
			f.reset(0)
			return retry.Do(ctx, s, op)
		},
		op: f,
	}
}

// retrykitBudgetLib: a shared Standard with a retry Budget, on success only
// (two retries per request are more than a 20 % budget allows for long).
func retrykitBudgetLib() Lib {
	f := &flaky{err: retry.Transient(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	s := retry.NewStandard(retry.StandardOptions{Budget: retry.NewBudget(retry.BudgetOptions{})})
	return Lib{
		Name: "retrykit-standard+budget",
		Success: func(ctx context.Context) error {
			f.reset(0)
			return retry.Do(ctx, s, op)
		},
		op: f,
	}
}

// cenkaltiLib: backoff.Retry with a ZeroBackOff (no wait) and
// WithMaxTries(3). The stateful backoffs (ExponentialBackOff) must be made
// per call, but ZeroBackOff has no state, so the options that carry it are
// built once and shared; every error that is not a *PermanentError is
// retried.
func cenkaltiLib() Lib {
	f := &flaky{err: errors.New("transient failure")}
	op := func() (struct{}, error) { return struct{}{}, f.call() }
	opts := []backoff.RetryOption{
		backoff.WithBackOff(&backoff.ZeroBackOff{}),
		backoff.WithMaxTries(maxAttempts),
	}
	run := func(ctx context.Context) error {
		_, err := backoff.Retry(ctx, op, opts...)
		return err
	}
	return both("cenkalti-backoff-v5", f, run)
}

// avastV4Lib: retry.Do with its options given per call, as v4 is used (it
// builds its configuration on every call): 3 attempts, a fixed delay of 0,
// and the caller's context. Every error is retried unless marked
// Unrecoverable. The rest is the library's defaults.
func avastV4Lib() Lib {
	f := &flaky{err: errors.New("transient failure")}
	op := func() error { return f.call() }
	run := func(ctx context.Context) error {
		return avastv4.Do(op,
			avastv4.Attempts(maxAttempts),
			avastv4.DelayType(avastv4.FixedDelay),
			avastv4.Delay(0),
			avastv4.Context(ctx),
		)
	}
	return both("avast-retry-go-v4", f, run)
}

// avastV5SharedLib: one Retrier built once and reused for every call, the
// usage v5's README shows for high-frequency calls: 3 attempts, a fixed
// delay of 0. A v5 Retrier binds its context when it is built (the Context
// option), so this shared one runs on context.Background() and IGNORES the
// caller's ctx: cancelling the caller's context does not stop its retries.
// It is the cheapest way to call v5, but it does not do what the other rows
// do; avast-retry-go-v5 is the comparable row.
func avastV5SharedLib() Lib {
	f := &flaky{err: errors.New("transient failure")}
	op := func() error { return f.call() }
	r := avastv5.New(
		avastv5.Attempts(maxAttempts),
		avastv5.DelayType(avastv5.FixedDelay),
		avastv5.Delay(0),
	)
	return both("avast-retry-go-v5-shared", f, func(context.Context) error { return r.Do(op) }) // the caller's ctx is not used: see above
}

// avastV5Lib: a Retrier built per call with the caller's context
// (retry.New(..., retry.Context(ctx)).Do(op), the form of v5's README
// synopsis and of its Context option's documentation), so that cancelling
// the caller's context stops the retries, as it does in the other rows: 3
// attempts, a fixed delay of 0. Building the Retrier is part of each call.
func avastV5Lib() Lib {
	f := &flaky{err: errors.New("transient failure")}
	op := func() error { return f.call() }
	run := func(ctx context.Context) error {
		return avastv5.New(
			avastv5.Attempts(maxAttempts),
			avastv5.DelayType(avastv5.FixedDelay),
			avastv5.Delay(0),
			avastv5.Context(ctx),
		).Do(op)
	}
	return both("avast-retry-go-v5", f, run)
}

// sethvargoLib: retry.Do with a backoff made per call, because its
// WithMaxRetries middleware counts the retries of one call: at most 2
// retries around a stateless zero-delay base backoff that is shared
// (NewConstant refuses a zero delay). Only errors wrapped with
// RetryableError are retried; the wrapped error is made once.
func sethvargoLib() Lib {
	f := &flaky{err: sethvargo.RetryableError(errors.New("transient failure"))}
	op := func(context.Context) error { return f.call() }
	zero := sethvargo.BackoffFunc(func() (time.Duration, bool) { return 0, false })
	run := func(ctx context.Context) error {
		return sethvargo.Do(ctx, sethvargo.WithMaxRetries(maxAttempts-1, zero), op)
	}
	return both("sethvargo-go-retry", f, run)
}

// failsafeLib: one retry policy (3 attempts, no delay, every error
// handled) and one executor, both built once; each call takes a copy of the
// executor bound to the caller's context (WithContext) and runs on it.
func failsafeLib() Lib {
	f := &flaky{err: errors.New("transient failure")}
	op := func() error { return f.call() }
	policy := retrypolicy.NewBuilder[any]().WithMaxAttempts(maxAttempts).Build()
	exec := failsafe.With[any](policy)
	run := func(ctx context.Context) error { return exec.WithContext(ctx).Run(op) }
	return both("failsafe-go", f, run)
}

// awsRetryableError is a failure the SDK's default retryables accept: its
// RetryableError check finds this method with errors.As.
type awsRetryableError struct{}

func (awsRetryableError) Error() string        { return "transient failure" }
func (awsRetryableError) RetryableError() bool { return true }

// awsLib: the SDK's standard retryer (aws/retry.NewStandard), shared, with
// its default 500-token rate limiter and a zero backoff, driven by awsDo,
// which makes the per-request calls of the SDK's retry middleware.
//
// Each retry takes tokens (5, or 14 with AWS_NEW_RETRIES_2026=true) and a
// success gives back only part of them, so, as for retrykit-standard, the
// quota would correctly drain after some runs. The scenario tops the
// limiter back up after each run with one AddTokens call, which the limiter
// caps at its capacity.
func awsLib() Lib {
	f := &flaky{err: awsRetryableError{}}
	op := func(context.Context) error { return f.call() }
	limiter := ratelimit.NewTokenRateLimit(awsretry.DefaultRetryRateTokens)
	r := awsretry.NewStandard(func(o *awsretry.StandardOptions) {
		o.RateLimiter = limiter
		o.Backoff = awsretry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
	d := &awsDriver{retryer: r, new2026: os.Getenv("AWS_NEW_RETRIES_2026") == "true"}
	return Lib{
		Name: "aws-sdk-go-v2",
		Success: func(ctx context.Context) error {
			f.reset(0)
			return d.do(ctx, op)
		},
		TwoRetries: func(ctx context.Context) error {
			f.reset(2)
			err := d.do(ctx, op)
			_ = limiter.AddTokens(awsretry.DefaultRetryRateTokens)
			return err
		},
		op: f,
	}
}

// awsDriver runs an operation the way the SDK's retry middleware
// (aws/retry.Attempt.HandleFinalize and handleAttempt, v1.47.7) drives its
// retryer for one request, without the middleware's request cloning,
// tracing, metrics, logging and clock-skew handling: per attempt it takes
// an attempt token, calls the operation, releases the previous retry token
// and the attempt token with the attempt's error, and after a failure asks
// IsErrorRetryable, checks MaxAttempts, takes a retry token (the quota),
// asks RetryDelay and sleeps that long with a timer, as the SDK does.
type awsDriver struct {
	retryer *awsretry.Standard
	new2026 bool // AWS_NEW_RETRIES_2026=true, read once as the SDK's retryer would
}

func nopRelease(error) error { return nil }

func (d *awsDriver) do(ctx context.Context, op func(context.Context) error) error {
	maxAttempts := d.retryer.MaxAttempts()
	releaseRetryToken := nopRelease
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		releaseAttemptToken, err := d.retryer.GetAttemptToken(ctx)
		if err != nil {
			return err
		}

		err = op(ctx)

		if rerr := releaseRetryToken(err); rerr != nil && err != nil {
			return rerr
		}
		if !d.new2026 || attempt == 1 {
			if rerr := releaseAttemptToken(err); rerr != nil && err != nil {
				return rerr
			}
		}
		if err == nil {
			return nil
		}
		if !d.retryer.IsErrorRetryable(err) {
			return err
		}
		if attempt >= maxAttempts {
			return &awsretry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		var tokErr error
		releaseRetryToken, tokErr = d.retryer.GetRetryToken(ctx, err)
		if tokErr != nil {
			return errors.Join(err, tokErr)
		}
		n := attempt
		if d.new2026 {
			n = attempt - 1
		}
		delay, derr := d.retryer.RetryDelay(n, err)
		if derr != nil {
			return derr
		}
		if serr := smithytime.SleepWithContext(ctx, delay); serr != nil {
			return serr
		}
	}
}
