package otelretry

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry"
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

	// keyResendCount is the HTTP semantic conventions' attribute of a resent
	// request; keyPreviousAttempts and keyTransparent are those of gRPC's
	// OpenTelemetry tracing design (gRFC A72) on an attempt span.
	keyResendCount      = attribute.Key("http.request.resend_count")
	keyPreviousAttempts = attribute.Key("previous-rpc-attempts")
	keyTransparent      = attribute.Key("transparent-retry")
)

// Outcomes, the values of retry.outcome.
const (
	OutcomeSuccess = "success" // the attempt, or the call, succeeded
	OutcomeFailure = "failure" // the attempt failed
	OutcomeGiveUp  = "give_up" // the call failed for good
)

var (
	outcomeSuccess = keyOutcome.String(OutcomeSuccess)
	outcomeFailure = keyOutcome.String(OutcomeFailure)
	outcomeGiveUp  = keyOutcome.String(OutcomeGiveUp)
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
// gets the attributes previous-rpc-attempts and transparent-retry of gRFC A72,
// and the histogram of retries per call is named grpc.client.call.retries,
// as in gRFC A96.
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
	callRetries metric.Int64Histogram
	delay       metric.Float64Histogram
	callDelay   metric.Float64Histogram
	transparent metric.Int64Histogram // with the gRPC conventions only

	reg   metric.Registration
	trace *retry.Trace
}

// New returns the instrumentation for the given providers. A provider that
// records nothing (the no-op providers of the OpenTelemetry API, or any whose
// spans carry no trace ID, or whose instruments are not enabled) turns that
// half off, and with both off Option returns the zero retry.Option, which
// costs a call nothing. The global providers are read, and so judged, when
// New is called: call it after installing them.
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
		if in.grpc && in.metrics {
			in.trace.CallStart = in.callStart // counts a call's transparent retries
		}
	}
	return in
}

// tracing reports whether tp can record anything. The API's no-op
// providers, and the global one before a provider is installed, start spans
// that merely carry their parent's span context; a tracer that records makes
// a span ID of its own. The probe's parent is a remote span that was not
// sampled, so that the usual parent-based sampler does not record the probe,
// and the probe is never ended, so that no sampler's choice exports it.
func tracing(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return false
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: probeTrace, SpanID: probeSpan, Remote: true})
	_, span := tp.Tracer(ScopeName).Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "probe")
	return span.SpanContext().SpanID() != probeSpan
}

var (
	probeTrace = trace.TraceID{0x72, 0x65, 0x74, 0x72, 0x79, 1}
	probeSpan  = trace.SpanID{0x72, 0x65, 0x74, 0x72, 0x79, 1}
)

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
	name := "retry.client.call.retries"
	if in.grpc {
		name = "grpc.client.call.retries"
	}
	in.callRetries, err = m.Int64Histogram(name, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries made during a call that retried at all; the first attempt is not counted."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10))
	handle(err)
	in.delay, err = m.Float64Histogram("retry.client.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("The wait before each retry: backoff, the server's hint or the limiter's wait."),
		metric.WithExplicitBucketBoundaries(0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 60))
	handle(err)
	name = "retry.client.call.retry_delay"
	if in.grpc {
		name = "grpc.client.call.retry_delay"
	}
	in.callDelay, err = m.Float64Histogram(name, metric.WithUnit("s"),
		metric.WithDescription("The time a call that retried spent waiting between its attempts, in all."),
		metric.WithExplicitBucketBoundaries(0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 60))
	handle(err)
	if in.grpc {
		in.transparent, err = m.Int64Histogram("grpc.client.call.transparent_retries", metric.WithUnit("{transparent_retry}"),
			metric.WithDescription("Retries of a call's attempts that never left the client (gRFC A6's transparent retries), per call that made any."),
			metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10))
		handle(err)
	}
	in.metrics = in.attempts.Enabled(context.Background()) || in.retries.Enabled(context.Background()) ||
		in.giveUps.Enabled(context.Background()) || in.callRetries.Enabled(context.Background()) ||
		in.delay.Enabled(context.Background()) || in.callDelay.Enabled(context.Background())
	if !in.metrics {
		return
	}
	in.reg = g.register(m, in.scopes)
}

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

// attemptKey finds the attempt's own spans in its context; a span found by
// trace.SpanFromContext may be one that a later trace or the operation put
// there.
type attemptKey struct{}

type attemptSpans struct {
	n               int
	caller, attempt trace.Span
}

// spansOf returns the spans attemptStart made for attempt n, if any. The
// number tells them from those of an outer call's attempt, whose context an
// inner call's first attempt inherits.
func spansOf(ctx context.Context, n int) (*attemptSpans, bool) {
	if n <= 1 {
		return nil, false
	}
	spans, ok := ctx.Value(attemptKey{}).(*attemptSpans)
	return spans, ok && spans.n == n
}

