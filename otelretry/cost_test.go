package otelretry_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
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
		"a tracer that copies its parent": otelretry.New(otelretry.WithTracerProvider(parentTracer{}),
			otelretry.WithMeterProvider(metricnoop.NewMeterProvider())),
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

// parentTracer is a provider outside the API's noop package whose spans
// carry their parent's span context, as the noop and global tracers do.
type parentTracer struct{ tracenoop.TracerProvider }

func (parentTracer) Tracer(string, ...trace.TracerOption) trace.Tracer { return parentTracer2{} }

type parentTracer2 struct{ tracenoop.Tracer }

func (parentTracer2) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return tracenoop.Tracer{}.Start(ctx, name, opts...)
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
