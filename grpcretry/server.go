package grpcretry

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/retrykit/retry"
)

// UnaryServerInterceptor marks the context of a call that says it is a retry
// (grpc-previous-rpc-attempts of 1 or more, as the client interceptors and
// grpc's own retries send) with retry.WithCallerRetries until the handler
// returns: its caller retries, so the calls the handler makes through
// retrykit (these interceptors, an httpretry.Transport, a forrst.Client)
// make one attempt for a failure they would return anyway and leave its
// retry to the caller, instead of multiplying them.
//
// What a caller claims reaches no further than that one call's own calls,
// and can only make them retry less: a missing, malformed or repeated value
// marks nothing. First attempts carry no such metadata, so the calls made
// for them retry as usual.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !resent(ctx) {
			return handler(ctx, req)
		}
		ctx, done := retry.WithCallerRetries(ctx)
		defer done()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls:
// the stream's context is marked until the handler returns.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !resent(ss.Context()) {
			return handler(srv, ss)
		}
		ctx, done := retry.WithCallerRetries(ss.Context())
		defer done()
		return handler(srv, &markedStream{ServerStream: ss, ctx: ctx})
	}
}

// markedStream is a server stream whose context carries the mark.
type markedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *markedStream) Context() context.Context { return s.ctx }

// resent reports whether the incoming call says it is a retry: one
// grpc-previous-rpc-attempts value, a whole number of at most ten digits,
// 1 or more.
func resent(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, PreviousAttemptsKey)
	if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > 10 || v[0][0] < '0' || v[0][0] > '9' {
		return false
	}
	n, err := strconv.Atoi(v[0])
	return err == nil && n >= 1
}
