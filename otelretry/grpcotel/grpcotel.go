// Package grpcotel tells an otelretry.Instrumentation made with
// WithGRPCConventions what gRFC A96's per-call metrics need and a retry.Trace
// is not told: each call's grpc.method and grpc.target (gRFC A66's
// attributes, which A96 requires), and the hedges grpcretry sends within an
// attempt (grpc.client.call.hedges). It is a package of its own so that
// package otelretry does not bring gRPC into programs that do not use it.
//
// Install its interceptor after grpcretry's, in the same chain, so that it
// runs once per attempt and per hedge, in the attempt's context:
//
//	inst := otelretry.New(otelretry.WithGRPCConventions())
//	conn, err := grpc.NewClient(target, grpc.WithDisableRetry(),
//		grpc.WithChainUnaryInterceptor(
//			grpcretry.UnaryClientInterceptor(grpcretry.WithRetryOptions(inst.Option())),
//			grpcotel.UnaryClientInterceptor(inst)))
//
// Installed before grpcretry's, it would see each call once, outside the
// call's retry loop, and tell the instrumentation nothing. Without it the
// instrumentation records grpc.method and grpc.target as otelretry.Unknown
// and sees no hedge.
//
// There is no stream interceptor: grpcretry opens a stream's first attempt
// before the stream's retry loop starts, outside the context in which the
// instrumentation keeps the call's state, so an interceptor below it would
// see only the retries of a stream. Streams record Unknown.
//
// grpc.method is the method without its leading slash
// ("grpc.health.v1.Health/Check") when the call carries grpc.StaticMethod(),
// as the code protoc-gen-go-grpc generates does, and otelretry.Unknown
// ("other") otherwise, as gRFC A66 and grpc-go's own OpenTelemetry plugin
// have it, so that arbitrary method names cannot grow the metrics without
// bound. grpc.target is the channel's canonical target
// (grpc.ClientConn.CanonicalTarget: "dns:///example.com:443").
package grpcotel

import (
	"context"
	"strconv"
	"strings"

	"github.com/retrykit/retry/grpcretry"
	"github.com/retrykit/retry/otelretry"
	"github.com/retrykit/retry/otelretry/internal/hook"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor returns the interceptor that tells in of each unary
// call's attempts and hedges. It changes nothing in the call. A nil in, or
// one that records nothing, makes an interceptor that only calls on.
func UnaryClientInterceptor(in *otelretry.Instrumentation) grpc.UnaryClientInterceptor {
	if in == nil || in.Trace() == nil {
		return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		tell(in, ctx, method, cc, opts)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// tell tells in of one call sent in ctx.
func tell(in *otelretry.Instrumentation, ctx context.Context, method string, cc *grpc.ClientConn, opts []grpc.CallOption) {
	m := otelretry.Unknown
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
	previous := 0
	if v := metadata.ValueFromOutgoingContext(ctx, grpcretry.PreviousAttemptsKey); len(v) > 0 {
		previous, _ = strconv.Atoi(v[len(v)-1])
	}
	hook.Sent(in, ctx, m, target, previous)
}
