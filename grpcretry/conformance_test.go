package grpcretry

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest/conformance"
)

// TestConformance runs the contract every integration keeps against the
// unary interceptor, in real time: a grpc.ClientConn cannot live in a
// synctest bubble. It holds what were
// TestClientLeavesAnsweredFailuresToTheCaller,
// TestApplicationLoopAroundTheInterceptorDoesNotMultiply,
// TestLeftFailureCrossesALibraryLoopThatCannotRetry,
// TestZeroConfigRetriesADeadlineExceededWithPushback,
// TestZeroConfigNotFoundsDoNotStopTheRetryOfUnavailable,
// TestAllowedTimeoutIsRetriedWhereOthersAreNot and the unary half of
// TestBreakerUnavailable.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Integration{Serve: serveScript})
}

// scriptServer is the test service answering unary calls as a script says.
type scriptServer struct {
	srv  *server
	addr string
}

func serveScript(t *testing.T, script func(int) conformance.Answer) conformance.Server {
	srv := &server{}
	srv.unary = func(ctx context.Context, attempt int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		switch script(int(srv.calls.Load())) {
		case conformance.OK:
			return ok(attempt)
		case conformance.Unavailable:
			return nil, status.Error(codes.Unavailable, "down")
		case conformance.Timeout:
			return nil, status.Error(codes.DeadlineExceeded, "slow")
		case conformance.AllowedTimeout:
			grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "0"))
			return nil, status.Error(codes.DeadlineExceeded, "slow, try again")
		case conformance.ClientFault:
			return nil, status.Error(codes.NotFound, "no such item")
		}
		return nil, status.Error(codes.Unimplemented, "unscripted")
	}
	return scriptServer{srv, serve(t, srv)}
}

func (s scriptServer) Calls() int    { return int(s.srv.calls.Load()) }
func (s scriptServer) Scope() string { return s.addr } // cc.Target(), the default scope

// Client is a unary call of an idempotent method through the interceptor.
func (s scriptServer) Client(t *testing.T, c conformance.Config) conformance.Call {
	opts := []Option{WithIdempotentMethods(method)}
	if c.Strategy != nil {
		opts = append(opts, WithStrategy(c.Strategy))
	}
	if c.Independent {
		opts = append(opts, WithIndependentRetries())
	}
	if c.Breaker != nil {
		opts = append(opts, WithBreaker(c.Breaker))
	}
	cl := dial(t, s.addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)))
	return func(ctx context.Context) conformance.Outcome {
		r, err := cl.UnaryCall(ctx, &testpb.SimpleRequest{})
		if err == nil {
			// The body is the attempt's number, from grpc-previous-rpc-attempts.
			n, convErr := strconv.Atoi(string(r.GetPayload().GetBody()))
			if convErr != nil {
				return conformance.Outcome{Answer: conformance.Other, Attempts: -1}
			}
			return conformance.Outcome{Answer: conformance.OK, Attempts: n}
		}
		out := conformance.Outcome{Err: err, Attempts: -1, Answer: conformance.Other}
		var re *retry.Error
		if errors.As(err, &re) {
			out.Attempts, out.Reason = re.Attempts, re.Reason
		}
		switch code := status.Code(err); {
		case re != nil && re.Attempts == 0:
			out.Answer = conformance.None // refused before any attempt
		case code == codes.Unavailable:
			out.Answer = conformance.Unavailable
		case code == codes.DeadlineExceeded:
			out.Answer = conformance.Timeout
		case code == codes.NotFound:
			out.Answer = conformance.ClientFault
		}
		return out
	}
}
