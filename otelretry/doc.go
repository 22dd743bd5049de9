// Package otelretry follows the retry loops of github.com/retrykit/retry in
// OpenTelemetry traces and metrics. One value instruments retry.Do and
// retry.DoValue, and every integration that takes retry options, without
// code of its own for each:
//
//	inst := otelretry.New(otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(mp))
//	err := retry.Do(ctx, s, op, inst.Option())
//	client := &http.Client{Transport: &httpretry.Transport{Options: []retry.Option{inst.Option()}}}
//	fc := &forrst.Client{URL: url, Options: []retry.Option{inst.Option()}}
//
// # Spans
//
// The instrumentation adds to the caller's span (the one in the context of
// the call) and never starts a trace of its own:
//
//   - Each failed attempt adds the event retry.attempt_failed to the caller's
//     span, with retry.attempt (1 for the first), error.type (the error's
//     class, see ClassThrottle and the others), retry.error (its message)
//     and retry.retry_after (the server's hint, in seconds) if there is one.
//   - Each wait before a retry adds retry.wait, with the number of the
//     attempt that failed, retry.delay in seconds, error.type and the hint.
//   - A call that fails for good adds retry.give_up, with retry.attempts,
//     retry.reason (ReasonAttempts, ReasonQuota, ReasonBudget,
//     ReasonDeadline, ReasonNotRetryable and the others) and the last
//     error's class.
//   - A call a circuit breaker refused (retry.WithBreaker; reason
//     ReasonCircuitOpen), its first attempt or a retry, also sets the
//     caller's span's status to Error, with the call's error as its
//     description, which names the open circuit. The attempt not made has
//     no span.
//   - Each attempt after the first is a span of its own, retry.attempt (kind
//     internal), a child of the caller's span, with retry.scope and
//     retry.attempt; with WithHTTPConventions it carries the HTTP semantic
//     conventions' http.request.resend_count, and with WithGRPCConventions
//     gRFC A72's previous-rpc-attempts and transparent-retry. A failed
//     attempt's span has status Error and error.type. The attempt's context
//     carries the span, so the spans an HTTP or gRPC instrumentation starts
//     for the request (otelhttp's client span, say) nest under it.
//   - An attempt that panics still ends its span: status Error, error.type
//     ClassPanic and the semantic conventions' exception event
//     (exception.type, exception.message, exception.stacktrace), from the
//     *retry.PanicError the loop tells the Trace before it panics again with
//     the same value (see retry.Trace). The first attempt has no span of its
//     own: the caller's span is the caller's to end, and the SDK's End
//     records a panic that goes through it when it is deferred.
//
// Each instrumentation keeps its spans and its calls' state under context
// keys of its own: one instrumentation, in a call inside another's attempt,
// never ends the other's spans or counts in its calls.
//
// The first attempt runs in the caller's context as it is, with no span: a
// call that succeeds at once, most calls, costs no span and no event. The
// model follows from three designs. OpenTelemetry's
// HTTP semantic conventions make each physical request of a resent HTTP
// request a client span of its own and mark the resends with
// http.request.resend_count; otelhttp's Transport starts one client span per
// RoundTrip from the request's context, so under an httpretry.Transport
// whose Base is an otelhttp Transport each attempt already has its client
// span, and this package only needs to give the retries a parent that says
// which retry they are. gRPC's OpenTelemetry tracing (gRFC A72, after gRFC
// A45) makes a call span and an attempt span per attempt with
// previous-rpc-attempts; here the caller's span plays the call span. Polly's
// telemetry (Polly.Extensions) reports retries as events (OnRetry, with the
// attempt number and the delay) and attempt metrics rather than spans, which
// is what the events on the caller's span carry. The waits stay visible as
// the gaps between attempt spans, each announced by its retry.wait event.
//
// # Metrics
//
// In the semantic conventions' style (a namespace, the client side, units in
// UCUM), every instrument carrying retry.scope:
//
//   - retry.client.attempts (counter, {attempt}): every attempt, with
//     retry.outcome (success or failure) and, on failure, error.type.
//   - retry.client.retries (counter, {retry}): the attempts after the first,
//     the load retries add, with the same attributes.
//   - retry.client.call.retries (histogram, {retry}): per call that retried
//     at all, the retries it made, with retry.outcome success, give_up or
//     panic, recorded when the call ends.
//   - retry.client.retry.delay (histogram, s): each wait before a retry,
//     with error.type.
//   - retry.client.call.retry_delay (histogram, s): per call that retried
//     at all, the time it spent waiting between attempts (retry.Trace's
//     Done), with retry.outcome.
//   - retry.client.give_ups (counter, {call}): calls that failed for good,
//     with retry.reason and error.type.
//   - retry.client.breaker.refusals (counter, {attempt}): attempts not made
//     because a circuit breaker's circuit was open, with retry.first_attempt
//     (true for a call's first attempt, false for a retry).
//   - retry.client.quota.available, retry.client.budget.available and
//     retry.client.send_rate (observable gauges): see WithStrategy,
//     WithQuota and WithBudget.
//   - retry.client.breaker.status (observable UpDownCounter, 1): a
//     breaker's state per scope, one series per retry.breaker.state
//     (closed, open, half_open), 1 for the current state and 0 for the
//     others, with retry.breaker.name; see WithBreaker.
//
// With WithGRPCConventions the two per-call histograms give way to gRFC
// A96's four (github.com/grpc/proposal, A96-retry-otel-stats.md), with its
// names, units and definitions, recorded when the call ends, each with
// gRFC A66's grpc.method and grpc.target (A66-otel-stats.md, which A96
// requires) besides retry.scope and retry.outcome:
//
//   - grpc.client.call.retries ({retry}, buckets 1, 2, 3, 4, 5): the
//     call's retries, its transparent retries left out; not recorded for 0.
//   - grpc.client.call.transparent_retries ({transparent_retry}, buckets 1,
//     2, 3, 4, 5, 10): its retries of attempts that never left the client
//     (an error whose TransparentRetry method says so, as grpcretry's do);
//     not recorded for 0.
//   - grpc.client.call.hedges ({hedge}, buckets 1, 2, 3, 4, 5): the copies
//     of an attempt sent while it was in flight (grpcretry's WithHedging),
//     as grpcretry tells them; not recorded for 0.
//   - grpc.client.call.retry_delay (s, A66's latency buckets): the time the
//     call spent waiting between attempts, recorded for every call, 0 for
//     one that never waited.
//
// A retry.Trace is told a call's scope, not its method or target, and not
// the hedges sent within an attempt: grpcretry's interceptors, given the
// Option (grpcretry.WithRetryOptions), tell the instrumentation themselves,
// for unary calls, hedged calls and streams, so one interceptor gives every
// label:
//
//	inst := otelretry.New(otelretry.WithGRPCConventions())
//	conn, err := grpc.NewClient(target, grpc.WithDisableRetry(),
//		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(grpcretry.WithRetryOptions(inst.Option()))))
//
// grpc.method is Unknown ("other") for a method not marked
// grpc.StaticMethod() (generated code marks its own), as gRFC A66 has it.
// A call whose loop grpcretry does not run records both attributes as
// Unknown, unless package grpcotel's interceptor tells them (see there).
//
// Scopes are attribute values, so their number is bounded (WithMaxScopes,
// DefaultMaxScopes): the calls of later scopes are counted under OtherScope.
//
// # Cost
//
// With the OpenTelemetry API's no-op providers (or the global ones before a
// provider is installed), Option returns the zero retry.Option and a call
// costs what it costs without it: no allocation on the success path. With
// the SDK, a call that succeeds at once records one counter increment from
// attribute sets made once per scope (with WithGRPCConventions, also its
// state and its retry_delay, whose attribute set is made per call). The
// README measures both.
package otelretry
