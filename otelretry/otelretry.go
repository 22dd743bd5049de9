package otelretry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/callinfo"
	"github.com/retrykit/retry/otelretry/internal/hook"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/retrykit/retry/otelretry"

// Attribute keys.
const (
	keyScope      = attribute.Key("retry.scope")
	keyAttempt    = attribute.Key("retry.attempt")
	keyAttempts   = attribute.Key("retry.attempts")
	keyOutcome    = attribute.Key("retry.outcome")
	keyReason     = attribute.Key("retry.reason")
	keyDelay      = attribute.Key("retry.delay")
	keyRetryAfter = attribute.Key("retry.retry_after")
	keyErrorType  = attribute.Key("error.type")
	keyError      = attribute.Key("retry.error")
	keyQuota      = attribute.Key("retry.quota")
	keyBudget     = attribute.Key("retry.budget")
	keyStrategy   = attribute.Key("retry.strategy")

	// The breaker's attributes share a namespace, retry.breaker, which the
	// semantic conventions' naming rules keep from being a name itself.
	keyBreakerName  = attribute.Key("retry.breaker.name")
	keyBreakerState = attribute.Key("retry.breaker.state")
	keyFirstAttempt = attribute.Key("retry.first_attempt")

	// keyResendCount is the HTTP semantic conventions' attribute of a resent
	// request; keyPreviousAttempts and keyTransparent are those of gRPC's
	// OpenTelemetry tracing design (gRFC A72) on an attempt span.
	keyResendCount      = attribute.Key("http.request.resend_count")
	keyPreviousAttempts = attribute.Key("previous-rpc-attempts")
	keyTransparent      = attribute.Key("transparent-retry")

	// keyGRPCMethod and keyGRPCTarget are gRFC A66's attributes, which
	// gRFC A96 requires on its per-call retry metrics.
	keyGRPCMethod = attribute.Key("grpc.method")
	keyGRPCTarget = attribute.Key("grpc.target")

	// The OpenTelemetry semantic conventions' exception event and its
	// attributes (the "Exceptions" section of the trace conventions).
	eventException         = "exception"
	keyExceptionType       = attribute.Key("exception.type")
	keyExceptionMessage    = attribute.Key("exception.message")
	keyExceptionStacktrace = attribute.Key("exception.stacktrace")
)

// Unknown is the grpc.method and grpc.target of a call whose method or
// target the instrumentation was not told (a call that is not a gRPC call
// through grpcretry's interceptors), and the grpc.method of a method that is
// not known in advance, as gRFC A66 has it.
const Unknown = "other"

// Outcomes, the values of retry.outcome.
const (
	OutcomeSuccess = "success" // the attempt, or the call, succeeded
	OutcomeFailure = "failure" // the attempt failed
	OutcomeGiveUp  = "give_up" // the call failed for good
	OutcomePanic   = "panic"   // an attempt panicked (or its goroutine called runtime.Goexit): the call did not return
)

var (
	outcomeSuccess = keyOutcome.String(OutcomeSuccess)
	outcomeFailure = keyOutcome.String(OutcomeFailure)
	outcomeGiveUp  = keyOutcome.String(OutcomeGiveUp)
	outcomePanic   = keyOutcome.String(OutcomePanic)
)

// Span and event names.
const (
	SpanAttempt        = "retry.attempt"        // the span of an attempt after the first
	EventAttemptFailed = "retry.attempt_failed" // on the caller's span, per failed attempt
	EventWait          = "retry.wait"           // on the caller's span, per wait before a retry
	EventGiveUp        = "retry.give_up"        // on the caller's span, once when the call fails for good
)

// An Option configures New.
type Option func(*config)

type config struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	maxScopes int
	http      bool
	grpc      bool
	gauges    gauges
}

// WithTracerProvider sets the tracer provider; the default is the global
// one, read when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the meter provider; the default is the global one,
// read when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithMaxScopes bounds the scopes that get a retry.scope value of their own:
// the calls of later scopes are counted under OtherScope. 0 or less keeps
// DefaultMaxScopes.
func WithMaxScopes(n int) Option {
	return func(c *config) { c.maxScopes = n }
}

// WithHTTPConventions gives each attempt span the HTTP semantic conventions'
// http.request.resend_count: 1 on the first retry, 2 on the second. Use it
// for the instrumentation of an httpretry.Transport or a Forrst client.
func WithHTTPConventions() Option { return func(c *config) { c.http = true } }