// attemptStart gives each attempt after the first a span of its own, a child
// of the caller's. The first attempt runs in the caller's context as it is:
// a call that succeeds at once costs no span.
func (in *Instrumentation) attemptStart(ctx context.Context, scope string, n int) context.Context {
	if n <= 1 || in.tracer == nil {
		return ctx
	}
	caller := trace.SpanFromContext(ctx)
	if !caller.IsRecording() {
		return ctx // the instrumentation adds to a trace; it starts none
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, in.scopes.get(scope).attr, keyAttempt.Int(n))
	if in.http {
		attrs = append(attrs, keyResendCount.Int(n-1))
	}
	if in.grpc {
		st, _ := ctx.Value(callKey{}).(*callState)
		attrs = append(attrs, keyPreviousAttempts.Int(n-1), keyTransparent.Bool(st != nil && st.lastTransparent))
	}
	ctx, span := in.tracer.Start(ctx, SpanAttempt, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, attemptKey{}, &attemptSpans{n: n, caller: caller, attempt: span})
}

// attemptDone counts the attempt, ends its span and, if it failed, adds an
// event to the caller's span.
func (in *Instrumentation) attemptDone(ctx context.Context, scope string, n int, err error) {
	s := in.scopes.get(scope)
	if err == nil {
		if in.metrics {
			in.attempts.Add(ctx, 1, s.okAdd...)
			if n > 1 {
				in.retries.Add(ctx, 1, s.okAdd...)
				if r := int64(n-1) - transparentSoFar(ctx); r > 0 {
					in.callRetries.Record(ctx, r, s.okRec...)
				}
			}
		}
		if spans, ok := spansOf(ctx, n); ok {
			spans.attempt.End()
		}
		return
	}
	class, info := errorClass(err)
	if in.metrics {
		set := metric.WithAttributeSet(attribute.NewSet(s.attr, outcomeFailure, keyErrorType.String(class)))
		in.attempts.Add(ctx, 1, set)
		if n > 1 {
			in.retries.Add(ctx, 1, set)
		}
	}
	if in.tracer == nil {
		return
	}
	caller := trace.SpanFromContext(ctx)
	if spans, ok := spansOf(ctx, n); ok {
		caller = spans.caller
		spans.attempt.SetAttributes(keyErrorType.String(class))
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

// retry records a granted retry's wait.
func (in *Instrumentation) retry(ctx context.Context, scope string, n int, delay time.Duration, err error) {
	if st, ok := ctx.Value(callKey{}).(*callState); ok {
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
// span.
func (in *Instrumentation) giveUp(ctx context.Context, scope string, e *retry.Error) {
	reason := giveUpReason(e.Reason)
	class := ""
	if e.Err != nil {
		class, _ = errorClass(e.Err)
	}
	if in.metrics {
		s := in.scopes.get(scope)
		attrs := []attribute.KeyValue{s.attr, keyReason.String(reason)}
		if class != "" {
			attrs = append(attrs, keyErrorType.String(class))
		}
		in.giveUps.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrs...)))
		if r := int64(e.Attempts-1) - transparentSoFar(ctx); r > 0 {
			in.callRetries.Record(ctx, r, metric.WithAttributeSet(attribute.NewSet(s.attr, outcomeGiveUp)))
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
	if e.Reason != nil {
		attrs = append(attrs, keyError.String(e.Error()))
	}
	caller.AddEvent(EventGiveUp, trace.WithAttributes(attrs...))
}

// done records the whole wait of a call that retried, as gRFC A96's
// grpc.client.call.retry_delay does.
func (in *Instrumentation) done(ctx context.Context, scope string, attempts int, waited time.Duration, err error) {
	if !in.metrics || attempts < 2 {
		return
	}
	outcome := outcomeSuccess
	if err != nil {
		outcome = outcomeGiveUp
	}
	set := metric.WithAttributeSet(attribute.NewSet(in.scopes.get(scope).attr, outcome))
	in.callDelay.Record(ctx, waited.Seconds(), set)
	if t := transparentSoFar(ctx); t > 0 && in.transparent != nil {
		in.transparent.Record(ctx, t, set)
	}
}

// callKey finds a call's own state in the context CallStart gave it.
type callKey struct{}

// callState is what the instrumentation keeps for one call. Only the call's
// loop touches it, one hook at a time.
type callState struct {
	transparent     int64 // the call's transparent retries so far
	lastTransparent bool  // the retry about to be made is one
}

// callStart gives a call the state that counts its transparent retries.
func (in *Instrumentation) callStart(ctx context.Context, _ string) context.Context {
	return context.WithValue(ctx, callKey{}, &callState{})
}

// transparentSoFar is how many of the call's retries were transparent.
func transparentSoFar(ctx context.Context) int64 {
	if st, ok := ctx.Value(callKey{}).(*callState); ok {
		return st.transparent
	}
	return 0
}

// transparentRetry reports whether err says its attempt never left the
// client (grpcretry's errors do, with a TransparentRetry method): its retry
// is one of gRFC A6's transparent retries.
func transparentRetry(err error) bool {
	var t interface{ TransparentRetry() bool }
	return errors.As(err, &t) && t.TransparentRetry()
}
