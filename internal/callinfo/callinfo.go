// Package callinfo carries what a transport knows of a call, and a
// retry.Trace is not told, from the transport to the instrumentation that
// follows the call, through the call's context: a gRPC call's method and
// target, and the hedges sent within one attempt of its loop (what gRFC
// A96's metrics need). grpcretry tells; otelretry listens. It is internal to
// the root module so that neither of those modules imports the other, and
// so that package retry's API does not grow for what only they share.
//
// An instrumentation adds its Sink to the context its retry.Trace's
// CallStart returns; the transport finds the sinks in the context of each
// attempt, and tells them. A call made inside another's attempt (a
// grpcretry call inside an application's instrumented retry.Do) tells the
// enclosing call's sink too: the send happened during both calls.
package callinfo

import (
	"context"
	"sync/atomic"
)

// A Sink is told of the sends of one call. Its methods may be called from
// several goroutines at once: hedges are sent from goroutines of their own.
type Sink interface {
	// RPC tells the call's gRPC method and target. method is the full
	// method without its leading slash ("grpc.health.v1.Health/Check")
	// when it is known in advance (the call carries grpc.StaticMethod, as
	// generated code's calls do), "" otherwise: gRFC A66 records an
	// arbitrary method name as "other", lest the metrics grow without
	// bound. target is the channel's canonical target ("dns:///host:443").
	// Each attempt tells it again.
	RPC(method, target string)
	// Hedge tells that a hedge was sent: a copy of the attempt under way,
	// sent while that attempt was in flight (grpcretry's WithHedging).
	Hedge()
	// Outer returns the sink that ctx held when this one was added to it
	// (From(ctx) then), nil if none: that of an enclosing call, or of
	// another instrumentation of the same call.
	Outer() Sink
}

// key is the context key of the nearest sink. The sinks further out are
// reached through Outer, so that one lookup finds them all.
type key struct{}

// used is set by the first With. Until then no context carries a sink, and
// From answers without walking the context: a program that instruments no
// gRPC call pays an atomic load per attempt, not a lookup.
var used atomic.Bool

// With returns a context derived from ctx that carries s, whose Outer must
// return From(ctx).
func With(ctx context.Context, s Sink) context.Context {
	if !used.Load() {
		used.Store(true)
	}
	return context.WithValue(ctx, key{}, s)
}

// From returns the nearest sink ctx carries, nil if none; the others are
// its Outer, their Outer, and so on.
func From(ctx context.Context) Sink {
	if !used.Load() {
		return nil
	}
	s, _ := ctx.Value(key{}).(Sink)
	return s
}

// TellRPC tells s, and every sink outside it, the call's method and target
// (see Sink.RPC).
func TellRPC(s Sink, method, target string) {
	for ; s != nil; s = s.Outer() {
		s.RPC(method, target)
	}
}

// TellHedge tells s, and every sink outside it, of a hedge (see
// Sink.Hedge).
func TellHedge(s Sink) {
	for ; s != nil; s = s.Outer() {
		s.Hedge()
	}
}
