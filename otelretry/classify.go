package otelretry

import (
	"context"
	"errors"

	"github.com/retrykit/retry"
)

// Error classes, the values of the error.type attribute: a handful of words
// read from retry.Classify, so that a metric keyed by them stays small
// whatever errors the operation returns.
const (
	ClassThrottle     = "throttle"     // the service asked the client to slow down
	ClassTimeout      = "timeout"      // no answer in time
	ClassCanceled     = "canceled"     // the caller's context was cancelled
	ClassTransient    = "transient"    // safe to repeat (retry.Safe)
	ClassServer       = "server"       // may be safe, and the server is at fault
	ClassClient       = "client"       // the request was at fault
	ClassPermanent    = "permanent"    // never to be repeated (retry.Unsafe)
	ClassUnclassified = "unclassified" // nobody said: not retried by this module's strategies
	ClassPanic        = "panic"        // the attempt panicked (a *retry.PanicError): the loop panics again
)

// errorClass names the class of err for the error.type attribute.
func errorClass(err error) (string, retry.Info) {
	if _, ok := err.(*retry.PanicError); ok { // as the loop tells it, unwrapped
		return ClassPanic, retry.Info{}
	}
	info := retry.Classify(err)
	switch {
	case info.Throttle:
		return ClassThrottle, info
	case info.Timeout, errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout, info
	case errors.Is(err, context.Canceled):
		return ClassCanceled, info
	case info.Safety == retry.Unsafe:
		return ClassPermanent, info
	case info.Safety == retry.Safe:
		return ClassTransient, info
	case info.Fault == retry.FaultServer:
		return ClassServer, info
	case info.Fault == retry.FaultClient:
		return ClassClient, info
	}
	return ClassUnclassified, info
}

// Reasons a call gave up, the values of the retry.reason attribute, one per
// documented reason of the retry module (see retry.Error).
const (
	ReasonAttempts     = "attempts"       // retry.ErrMaxAttempts
	ReasonQuota        = "quota"          // retry.ErrQuotaExhausted
	ReasonBudget       = "budget"         // retry.ErrBudgetExhausted
	ReasonDeadline     = "deadline"       // retry.ErrDeadline, or the caller's deadline passed
	ReasonNotRetryable = "not_retryable"  // retry.ErrNotRetryable
	ReasonRetryAfter   = "retry_after"    // retry.ErrRetryAfterTooLong: the server asked for too long a wait
	ReasonCanceled     = "canceled"       // the caller's context was cancelled
	ReasonInvalidToken = "invalid_token"  // retry.ErrInvalidToken
	ReasonNilOperation = "nil_operation"  // retry.ErrNilOperation
	ReasonOuterLoop    = "caller_retries" // retry.ErrOuterLoop: one attempt, the failure left to a caller that retries it
	ReasonCircuitOpen  = "circuit_open"   // retry.ErrCircuitOpen: a breaker refused the next attempt, or the first
	ReasonOther        = "other"          // an integration's own reason (a limiter, a body that cannot be sent again)
)

// giveUpReason names why a call gave up. The order matters only for a reason
// that wraps two sentinels; none of the retry module's does.
func giveUpReason(reason error) string {
	switch {
	case reason == nil:
		return ReasonOther
	case errors.Is(reason, retry.ErrMaxAttempts):
		return ReasonAttempts
	case errors.Is(reason, retry.ErrQuotaExhausted):
		return ReasonQuota
	case errors.Is(reason, retry.ErrBudgetExhausted):
		return ReasonBudget
	case errors.Is(reason, retry.ErrDeadline), errors.Is(reason, context.DeadlineExceeded):
		return ReasonDeadline
	case errors.Is(reason, retry.ErrNotRetryable):
		return ReasonNotRetryable
	case errors.Is(reason, retry.ErrRetryAfterTooLong):
		return ReasonRetryAfter
	case errors.Is(reason, context.Canceled):
		return ReasonCanceled
	case errors.Is(reason, retry.ErrInvalidToken):
		return ReasonInvalidToken
	case errors.Is(reason, retry.ErrNilOperation):
		return ReasonNilOperation
	case reason == retry.ErrOuterLoop:
		return ReasonOuterLoop
	case errors.Is(reason, retry.ErrCircuitOpen):
		return ReasonCircuitOpen
	}
	return ReasonOther
}
