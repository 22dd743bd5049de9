package otelretry_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestInnerInstrumentationLeavesOuterSpans: a call instrumented for metrics
// only, made in a traced outer call's second attempt, does not end that
// attempt's span. Every instrumentation used to find attempt spans under one
// context key, matched by attempt number: the inner call's second attempt
// ended the outer's second attempt's span, long before that attempt ended
// (and so with status Unset although it failed).
func TestInnerInstrumentationLeavesOuterSpans(t *testing.T) {
	r := newRig(t)
	outer := r.inst()
	inner := otelretry.New(otelretry.WithTracerProvider(tracenoop.NewTracerProvider()), otelretry.WithMeterProvider(r.mp))
	ctx, span := r.caller(context.Background())
	s := &retry.Simple{Backoff: retry.Constant(0)}
	outerN := 0
	var endedByInner []sdktrace.ReadOnlySpan
	err := retry.Do(ctx, s, func(ctx context.Context) error {
		outerN++
		if outerN == 2 {
			innerN := 0
			_ = retry.Do(ctx, s, func(context.Context) error {
				if innerN++; innerN == 1 {
					return retry.Transient(errBoom)
				}
				return nil
			}, retry.Scope("inner"), inner.Option())
			endedByInner = endedAttempt(r, "2") // the outer attempt goes on after the inner call
		}
		if outerN < 3 {
			return retry.Transient(errBoom)
		}
		return nil
	}, retry.Scope("outer"), outer.Option())
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want the outer call's 2", len(attempts))
	}
	second := attempts[0]
	if attr(second, "retry.attempt") != "2" {
		t.Fatalf("the first span to end is attempt %s's, want attempt 2's", attr(second, "retry.attempt"))
	}
	if len(endedByInner) != 0 {
		t.Errorf("the outer attempt 2's span ended with the inner call, before the attempt did")
	}
	if st := second.Status(); st.Code != codes.Error {
		t.Errorf("the outer attempt 2 failed, but its span's status is %v", st)
	}
}

// transparentErr is an attempt that never left the client, as grpcretry's
// errors say.
type transparentErr struct{}

func (transparentErr) Error() string          { return "not sent" }
func (transparentErr) TransparentRetry() bool { return true }
func (transparentErr) RetryInfo() retry.Info  { return retry.Info{Safety: retry.Safe} }

// TestInnerInstrumentationLeavesOuterCounts: an inner call's transparent
// retry, seen by another instrumentation, is not counted in the outer call's
// gRPC metrics. The per-call state used to sit under one key for all
// instrumentations: the inner one counted its retry there, and the outer
// call recorded a transparent retry and one retry too few.
func TestInnerInstrumentationLeavesOuterCounts(t *testing.T) {
	r := newRig(t)
	outer := r.inst(otelretry.WithGRPCConventions())
	inner := otelretry.New(otelretry.WithTracerProvider(tracenoop.NewTracerProvider()), otelretry.WithMeterProvider(metricnoop.NewMeterProvider()))
	inner2 := r.inst() // with a tracer and a meter, no gRPC conventions
	s := &retry.Simple{Backoff: retry.Constant(0)}
	outerN := 0
	err := retry.Do(context.Background(), s, func(ctx context.Context) error {
		if outerN++; outerN == 2 {
			for _, in := range []*otelretry.Instrumentation{inner, inner2} {
				innerN := 0
				_ = retry.Do(ctx, s, func(context.Context) error {
					if innerN++; innerN == 1 {
						return transparentErr{}
					}
					return nil
				}, retry.Scope("inner"), in.Option())
			}
		}
		if outerN < 3 {
			return retry.Transient(errBoom)
		}
		return nil
	}, retry.Scope("outer"), outer.Option())
	if err != nil {
		t.Fatal(err)
	}
	m := r.metrics(t)
	const call = "{grpc.method=other,grpc.target=other,retry.outcome=success,retry.scope=outer}"
	if got := m["grpc.client.call.retries"+call]; got != "1/2" {
		t.Errorf("outer call's retries %q, want 1/2; metrics %v", got, m)
	}
	if got, ok := m["grpc.client.call.transparent_retries"+call]; ok {
		t.Errorf("outer call's transparent retries %q, want none: they were the inner calls'", got)
	}
}

// TestInnerCallOutsideTheTrace: the same instrumentation's inner call, made
// where the span in the context does not record (the operation stepped out
// of the trace), does not end the outer attempt's span either: its second
// attempt has no span of its own, and must not take the outer second's.
func TestInnerCallOutsideTheTrace(t *testing.T) {
	r := newRig(t)
	inst := r.inst()
	ctx, span := r.caller(context.Background())
	s := &retry.Simple{Backoff: retry.Constant(0)}
	outerN := 0
	var endedByInner []sdktrace.ReadOnlySpan
	err := retry.Do(ctx, s, func(ctx context.Context) error {
		if outerN++; outerN == 2 {
			unsampled := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
			innerN := 0
			_ = retry.Do(unsampled, s, func(context.Context) error {
				if innerN++; innerN == 1 {
					return retry.Transient(errBoom)
				}
				return nil
			}, retry.Scope("inner"), inst.Option())
			endedByInner = endedAttempt(r, "2")
		}
		if outerN < 3 {
			return retry.Transient(errBoom)
		}
		return nil
	}, retry.Scope("outer"), inst.Option())
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 2 || attr(attempts[0], "retry.scope") != "outer" {
		t.Fatalf("%d attempt spans, want the outer call's 2", len(attempts))
	}
	if second := attempts[0]; len(endedByInner) != 0 || second.Status().Code != codes.Error {
		t.Errorf("the outer attempt 2's span: ended with the inner call %v, status %v; want ended after it, Error",
			len(endedByInner) != 0, second.Status())
	}
}

// endedAttempt returns the attempt spans numbered n that have ended so far.
func endedAttempt(r *rig, n string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.ended(otelretry.SpanAttempt) {
		if attr(s, "retry.attempt") == n {
			out = append(out, s)
		}
	}
	return out
}
