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
	m, target := CallLabels(method, cc, opts)
	callinfo.TellRPC(s, m, target)
	return s
}

// CallLabels returns the labels gRFC A66 gives a call's telemetry: its
// method without the leading slash ("grpc.health.v1.Health/Check") if opts
// hold grpc.StaticMethod(), as the code protoc-gen-go-grpc generates does,
// and "" otherwise (recorded as "other"), so that arbitrary method names
// cannot grow a metric's labels without bound; and cc's canonical target
// ("dns:///example.com:443"), "" for a nil cc.
func CallLabels(method string, cc *grpc.ClientConn, opts []grpc.CallOption) (m, target string) {
	for _, o := range opts {
		if _, ok := o.(grpc.StaticMethodCallOption); ok {
			m = strings.TrimPrefix(method, "/")
			break
		}
	}
	if cc != nil {
		target = cc.CanonicalTarget()
	}
	return m, target
}
