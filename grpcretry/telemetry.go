package grpcretry

import (
	"context"
	"strings"

	"github.com/retrykit/retry/internal/callinfo"
	"google.golang.org/grpc"
)

// tellRPC tells the instrumentation of the call whose attempt runs in ctx,
// if any (otelretry's, with its gRPC conventions, through
// WithRetryOptions), the call's method and target: what gRFC A96's metrics
// label each call with, and what the loop's retry.Trace is not told. A call
// without such an instrumentation pays one context lookup per attempt, and
// none while no call of the program is instrumented so (see callinfo.From).
// opts are the call's own: the method is named only if they hold
// grpc.StaticMethod(), as gRFC A66 has it. It returns the nearest sink it
// told, for the hedges to come, nil if none.
func tellRPC(ctx context.Context, method string, cc *grpc.ClientConn, opts []grpc.CallOption) callinfo.Sink {
	s := callinfo.From(ctx)
	if s == nil {
		return nil
	}
	m := ""
	for _, o := range opts {
		if _, ok := o.(grpc.StaticMethodCallOption); ok {
			m = strings.TrimPrefix(method, "/")
			break
		}
	}
	target := ""
	if cc != nil {
		target = cc.CanonicalTarget()
	}
	callinfo.TellRPC(s, m, target)
	return s
}
