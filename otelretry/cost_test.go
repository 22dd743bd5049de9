package otelretry_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestNoopCostsNothing: with providers that record nothing, the option is
// the zero retry.Option, with which Do keeps its fast path, and Do's
// success path allocates nothing.
func TestNoopCostsNothing(t *testing.T) {
	s := retry.NewStandard(retry.StandardOptions{})
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	if reflect.ValueOf(retry.WithTrace(&retry.Trace{})).IsZero() {
		t.Fatal("a Trace option is zero: this test cannot tell a zero option from another")
	}
	cases := map[string]*otelretry.Instrumentation{
		"noop providers": otelretry.New(otelretry.WithTracerProvider(tracenoop.NewTracerProvider()),
			otelretry.WithMeterProvider(metricnoop.NewMeterProvider())),
		"pointers to noop providers": otelretry.New(otelretry.WithTracerProvider(&tracenoop.TracerProvider{}),
			otelretry.WithMeterProvider(&metricnoop.MeterProvider{})),
		"global providers, none installed": otelretry.New(),
	}
	for name, inst := range cases {
		t.Run(name, func(t *testing.T) {
			if inst.Trace() != nil {
				t.Error("Trace() is not nil")
			}
			opt := inst.Option()
			if !reflect.ValueOf(opt).IsZero() {
				t.Error("Option() is not the zero retry.Option, which is what keeps Do's fast path")
			}
			bare := testing.AllocsPerRun(100, func() { _ = retry.Do(ctx, s, ok) })
			if n := testing.AllocsPerRun(100, func() { _ = retry.Do(ctx, s, ok, opt) }); n != bare {
				t.Errorf("Do with the option allocates %v times, want %v as without it", n, bare)
			}
		})
	}
}

// TestNewStartsNoSpan: New judges a tracer provider without starting a
// span. It used to start a probe span and never end it: under a sampler that
// records every span, the span processors saw a span named "probe" start and
// never end.
func TestNewStartsNoSpan(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	inst := otelretry.New(otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(metricnoop.NewMeterProvider()))
	if inst.Trace() == nil {
		t.Fatal("an SDK tracer provider that records every span is judged to record nothing")
	}
	if started := spans.Started(); len(started) != 0 {
		t.Errorf("New started %d spans (the first named %q), want none", len(started), started[0].Name())
	}
}

// TestLiveHalves: either provider alone turns the instrumentation on.
func TestLiveHalves(t *testing.T) {
	r := newRig(t)
	for name, inst := range map[string]*otelretry.Instrumentation{
		"tracer alone": otelretry.New(otelretry.WithTracerProvider(r.tp), otelretry.WithMeterProvider(metricnoop.NewMeterProvider())),
		"meter alone":  otelretry.New(otelretry.WithTracerProvider(tracenoop.NewTracerProvider()), otelretry.WithMeterProvider(r.mp)),
	} {
		if inst.Trace() == nil {
			t.Errorf("%s: Trace() is nil", name)
		}
	}
}