// WithGRPCConventions follows gRPC's OpenTelemetry designs: each attempt span
// gets the attributes previous-rpc-attempts and transparent-retry of gRFC
// A72, and the per-call histograms are gRFC A96's four, with its names,
// units, definitions and bucket advice: grpc.client.call.retries,
// grpc.client.call.transparent_retries, grpc.client.call.hedges and
// grpc.client.call.retry_delay, each with A66's grpc.method and grpc.target.
// A retry.Trace is not told a call's method or target, nor the hedges sent
// within an attempt: grpcretry's interceptors, given the instrumentation's
// Option (grpcretry.WithRetryOptions), tell it, for unary calls, hedged
// calls and streams. The calls of a loop they do not run record both
// attributes as Unknown.
func WithGRPCConventions() Option { return func(c *config) { c.grpc = true } }

// Instrumentation follows retry loops in OpenTelemetry traces and metrics.
// Make one with New, share it, and pass its Option to retry.Do, DoValue, or
// any integration that takes retry options (httpretry.Transport.Options,
// forrst.Client.Options). It is safe for concurrent use.
type Instrumentation struct {
	tracer  trace.Tracer // nil when tracing is off
	metrics bool
	http    bool
	grpc    bool
	scopes  *scopes

	attempts    metric.Int64Counter
	retries     metric.Int64Counter
	giveUps     metric.Int64Counter
	refusals    metric.Int64Counter
	callRetries metric.Int64Histogram
	delay       metric.Float64Histogram
	callDelay   metric.Float64Histogram
	transparent metric.Int64Histogram // with the gRPC conventions only
	hedges      metric.Int64Histogram // with the gRPC conventions only

	reg   metric.Registration
	trace *retry.Trace
}

// New returns the instrumentation for the given providers. A provider that
// records nothing (the no-op providers of the OpenTelemetry API, the global
// tracer provider while none is installed, a meter provider whose
// instruments are not enabled) turns that half off, and with both off Option
// returns the zero retry.Option, which costs a call nothing. The global
// providers are read, and so judged, when New is called: call it after
// installing them. New starts no span: a tracer provider is judged by its
// type, not by a span started to see what it does, which a sampler that
// records every span would have shown its processors and never ended. A
// tracer provider of another kind that records nothing is taken for one that
// records: it costs its calls, not its output.
//
// Errors creating instruments are passed to otel.Handle, as the
// OpenTelemetry instrumentation libraries do, and leave that instrument
// inert.
func New(opts ...Option) *Instrumentation {
	c := config{maxScopes: DefaultMaxScopes}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.maxScopes <= 0 {
		c.maxScopes = DefaultMaxScopes
	}
	in := &Instrumentation{http: c.http, grpc: c.grpc, scopes: newScopes(c.maxScopes)}
	if tracing(c.tp) {
		in.tracer = c.tp.Tracer(ScopeName)
	}
	in.instruments(c.mp, &c.gauges)
	if in.tracer != nil || in.metrics {
		in.trace = &retry.Trace{
			AttemptStart: in.attemptStart,
			AttemptDone:  in.attemptDone,
			Retry:        in.retry,
			GiveUp:       in.giveUp,
			Done:         in.done,
		}
		if in.grpc {
			// The call's state: its transparent retries, hedges, method
			// and target.
			in.trace.CallStart = in.callStart
		}
	}
	return in
}

// tracing reports whether tp may record, without starting a span: it does
// not if it is one of the API's no-op providers, or the API's global
// provider while no provider is installed (otel.GetTracerProvider returns
// the installed provider itself once there is one, so a global provider it
// no longer returns has one to delegate to).
func tracing(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return false
	}
	return !(isGlobal(tp) && otel.GetTracerProvider() == tp)
}

