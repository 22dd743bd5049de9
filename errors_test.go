package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestErrorClassifiesUnsafe(t *testing.T) {
	e := errors.New("op failed")
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"Err Transient", &Error{Attempts: 3, Err: Transient(e), Reason: ErrMaxAttempts}, Info{Safety: Unsafe}},
		{"Err Throttled keeps Throttle", &Error{Attempts: 2, Err: Throttled(e), Reason: ErrQuotaExhausted}, Info{Safety: Unsafe, Throttle: true}},
		{"Err server timeout", &Error{Attempts: 2, Err: WithInfo(e, Info{Safety: Safe, Timeout: true, Fault: FaultServer})},
			Info{Safety: Unsafe, Timeout: true, Fault: FaultServer}},
		{"Err nil", &Error{Attempts: 0, Reason: ErrNotRetryable}, Info{Safety: Unsafe}},
		{"wrapped", fmt.Errorf("outer: %w", &Error{Attempts: 3, Err: Transient(e), Reason: ErrMaxAttempts}), Info{Safety: Unsafe}},
		{"joined with a Transient", errors.Join(Transient(e), &Error{Attempts: 3, Err: Transient(e)}), Info{Safety: Unsafe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got != tt.want {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
			if got.Retryable() {
				t.Error("a *retry.Error is Retryable: nested loops would multiply attempts")
			}
		})
	}
	// The operation's error stays reachable.
	err := &Error{Attempts: 3, Err: Transient(e), Reason: ErrMaxAttempts}
	if !errors.Is(err, e) || !errors.Is(err, ErrMaxAttempts) {
		t.Error("errors.Is does not reach the operation's error and the reason")
	}
}

// A Permanent error is not retryable, which is not the same as unsafe to
// repeat (a 404 can be repeated harmlessly): the give-up message says the
// former.
func TestDoPermanentMessage(t *testing.T) {
	err := Do(context.Background(), NewStandard(StandardOptions{}), func(context.Context) error {
		return Permanent(errors.New("404 Not Found"))
	})
	msg := err.Error()
	if !strings.Contains(msg, "not retryable") || strings.Contains(msg, "unsafe") || !strings.Contains(msg, "404 Not Found") {
		t.Fatalf("message %q: want it to say the error is not retryable, without calling it unsafe", msg)
	}
}

// An Error reads as what happened, in the order a reader asks: attempts (one
// attempt, not "1 attempts"), why the loop stopped without its "retry: "
// prefix, and the last error; a part that is nil is left out, of the message
// and of Unwrap alike.
func TestErrorMessageAndUnwrap(t *testing.T) {
	e := errors.New("op failed")
	tests := []struct {
		err  *Error
		msg  string
		errs []error
	}{
		{&Error{Attempts: 3, Err: e, Reason: ErrMaxAttempts}, "retry: gave up after 3 attempts (attempts exhausted): op failed", []error{e, ErrMaxAttempts}},
		{&Error{Attempts: 1, Err: e, Reason: context.Canceled}, "retry: gave up after 1 attempt (context canceled): op failed", []error{e, context.Canceled}},
		{&Error{Attempts: 2, Err: e}, "retry: gave up after 2 attempts: op failed", []error{e}},
		{&Error{Reason: ErrNilOperation}, "retry: gave up after 0 attempts (nil operation)", []error{ErrNilOperation}},
		{&Error{Attempts: 1, Err: e, Reason: errUnsafe}, "retry: gave up after 1 attempt (error is not retryable: it is marked never to be retried): op failed", []error{e, errUnsafe}},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.msg {
			t.Errorf("Error() = %q, want %q", got, tt.msg)
		}
		if got := tt.err.Unwrap(); !slices.Equal(got, tt.errs) {
			t.Errorf("%q: Unwrap() = %v, want %v", tt.msg, got, tt.errs)
		}
	}
}

// The detailed refusals answer errors.Is for their sentinel, and say what
// was refused and why in terms a caller can act on.
func TestRefusalDetails(t *testing.T) {
	tests := []struct {
		err      error
		sentinel error
		msg      string
	}{
		{errNoMoreTries, ErrMaxAttempts, "retry: attempts exhausted"},
		{errMaybeSafe, ErrNotRetryable, "retry: error is not retryable: the error may not be safe to repeat and is not the server's fault"},
		{errClientFault, ErrNotRetryable, "retry: error is not retryable: the request was at fault (a client error), so it would fail again"},
		{&QuotaError{Scope: "svc", Cost: 14, Available: 3}, ErrQuotaExhausted, `retry: retry quota exhausted: retry needs 14 tokens, scope "svc" has 3`},
		{&RetryAfterError{RetryAfter: time.Hour, Max: 20 * time.Second}, ErrRetryAfterTooLong, "retry: service asked to wait too long: asked for 1h0m0s, limit is 20s"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.msg {
			t.Errorf("Error() = %q, want %q", got, tt.msg)
		}
		if !errors.Is(tt.err, tt.sentinel) || !errors.Is(fmt.Errorf("wrapped: %w", tt.err), tt.sentinel) {
			t.Errorf("%q: errors.Is(err, %v) = false", tt.msg, tt.sentinel)
		}
		for _, other := range []error{ErrMaxAttempts, ErrNotRetryable, ErrQuotaExhausted, ErrRetryAfterTooLong} {
			if other != tt.sentinel && errors.Is(tt.err, other) {
				t.Errorf("%q: errors.Is(err, %v) = true", tt.msg, other)
			}
		}
	}
}

// Classify walks into an *Error without calling its RetryInfo (so that an
// Error wrapping itself cannot recurse); the method, which callers may ask
// directly, must answer as Classify does: Unsafe, but for a failure left to
// the caller's loop, which classifies as itself.
func TestErrorRetryInfoIsClassify(t *testing.T) {
	e := errors.New("op failed")
	for _, err := range []*Error{
		{Attempts: 3, Err: Transient(e), Reason: ErrMaxAttempts},
		{Attempts: 2, Err: Throttled(RetryAfter(e, time.Second)), Reason: ErrQuotaExhausted},
		{Reason: ErrNilOperation},
		{Attempts: 1, Err: Transient(e), Reason: ErrOuterLoop},
		{Attempts: 1, Err: WithInfo(e, Info{Timeout: true, Fault: FaultServer}), Reason: ErrOuterLoop},
		{Attempts: 1, Err: &Error{Attempts: 1, Err: Transient(e), Reason: ErrOuterLoop}, Reason: ErrOuterLoop},
	} {
		if got, want := err.RetryInfo(), Classify(err); got != want {
			t.Errorf("%v: RetryInfo() = %+v, Classify = %+v", err, got, want)
		}
	}
	if got := (&Error{Attempts: 1, Err: Transient(e), Reason: ErrOuterLoop}).RetryInfo(); got.Safety != Safe {
		t.Errorf("a failure left to the caller: RetryInfo() = %+v, want it Safe as its error", got)
	}
}
