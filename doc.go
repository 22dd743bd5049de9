// Package retry retries failed operations without turning an outage into a
// retry storm.
//
// Retries multiply load: when a service starts failing, every client that
// retries three times sends up to three times the requests to a service that
// could not handle one. This package keeps that multiplier near one when it
// matters. It implements the Smithy retry design: a Strategy decides whether
// and when to retry, each failure is classified into an Info, and the default
// strategy, Standard, pays for every retry from a token-bucket quota that
// drains when most attempts fail.
//
// # The loop
//
// Do and DoValue call an operation until it succeeds or the strategy gives up:
//
//	s := retry.NewStandard(retry.StandardOptions{}) // share one per service
//	err := retry.Do(ctx, s, func(ctx context.Context) error {
//		return callService(ctx)
//	})
//
// Every wait is cancellable, and a wait that could not end before the
// context's deadline is not started. When the loop gives up it returns an
// *Error that wraps the operation's last error and the reason it stopped
// (ErrMaxAttempts, ErrQuotaExhausted, ErrNotRetryable, ErrRetryAfterTooLong,
// ErrDeadline, or the context's error), so errors.Is finds either.
//
// # Deciding whether: classification
//
// Only errors known to be retryable are retried. An error says so with a
// method RetryInfo() Info anywhere in its chain, or by being wrapped with one
// of Transient, Throttled, RetryAfter, Permanent or WithInfo. Classify reads
// it, and also recognises network timeouts, failed dials and the context's
// errors. Safe errors are retried; MaybeSafe ones only when the server is at
// fault; Unsafe ones never. An error nobody classified is MaybeSafe with an
// unknown fault, so it is not retried: repeating an operation is a decision,
// not an accident.
//
// # Deciding when: backoff
//
// Exponential, Linear and Constant compute the wait before each retry.
// Exponential with FullJitter is the default; EqualJitter and
// DecorrelatedJitter are there for those who want them. Every delay function
// saturates at its cap and never overflows, whatever the retry number. A
// service's hint (Info.RetryAfter) is a minimum: a strategy never retries
// sooner than asked. A hint longer than the strategy's MaxRetryAfter is not
// obeyed by waiting: the strategy gives up at once. A server can make a client
// wait longer or stop sooner, never retry more often or wait past its limits.
//
// # Strategies
//
// Standard has the defaults of AWS retry behavior 2.1: 3 attempts; full-jitter
// exponential backoff from 50 ms (1 s for throttling errors) capped at 20 s; a
// quota of 500 tokens per scope, where a retry costs 14 (5 after throttling),
// a first-attempt success adds 1 and a successful retry refunds its cost.
// Scopes (see Scope) give each service or host its own quota; a TokenBucket
// given in StandardOptions is one quota shared by every scope and every
// strategy that holds it. Simple retries without a quota, and No never retries.
// Any type with the three methods of Strategy can replace them.
//
// The success path allocates nothing: tokens are values, and the per-request
// state that makes them single-use comes from a pool.
package retry
