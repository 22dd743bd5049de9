package retry

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Reasons a strategy refuses a retry, and reasons the request loop stops.
// Test for them with errors.Is: the errors returned wrap them with details.
var (
	// ErrMaxAttempts: the request has used all the attempts it is allowed.
	ErrMaxAttempts = errors.New("retry: attempts exhausted")
	// ErrQuotaExhausted: the retry quota cannot pay for another retry.
	ErrQuotaExhausted = errors.New("retry: retry quota exhausted")
	// ErrNotRetryable: the error may not be retried (it is Unsafe, or MaybeSafe
	// without a server fault).
	ErrNotRetryable = errors.New("retry: error is not retryable")
	// ErrInvalidToken: the token was spent before or comes from another strategy.
	ErrInvalidToken = errors.New("retry: invalid token")
	// ErrRetryAfterTooLong: the service asked for a wait longer than the
	// strategy's MaxRetryAfter, so the strategy gives up instead of waiting.
	ErrRetryAfterTooLong = errors.New("retry: service asked to wait too long")
	// ErrDeadline: the next attempt could not start before the context's
	// deadline, so the loop returned at once instead of waiting in vain
	// (with LongPoll, at the deadline, so that a poller cannot spin).
	ErrDeadline = errors.New("retry: next attempt would start after the deadline")
	// ErrNilOperation: Do or DoValue was given a nil operation, so no attempt
	// was made. It is the Reason of the *Error they return, instead of a panic
	// deep inside the loop.
	ErrNilOperation = errors.New("retry: nil operation")
	// ErrNilStrategy: Do or DoValue was given a nil Strategy, so no attempt
	// was made: a call that silently made one attempt would hide a strategy
	// never set, and a fresh Adaptive per call would have no health to go
	// by. Its text says what to pass.
	ErrNilStrategy = errors.New("retry: nil strategy: pass one, such as a retry.NewAdaptive shared by the calls to a service, or &retry.No{} for one attempt")
)

// Refusals with their details fixed in advance, so that refusing costs no
// allocation.
var (
	errUnsafe       = &refusal{ErrNotRetryable, "it is marked never to be retried"}
	errMaybeSafe    = &refusal{ErrNotRetryable, "the error may not be safe to repeat and is not the server's fault"}
	errClientFault  = &refusal{ErrNotRetryable, "the request was at fault (a client error), so it would fail again"}
	errNilError     = &refusal{ErrNotRetryable, "there is no error to retry (nil)"}
	errNoMoreTries  = &refusal{ErrMaxAttempts, ""}
	errForeignToken = &refusal{ErrInvalidToken, "the token was spent before or comes from another strategy"}
)

// refusal is a sentinel with an explanation.
type refusal struct {
	sentinel error
	detail   string
}

func (r *refusal) Error() string {
	if r.detail == "" {
		return r.sentinel.Error()
	}
	return r.sentinel.Error() + ": " + r.detail
}

func (r *refusal) Unwrap() error { return r.sentinel }

// QuotaError reports that a retry was refused because the retry quota could
// not pay for it. errors.Is(err, ErrQuotaExhausted) is true for it.
type QuotaError struct {
	Scope     string        // the scope whose bucket was short
	Cost      int           // tokens the retry needed
	Available int           // tokens the bucket held
	Delay     time.Duration // the backoff the retry would have waited; LongPoll waits it
}

// Error says how many tokens the retry needed and how many the scope had.
func (e *QuotaError) Error() string {
	return ErrQuotaExhausted.Error() + ": retry needs " + strconv.Itoa(e.Cost) + " tokens, scope " +
		strconv.Quote(e.Scope) + " has " + strconv.Itoa(e.Available)
}

// Is reports whether target is ErrQuotaExhausted.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExhausted }

// RetryAfterError reports that the service asked for a wait longer than the
// strategy allows. errors.Is(err, ErrRetryAfterTooLong) is true for it.
type RetryAfterError struct {
	RetryAfter time.Duration // what the service asked for
	Max        time.Duration // the strategy's MaxRetryAfter
}

// Error says what the service asked for and what the limit is.
func (e *RetryAfterError) Error() string {
	return ErrRetryAfterTooLong.Error() + ": asked for " + e.RetryAfter.String() + ", limit is " + e.Max.String()
}

// Is reports whether target is ErrRetryAfterTooLong.
func (e *RetryAfterError) Is(target error) bool { return target == ErrRetryAfterTooLong }

// Error is the error Do and DoValue return when they give up. It wraps both the
// operation's last error and the reason retrying stopped, so that errors.Is and
// errors.As reach either:
//
//	errors.Is(err, sql.ErrConnDone)       // the operation's error
//	errors.Is(err, retry.ErrQuotaExhausted) // why the loop stopped
//
// The Reason wraps one of: ErrMaxAttempts; ErrBudgetExhausted, the usual
// reason of the default strategy, Adaptive (its failure streak, client-side
// throttling or throttled send-rate limiter, or a Budget, refused the retry;
// the message says which); ErrQuotaExhausted (a *QuotaError); ErrNotRetryable
// (also a timeout Adaptive judged a sign of overload); ErrRetryAfterTooLong (a
// *RetryAfterError); ErrDeadline; ErrOuterLoop (left to the caller's retries);
// ErrNilOperation; ErrNilStrategy (no attempt: pass a strategy); ErrInvalidToken;
// ErrCircuitOpen (a Breaker refused the next attempt, or the first: then
// Attempts is 0); or the context's error.
//
// An Error classifies itself as Unsafe, so that a retry loop around another one
// does not multiply the attempts: retry at one layer only. One whose Reason is
// ErrOuterLoop classifies as its failure, for the caller's loop to retry.
type Error struct {
	Attempts int   // attempts made
	Err      error // the operation's last error; nil if no attempt was made
	Reason   error // why retrying stopped
}

// Error reads "retry: gave up after N attempts (reason): last error".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: gave up after ")
	b.WriteString(strconv.Itoa(e.Attempts))
	if e.Attempts == 1 {
		b.WriteString(" attempt")
	} else {
		b.WriteString(" attempts")
	}
	if e.Reason != nil {
		b.WriteString(" (")
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), "retry: "))
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the operation's last error and the reason.
func (e *Error) Unwrap() []error {
	switch {
	case e.Err == nil:
		return []error{e.Reason}
	case e.Reason == nil:
		return []error{e.Err}
	}
	return []error{e.Err, e.Reason}
}

// RetryInfo reports the Error as Unsafe: it is the outcome of a whole retry
// loop, and retrying it again would multiply the load on the service. An
// Error whose Reason is ErrOuterLoop is the exception: that loop made one
// attempt and left the failure to its caller, so it classifies as its last
// error.
func (e *Error) RetryInfo() Info {
	info := Classify(e.Err)
	if e.Reason != ErrOuterLoop {
		info.Safety = Unsafe
	}
	return info
}