// isGlobal reports whether tp is the API's global delegating provider, a
// type of an internal package of the API.
func isGlobal(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// instruments makes the instruments, unless mp records nothing.
func (in *Instrumentation) instruments(mp metric.MeterProvider, g *gauges) {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return
	}
	m := mp.Meter(ScopeName)
	var err error
	in.attempts, err = m.Int64Counter("retry.client.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made, first attempts included, by scope and outcome."))
	handle(err)
	in.retries, err = m.Int64Counter("retry.client.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Attempts after the first (the load retries add), by scope and outcome."))
	handle(err)
	in.giveUps, err = m.Int64Counter("retry.client.give_ups", metric.WithUnit("{call}"),
		metric.WithDescription("Calls that failed for good, by scope and the reason retrying stopped."))
	handle(err)
	in.refusals, err = m.Int64Counter("retry.client.breaker.refusals", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts not made because a circuit breaker's circuit was open, by scope and whether each was a call's first."))
	handle(err)
	in.delay, err = m.Float64Histogram("retry.client.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("The wait before each retry: backoff, the server's hint or the limiter's wait."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	handle(err)
	if in.grpc {
		// gRFC A96's four, with its units and bucket advice.
		in.callRetries, err = m.Int64Histogram("grpc.client.call.retries", metric.WithUnit("{retry}"),
			metric.WithDescription("Number of retries during the client call; calls without retries are not recorded."),
			metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5))
		handle(err)
		in.transparent, err = m.Int64Histogram("grpc.client.call.transparent_retries", metric.WithUnit("{transparent_retry}"),
			metric.WithDescription("Number of transparent retries during the client call; calls without any are not recorded."),
			metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10))
		handle(err)
		in.hedges, err = m.Int64Histogram("grpc.client.call.hedges", metric.WithUnit("{hedge}"),
			metric.WithDescription("Number of hedges during the client call; calls without hedges are not recorded."),
			metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5))
		handle(err)
		in.callDelay, err = m.Float64Histogram("grpc.client.call.retry_delay", metric.WithUnit("s"),
			metric.WithDescription("Total time of delay while there is no active attempt during the client call."),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))
		handle(err)
	} else {
		in.callRetries, err = m.Int64Histogram("retry.client.call.retries", metric.WithUnit("{retry}"),
			metric.WithDescription("Retries made during a call that retried at all; the first attempt is not counted."),
			metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10))
		handle(err)
		in.callDelay, err = m.Float64Histogram("retry.client.call.retry_delay", metric.WithUnit("s"),
			metric.WithDescription("The time a call that retried spent waiting between its attempts, in all."),
			metric.WithExplicitBucketBoundaries(delayBuckets...))
		handle(err)
	}
	in.metrics = in.attempts.Enabled(context.Background()) || in.retries.Enabled(context.Background()) ||
		in.giveUps.Enabled(context.Background()) || in.refusals.Enabled(context.Background()) ||
		in.callRetries.Enabled(context.Background()) ||
		in.delay.Enabled(context.Background()) || in.callDelay.Enabled(context.Background())
	if !in.metrics {
		return
	}
	in.reg = g.register(m, in.scopes)
}

// delayBuckets are the bucket advice of this package's own histograms of
// waits, in seconds.
var delayBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 60}

// latencyBuckets are gRFC A66's latency buckets, in seconds, which gRFC A96
// advises for grpc.client.call.retry_delay.
var latencyBuckets = []float64{0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002,
	0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03,
	0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65,
	0.8, 1, 2, 5, 10, 20, 50, 100}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// Option returns the retry option that instruments a call: the zero
// retry.Option, which changes nothing and costs nothing, when the providers
// record nothing.
func (in *Instrumentation) Option() retry.Option {
	if in.trace == nil {
		return retry.Option{}
	}
	return retry.WithTrace(in.trace)
}

// Trace returns the instrumentation's hooks, nil when the providers record
// nothing.
func (in *Instrumentation) Trace() *retry.Trace { return in.trace }

// Close stops observing the gauges. The Option keeps working.
func (in *Instrumentation) Close() error {
	if in.reg == nil {
		return nil
	}
	return in.reg.Unregister()
}

// attemptKey finds an instrumentation's own attempt spans in a context:
// each instrumentation has a key of its own, so that one never finds, and so
// never ends, another's spans (an instrumentation that only counts, inside
// an attempt another traces, say). A key holds a single pointer, which an
// interface holds without allocating. A call's state is found as the
// nearest of the instrumentation's own among the context's callinfo sinks
// (see callOf).
type attemptKey struct{ in *Instrumentation }

// attemptSpans are the spans of an attempt after the first.
type attemptSpans struct {
	n               int
	caller, attempt trace.Span
}

