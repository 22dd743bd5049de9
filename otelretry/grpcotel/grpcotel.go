// Package grpcotel tells an otelretry.Instrumentation made with
// WithGRPCConventions the grpc.method and grpc.target (gRFC A66's
// attributes, which gRFC A96 requires) of gRPC calls made inside a retry
// loop that grpcretry does not run: an application's own retry.Do around a
// gRPC client without grpcretry's interceptors.
//
// grpcretry's interceptors need no help: given the instrumentation's Option,
// they tell it each call's method and target and each hedge themselves, for
// unary calls, hedged calls and streams alike, and one interceptor gives
// every A96 label:
//
//	inst := otelretry.New(otelretry.WithGRPCConventions())
//	conn, err := grpc.NewClient(target, grpc.WithDisableRetry(),
//		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(grpcretry.WithRetryOptions(inst.Option()))),
//		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(grpcretry.WithRetryOptions(inst.Option()))))
//
// Programs that also chain this package's interceptor below grpcretry's, as
// this package once asked, keep working: once grpcretry has told a call's
// state, what this interceptor tells of the same call is not counted again.
//
// For the calls of an application's own loop, install the interceptor on the
// channel; the loop's attempts run in contexts that carry the call's state:
//
//	inst := otelretry.New(otelretry.WithGRPCConventions())
//	conn, err := grpc.NewClient(target, grpc.WithUnaryInterceptor(grpcotel.UnaryClientInterceptor(inst)))
//	...
//	err = retry.Do(ctx, s, op, inst.Option()) // op calls through conn with the ctx it is given
//
// It sees no hedges there (only grpcretry hedges), and there is no stream
// interceptor.
//
// grpc.method is the method without its leading slash
// ("grpc.health.v1.Health/Check") when the call carries grpc.StaticMethod(),
// as the code protoc-gen-go-grpc generates does, and otelretry.Unknown
// ("other") otherwise, as gRFC A66 and grpc-go's own OpenTelemetry plugin
// have it, so that arbitrary method names cannot grow the metrics without
// bound. grpc.target is the channel's canonical target
// (grpc.ClientConn.CanonicalTarget: "dns:///example.com:443"). It is a
// package of its own so that package otelretry does not bring gRPC into
// programs that do not use it.
package grpcotel

import (
	"context"
	"strconv"

	"github.com/retrykit/retry/grpcretry"
	"github.com/retrykit/retry/otelretry"
	"github.com/retrykit/retry/otelretry/internal/hook"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor returns the interceptor that tells in of each unary
// call it sends in the context of an attempt of one of in's calls: its
// method and target, and whether it is a hedge (its
// grpc-previous-rpc-attempts header counts at least as many attempts before
// it as the loop's attempt number), unless grpcretry told the call's state
// itself. It changes nothing in the call. A nil in, or
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
	m, target := grpcretry.CallLabels(method, cc, opts)
	if m == "" {
		m = otelretry.Unknown
	}
	previous := 0
	if v := metadata.ValueFromOutgoingContext(ctx, grpcretry.PreviousAttemptsKey); len(v) > 0 {
		previous, _ = strconv.Atoi(v[len(v)-1])
	}
	hook.Sent(in, ctx, m, target, previous)
}
