// Package retry retries failed operations without turning an outage into a
// retry storm.
//
// Retries multiply load: when a service starts failing, every client that
// retries three times sends up to three times the requests to a service that
// could not handle one. This package keeps that multiplier near one when it
// matters. It implements the Smithy retry design: a Strategy decides whether
// and when to retry, and each failure is classified into an Info. The
// recommended strategy, Adaptive, reads the service's health in each process
// on its own; Standard pays for every retry from a token-bucket quota that
// drains when most attempts fail, as the AWS SDKs do.
//
// # The loop
//
// Do and DoValue call an operation until it succeeds or the strategy gives up:
//
//	s := retry.NewAdaptive(retry.AdaptiveOptions{}) // share one per service
//	err := retry.Do(ctx, s, func(ctx context.Context) error {
//		return retry.Transient(callService(ctx)) // or classify by type, see below
//	})
//
// Every wait is cancellable, and a wait that could not end before the
// context's deadline is not started. When the loop gives up it returns an
// *Error that wraps the operation's last error and the reason it stopped
// (ErrMaxAttempts, ErrBudgetExhausted, ErrQuotaExhausted, ErrNotRetryable,
// ErrRetryAfterTooLong, ErrDeadline, ErrOuterLoop, ErrNilOperation,
// ErrNilStrategy, ErrInvalidToken, ErrCircuitOpen, or the context's error),
// so errors.Is finds either. The doc of Error says when each is given.
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
// # Storms are made by fleets: Adaptive
//
// A retry storm is a fleet's doing: a thousand processes, each retrying
// politely, can together triple the load on a service that is already down.
// A quota per process does not stop them, because each starts full: with one
// request a second, a 500-token quota is 35 retries, more than a 20-second
// outage brings. Adaptive, the default of the HTTP and Forrst integrations,
// holds a fleet's load near what it would send without retries using what
// each process sees on its own, and keeps retrying where retrying works.
//
// What tells an outage from a brownout is whether retries succeed. So a scope's
// retries stop after 3 attempts in a row fail, whatever the traffic (an outage
// costs each process two retries), and a streak of 8 is allowed while retries
// in the scope are succeeding (a brownout that fails 30 % of attempts at random
// is retried in full). Client-side throttling after the Google SRE book refuses
// retries, per scope and across scopes, in proportion to how far the attempts
// sent exceed twice those accepted. A send-rate limiter after AWS's adaptive
// retry mode (CUBIC) slows first attempts too when the service throttles, with
// its waits bounded and its limit lifted once the throttling ends. A timeout is
// retried unless the scope's evidence says overload (half its recent attempts
// timed out, or the latency of its successes climbed), where a retry would
// double the work of a server that is already behind; one bad replica of many
// is retried around. Answers that blame the client count as accepted, and a
// server's explicit permission (Info.Allowed) lifts the refusal of a timeout.
// Each choice was measured with the retry-storm simulator of the retry command
// (retry sim), at 100, 1,000 and 10,000 clients; Budget and a Quota shared by a
// fleet (redisquota) bound retries further where a process's own signals are
// too weak.
//
// # Circuit breaking
//
// Retries decide whether to repeat an attempt; a circuit breaker decides
// whether to make one at all. A Breaker, given to Do and DoValue with
// WithBreaker, is the pattern of Michael Nygard's Release It!: when at
// least half of a scope's last 20 or more counted attempts over 10 s
// failed, by six failures more than successes unless all of them did (a
// sequential test: a window that only just reaches half is often chance),
// it opens, and calls in that scope fail at once with
// ErrCircuitOpen, the operation not called (Attempts 0 for a first attempt
// refused), instead of adding load to a service that is down, which is
// the client-side load shedding the Google SRE book recommends. After the
// time the scope takes to make five attempts (at most a second) it lets a
// probe through: its success closes the circuit, its failure opens it
// again, so that about one attempt in five probes a service that is down
// and one that is back is seen at once. It is consulted before every
// attempt, first attempts included, and counts each attempt once, by the
// same classification as retries: the service's faults and timeouts fail,
// successes succeed, and answers that blame the client, throttling and the
// caller's own cancellation count as neither, so that a breaker does not
// trip against a healthy service. Scopes have circuits of their own. A
// closed circuit costs a call a few atomic operations and no allocation.
//
// # Retry at one layer
//
// Retries that nest multiply: three attempts, each through a client that
// makes three, are nine at the bottom. So Do and DoValue, when they may
// retry, mark the context they hand their operation for each attempt (other
// loops use WithCallerRetries), and an integration that finds the mark
// (CallerRetries) makes one attempt for a failure the caller will judge
// anyway (an answer that says the service is failing), gives up with
// ErrOuterLoop, and keeps its retries for the failures the caller cannot see
// (a refused connection, a reset). The failure then goes to the caller's
// loop: an *Error with that reason classifies as its failure, and if the
// operation returns an error of its own that says nothing about retrying
// (fmt.Errorf("status %d"), say), the loop takes it as the failure it was
// left, with that failure's hints; an error that classifies itself
// (Permanent, a cancelled context) keeps its own. So an operation that falls
// back to a second call after a first one was left to it, and fails there
// with an error it did not classify, is retried as the first call's failure
// would be: mark such errors Permanent. Any other *Error is Unsafe, so a
// loop around a loop never retries a failure the inner loop retried already.
// An application's loop around a retrying http.Client therefore sends a
// service that always fails as many requests as the loop makes attempts, not
// their product.
//
// A loop that cannot retry, or does not mark (one attempt, No, Unmarked), is
// transparent to the rule: the client inside it found the caller's mark, not
// this loop's, so when that client leaves a failure to the caller, this loop
// gives up with ErrOuterLoop too, and the failure reaches the caller that
// retries it rather than ending as an outcome nobody may retry.
//
// Each attempt has a mark of its own, which ends with the attempt (returned
// or panicked): work the attempt leaves running (a background task on a
// derived context) then sees neither it nor the marks of the loops around
// it, and what that work leaves reaches no loop. The loop's hooks, which run
// between attempts, see the marks of the loops around it. A failure left to
// an attempt is what the loop reports too: its hooks, its Trace and its
// *Error get the operation's error classified as that failure. The server
// side of httpretry (Handler), the forrst Server and grpcretry's server
// interceptors mark a request that says it is a retry (the Retry-Attempt
// header), so that a service's own calls leave to its caller what the caller
// retries. Unmarked, and the integrations' Independent settings, opt out.
//
// The success path allocates nothing but the mark, one 32-byte block that
// marks up to four attempts of a call (none with Unmarked): tokens are
// values, and the per-request state that makes them single-use comes from a
// pool.
package retry