// spansOf returns the spans attemptStart made for attempt n, if any. The
// number tells them from those of an outer call's attempt, whose context an
// inner call's attempts inherit; attemptStart hides an outer attempt of the
// same number from an inner attempt that has no spans of its own.
func (in *Instrumentation) spansOf(ctx context.Context, n int) (*attemptSpans, bool) {
	if n <= 1 {
		return nil, false
	}
	spans, ok := ctx.Value(attemptKey{in}).(*attemptSpans)
	return spans, ok && spans != nil && spans.n == n
}

// callOf returns the call's state, if CallStart made one (with the gRPC
// conventions): the nearest that is in's own, so that an instrumentation
// never counts in another's calls.
func (in *Instrumentation) callOf(ctx context.Context) *callState {
	for s := callinfo.From(ctx); s != nil; s = s.Outer() {
		if st, ok := s.(*callState); ok && st.in == in {
			return st
		}
	}
	return nil
}

// attemptStart gives each attempt after the first a span of its own, a child
// of the caller's. The first attempt runs in the caller's context as it is:
// a call that succeeds at once costs no span.
func (in *Instrumentation) attemptStart(ctx context.Context, scope string, n int) context.Context {
	var st *callState
	if in.grpc {
		if st = in.callOf(ctx); st != nil {
			st.attempt.Store(int64(n))
		}
	}
	if n <= 1 || in.tracer == nil {
		return ctx
	}
	caller := trace.SpanFromContext(ctx)
	if !caller.IsRecording() {
		// The instrumentation adds to a trace; it starts none. An outer
		// call's attempt n, whose spans ctx may carry, is not this one.
		if _, ok := in.spansOf(ctx, n); ok {
			return context.WithValue(ctx, attemptKey{in}, (*attemptSpans)(nil))
		}
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, in.scopes.get(scope).attr, keyAttempt.Int(n))
	if in.http {
		attrs = append(attrs, keyResendCount.Int(n-1))
	}
	if in.grpc {
		attrs = append(attrs, keyPreviousAttempts.Int(n-1), keyTransparent.Bool(st != nil && st.lastTransparent))
	}
	ctx, span := in.tracer.Start(ctx, SpanAttempt, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, attemptKey{in}, &attemptSpans{n: n, caller: caller, attempt: span})
}

// attemptDone ends the attempt's span, counts the attempt and, if it failed,
// adds an event to the caller's span. An attempt that panicked (a
// *retry.PanicError) is a failure of class ClassPanic whose span also gets
// the semantic conventions' exception event. The span ends before the
// counters are recorded: a meter that panics (the panic leaves through Do,
// as a hook's does) must not leave it open.
func (in *Instrumentation) attemptDone(ctx context.Context, scope string, n int, err error) {
	s := in.scopes.get(scope)
	if err == nil {
		if spans, ok := in.spansOf(ctx, n); ok {
			spans.attempt.End()
		}
		if in.metrics {
			in.attempts.Add(ctx, 1, s.okAdd...)
			if n > 1 {
				in.retries.Add(ctx, 1, s.okAdd...)
			}
		}
		return
	}
	class, info := errorClass(err)
	if in.tracer != nil {
		in.attemptFailed(ctx, n, err, class, info)
	}
	if in.metrics {
		set := metric.WithAttributeSet(attribute.NewSet(s.attr, outcomeFailure, keyErrorType.String(class)))
		in.attempts.Add(ctx, 1, set)
		if n > 1 {
			in.retries.Add(ctx, 1, set)
		}
	}
}

// attemptFailed ends a failed attempt's span with its class and status, and
// adds the attempt's event to the caller's span.
func (in *Instrumentation) attemptFailed(ctx context.Context, n int, err error, class string, info retry.Info) {
	caller := trace.SpanFromContext(ctx)
	if spans, ok := in.spansOf(ctx, n); ok {
		caller = spans.caller
		spans.attempt.SetAttributes(keyErrorType.String(class))
		if pe, ok := err.(*retry.PanicError); ok {
			spans.attempt.AddEvent(eventException, trace.WithAttributes(
				keyExceptionType.String(typeName(pe.Value)),
				keyExceptionMessage.String(fmt.Sprint(pe.Value)),
				keyExceptionStacktrace.String(string(pe.Stack))))
		}
		spans.attempt.SetStatus(codes.Error, err.Error())
		spans.attempt.End()
	}
	if !caller.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{keyAttempt.Int(n), keyErrorType.String(class), keyError.String(err.Error())}
	if info.RetryAfter > 0 {
		attrs = append(attrs, keyRetryAfter.Float64(info.RetryAfter.Seconds()))
	}
	caller.AddEvent(EventAttemptFailed, trace.WithAttributes(attrs...))
}

