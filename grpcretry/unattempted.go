package grpcretry

import (
	"context"
	"errors"

	"github.com/retrykit/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unattempted is a call given up before its first attempt: the *retry.Error,
// which wraps no status of the server's, and the gRPC status grpc itself
// gives such a call, so that status.Code and interceptors below the
// application (metrics, logging) read UNAVAILABLE for an open circuit, and
// CANCELLED or DEADLINE_EXCEEDED for a context done before the call,
// rather than UNKNOWN.
type unattempted struct {
	err  *retry.Error
	code codes.Code
}

func (e *unattempted) Error() string { return e.err.Error() }

// Unwrap returns the *retry.Error, for errors.As and errors.Is.
func (e *unattempted) Unwrap() error { return e.err }

// GRPCStatus returns the call's status, for status.FromError and status.Code.
func (e *unattempted) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

// statusOf returns err, a call's error (nil if it succeeded), as the caller
// receives it: a give-up before the first attempt, for a reason that has a
// gRPC status, carries that status (see unattempted); any other error is
// returned as it is.
func statusOf(err error) error {
	e, ok := err.(*retry.Error)
	if !ok || e.Attempts > 0 || e.Err != nil {
		return err
	}
	var code codes.Code
	switch {
	case errors.Is(e.Reason, retry.ErrCircuitOpen):
		code = codes.Unavailable // as a load balancer with no backend ready answers
	case errors.Is(e.Reason, context.Canceled):
		code = codes.Canceled
	case errors.Is(e.Reason, context.DeadlineExceeded), errors.Is(e.Reason, retry.ErrDeadline):
		code = codes.DeadlineExceeded
	default:
		return err
	}
	return &unattempted{e, code}
}
