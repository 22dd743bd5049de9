// Package awsretry drives the retries of the AWS SDK for Go v2 with
// retrykit: a Retryer (aws.RetryerV2) whose every decision is that of a
// retry.Strategy, a retry.Breaker and this package's classification of the
// SDK's errors, while the SDK's own loop makes the attempts and waits.
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer {
//		return awsretry.New(awsretry.Options{})
//	}))
//
// The contract:
//
//   - The SDK makes the attempts and sleeps; the Retryer decides. Before a
//     call's first attempt it consults the breaker and takes the
//     strategy's initial token (and waits the send-rate limiter's delay,
//     if retry.Adaptive imposes one after throttling, as the SDK's
//     adaptive mode does there); after a failure GetRetryToken asks the
//     strategy, and RetryDelay returns the wait it granted, never shorter
//     than the service's x-amz-retry-after or Retry-After.
//   - Classification (see Classify): throttles, the service's failures,
//     refused and reset connections and timeouts are retried as the
//     strategy allows; answered client faults are not, and count as
//     accepts (the service is at work); the caller's cancellation counts
//     as nothing.
//   - One layer: inside a loop that retries the call itself (retry.Do, or
//     retry.WithCallerRetries), an answered failure makes one attempt and
//     is left to the caller with retry.ErrOuterLoop, so that three outer
//     attempts reach AWS three times, not nine. Failures that came with no
//     answer keep the SDK's retries. Options.Independent turns this off.
//   - The default strategy, retry.NewAdaptive, has no token quota: a
//     success never fails for want of a token, and an outage costs each
//     client its first failing call's retries and no more. A retry the
//     service answered with a client fault gives its cost back to a
//     quota, if the strategy has one (aws/aws-sdk-go-v2#3186).
//   - With a Breaker, an open circuit fails the call at once, with an
//     error that wraps retry.ErrCircuitOpen, and sends nothing. A retry's
//     leave is taken when it is granted, before its wait: the SDK gives a
//     retryer no place after the wait where a refusal could hand the
//     strategy's token back.
//   - A call that polls (SQS's ReceiveMessage, and the other operations
//     LongPolling names, or those Options.LongPoll names) is not let
//     return at once when a retry or an attempt is refused, as
//     retry.LongPoll says for retry.Do: it first waits the backoff the
//     quota refused, or until the breaker may let an attempt through
//     (retry.Breaker's RefusedFor), or, for a retry whose wait would end
//     past the deadline, until the deadline; never past it, so that a
//     consumer polling in a loop cannot spin against a failing queue.
//   - When the Retryer stops retrying, the SDK's error joins the attempt's
//     error with a *retry.Error whose Reason says why: errors.Is finds
//     retry.ErrMaxAttempts, retry.ErrBudgetExhausted, retry.ErrCircuitOpen
//     and the others, and retry.Classify reads it as retry.Do's loop would.
//
// RateLimiter is for those who keep the SDK's own retryers: it gives them a
// retry.Quota, such as a fleet's from redisquota, as their retry quota.
//
// Hooks and Traces among Options.RetryOptions (retry.OnAttemptFailed,
// BeforeRetry, OnRetry, OnGiveUp, Log, WithTrace, such as otelretry's) see
// every SDK attempt as they would an attempt of retry.Do, in Do's order
// (see retry.TraceOf): CallStart once before the first attempt,
// AttemptStart and AttemptDone around each attempt, Retry when a retry is
// granted, GiveUp and Done when the call ends, Done with the attempts made
// and the waits granted. A BeforeRetry that refuses stops the SDK's retry,
// its refusal the Reason of the call's error. What differs, because the
// SDK hands a retryer no context to return and no moment after a retry's
// wait: the contexts CallStart and AttemptStart return reach the later
// hooks of the call, not the SDK's attempt (a span they start is not the
// parent of the SDK's own); a retry's AttemptStart is told when the retry
// is granted, before its wait, not after it. A hook that panics leaves
// nothing held: the panic reaches the SDK's caller, and a retry that will
// not be made gives back its token and its breaker ticket. Nor does a
// caller who gives up during the SDK's wait before a retry, after which
// the SDK tells a retryer nothing: the Retryer watches the context, hands
// the retry's token and ticket back, and tells the hooks that the retry
// they saw start ended with the caller's error, and the call with it.
//
// The SDK's attempt number reaches a retryer only through its own Standard
// retryer, which GetAttemptToken consults to tell a first attempt from a
// retry: the SDK keeps it under a key of its own, and writes the
// Amz-Sdk-Request header only after GetAttemptToken, so no public function
// reads it, and no context value the SDK makes public tells one call's
// attempts from another's. Should the SDK change, every retry test of this
// package fails. The strategy bounds the attempts (MaxAttempts returns 0): set them
// in the strategy, not with the client's RetryMaxAttempts (nor
// AWS_MAX_ATTEMPTS, nor max_attempts in the shared config). Set below the
// strategy's bound, it makes the SDK end a call without asking the Retryer
// for the retry: the Retryer takes the call for ended once it has waited a
// second for the question, when the next call starts, and only then are
// the strategy told of its last failure and the hooks of its end (their
// reason wraps retry.ErrMaxAttempts).
package awsretry