// typeName is the exception.type of a panic's value: its package path and
// type name, or what reflect says of a type without them, as the
// OpenTelemetry SDK names the type of a panic it records.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "<nil>"
	}
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// retry records a granted retry's wait.
func (in *Instrumentation) retry(ctx context.Context, scope string, n int, delay time.Duration, err error) {
	if st := in.callOf(ctx); st != nil {
		st.lastTransparent = transparentRetry(err)
		if st.lastTransparent {
			st.transparent++
		}
	}
	class, info := errorClass(err)
	if in.metrics {
		in.delay.Record(ctx, delay.Seconds(), metric.WithAttributeSet(
			attribute.NewSet(in.scopes.get(scope).attr, keyErrorType.String(class))))
	}
	if in.tracer == nil {
		return
	}
	caller := trace.SpanFromContext(ctx)
	if !caller.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{keyAttempt.Int(n), keyDelay.Float64(delay.Seconds()), keyErrorType.String(class)}
	if info.RetryAfter > 0 {
		attrs = append(attrs, keyRetryAfter.Float64(info.RetryAfter.Seconds()))
	}
	caller.AddEvent(EventWait, trace.WithAttributes(attrs...))
}

// giveUp counts a call that failed for good, and says why on the caller's
// span. A call that gave up because its breaker refused an attempt (the
// loop's own refusal, whose Reason is retry.ErrCircuitOpen itself) also
// counts the refusal, and sets the caller's span's status to Error with the
// error's message, which names the open circuit: a refused first attempt
// leaves no other sign of failure on the span, and no attempt span is made
// for an attempt not made.
func (in *Instrumentation) giveUp(ctx context.Context, scope string, e *retry.Error) {
	reason := giveUpReason(e.Reason)
	refused := e.Reason == retry.ErrCircuitOpen
	class := ""
	if e.Err != nil {
		class, _ = errorClass(e.Err)
	}
	if in.metrics {
		s := in.scopes.get(scope)
		if refused && class == "" {
			// A refused first attempt, as every call is while the
			// circuit is open: the scope's set, made once.
			in.giveUps.Add(ctx, 1, s.openGiveUp...)
		} else {
			attrs := []attribute.KeyValue{s.attr, keyReason.String(reason)}
			if class != "" {
				attrs = append(attrs, keyErrorType.String(class))
			}
			in.giveUps.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrs...)))
		}
		if refused {
			in.refusals.Add(ctx, 1, s.refusedAdd(e.Attempts == 0)...)
		}
	}
	if in.tracer == nil {
		return
	}
	caller := trace.SpanFromContext(ctx)
	if !caller.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{keyAttempts.Int(e.Attempts), keyReason.String(reason)}
	if class != "" {
		attrs = append(attrs, keyErrorType.String(class))
	}
	msg := ""
	if e.Reason != nil {
		msg = e.Error()
		attrs = append(attrs, keyError.String(msg))
	}
	caller.AddEvent(EventGiveUp, trace.WithAttributes(attrs...))
	if refused {
		caller.SetStatus(codes.Error, msg)
	}
}

// done records the per-call histograms when the call ends, as gRFC A96's
// CallTracer does. With the gRPC conventions, A96's: every call records
// grpc.client.call.retry_delay (0 if it never waited), and a count of
// retries, transparent retries or hedges that is 0 is not recorded. Without
// them, a call that made one attempt records nothing.
func (in *Instrumentation) done(ctx context.Context, scope string, attempts int, waited time.Duration, err error) {
	if !in.metrics {
		return
	}
	outcome := outcomeSuccess
	if err != nil {
		outcome = outcomeGiveUp
		if _, ok := err.(*retry.Error); !ok {
			outcome = outcomePanic // a *retry.PanicError, or Goexit's error
		}
	}
	s := in.scopes.get(scope)
	st := in.callOf(ctx)
	if st == nil { // no gRPC conventions
		if attempts < 2 {
			return
		}
		set := s.okRec // made once per scope
		if err != nil {
			set = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(s.attr, outcome))}
		}
		in.callRetries.Record(ctx, int64(attempts-1), set...)
		in.callDelay.Record(ctx, waited.Seconds(), set...)
		return
	}
	method, target := st.rpc()
	set := metric.WithAttributeSet(attribute.NewSet(s.attr, outcome, keyGRPCMethod.String(method), keyGRPCTarget.String(target)))
	if r := int64(attempts-1) - st.transparent; r > 0 {
		in.callRetries.Record(ctx, r, set)
	}
	if st.transparent > 0 {
		in.transparent.Record(ctx, st.transparent, set)
	}
	if h := st.hedges.Load(); h > 0 {
		in.hedges.Record(ctx, h, set)
	}
	in.callDelay.Record(ctx, waited.Seconds(), set)
}

