// Package hook joins package otelretry and its gRPC companion, package
// grpcotel, without an exported method on otelretry.Instrumentation that
// only grpcotel may call.
package hook

import "context"

// Sent is set by package otelretry when it is initialised, before any
// package that imports it can call it: it tells in, an
// *otelretry.Instrumentation, of one gRPC call sent in ctx, the context of
// an attempt of one of its calls, with its grpc.method and grpc.target and
// the number of attempts its grpc-previous-rpc-attempts header says came
// before it (0 without one).
var Sent func(in any, ctx context.Context, method, target string, previous int)