// callState is what the instrumentation keeps for one call, with the gRPC
// conventions: the callinfo.Sink grpcretry tells of the call's method,
// target and hedges. The loop's hooks touch transparent and
// lastTransparent, one at a time; grpcretry (or package grpcotel's
// interceptor), on the goroutines of an attempt's hedges, the rest.
type callState struct {
	in    *Instrumentation // whose state it is
	outer callinfo.Sink    // the sink the call's context held before

	transparent     int64 // the call's transparent retries so far
	lastTransparent bool  // the retry about to be made is one

	attempt atomic.Int64 // the attempt under way, 1 for the first
	hedges  atomic.Int64 // copies of an attempt sent while it was in flight

	// direct is set once grpcretry has told the call's method and target
	// itself, before it first sends the call: what package grpcotel's
	// interceptor, installed below it, then tells is the same, and is not
	// counted again.
	direct atomic.Bool

	mu             sync.Mutex
	told           bool // method and target were told
	method, target string
}

// rpc returns the call's grpc.method and grpc.target, Unknown if the
// instrumentation was not told them.
func (st *callState) rpc() (method, target string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	method, target = st.method, st.target
	if method == "" {
		method = Unknown
	}
	if target == "" {
		target = Unknown
	}
	return method, target
}

// callStart gives a call its state, which grpcretry finds in the context
// of each attempt.
func (in *Instrumentation) callStart(ctx context.Context, _ string) context.Context {
	return callinfo.With(ctx, &callState{in: in, outer: callinfo.From(ctx)})
}

// RPC is grpcretry telling the call's method ("" if not known in advance:
// Unknown) and target, before each attempt.
func (st *callState) RPC(method, target string) {
	st.direct.Store(true)
	st.tell(method, target)
}

// Hedge is grpcretry telling of a hedge it sent.
func (st *callState) Hedge() { st.hedges.Add(1) }

// Outer returns the sink the call's context held before its state.
func (st *callState) Outer() callinfo.Sink { return st.outer }

// tell records the call's method and target: the first told win.
func (st *callState) tell(method, target string) {
	st.mu.Lock()
	if !st.told {
		st.told, st.method, st.target = true, method, target
	}
	st.mu.Unlock()
}

// sent is what package grpcotel's interceptor tells of each gRPC call it
// sees in the context of an attempt of in's call, unless grpcretry told the
// call's state itself: the call's method and target, and the number of
// attempts the call says came before it (grpc-previous-rpc-attempts, 0
// without one). A call that says at least as many came before it as the
// loop's attempt number is a hedge: grpcretry sends attempt n with n-1, and
// the hedges of an attempt with the copies before them, which the loop does
// not count as attempts.
func (in *Instrumentation) sent(ctx context.Context, method, target string, previous int) {
	st := in.callOf(ctx)
	if st == nil || st.direct.Load() {
		return
	}
	st.tell(method, target)
	if n := st.attempt.Load(); n > 0 && int64(previous) >= n {
		st.hedges.Add(1)
	}
}

func init() {
	hook.Sent = func(in any, ctx context.Context, method, target string, previous int) {
		if in, ok := in.(*Instrumentation); ok && in != nil && in.trace != nil && in.grpc {
			in.sent(ctx, method, target, previous)
		}
	}
}

// transparentRetry reports whether err says its attempt never left the
// client (grpcretry's errors do, with a TransparentRetry method): its retry
// is one of gRFC A6's transparent retries.
func transparentRetry(err error) bool {
	var t interface{ TransparentRetry() bool }
	return errors.As(err, &t) && t.TransparentRetry()
}
