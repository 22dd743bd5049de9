package otelretry_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// rig is the real SDK with its in-memory exporters: a span recorder and a
// manual metric reader, and the meter provider's further options (views).
type rig struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newRig(t testing.TB, opts ...sdkmetric.Option) *rig {
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	r.mp = sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(r.reader))...)
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = r.mp.Shutdown(context.Background())
	})
	return r
}

// inst returns an instrumentation on the rig's providers.
func (r *rig) inst(opts ...otelretry.Option) *otelretry.Instrumentation {
	opts = append([]otelretry.Option{otelretry.WithTracerProvider(r.tp), otelretry.WithMeterProvider(r.mp)}, opts...)
	return otelretry.New(opts...)
}

// caller starts the caller's span.
func (r *rig) caller(ctx context.Context) (context.Context, trace.Span) {
	return r.tp.Tracer("test").Start(ctx, "caller")
}

// ended returns the spans that ended, by name.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// metrics collects the reader's data as "name{k=v,...}" -> value: a
// counter's sum, a histogram's "count/sum", a gauge's value.
func (r *rig) metrics(t testing.TB) map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrs(p.Attributes)] = fmt.Sprint(p.Value)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrs(p.Attributes)] = fmt.Sprintf("%d/%d", p.Count, p.Sum)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrs(p.Attributes)] = fmt.Sprintf("%d/%g", p.Count, p.Sum)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrs(p.Attributes)] = fmt.Sprint(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrs(p.Attributes)] = fmt.Sprintf("%.3g", p.Value)
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func attrs(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// wantMetrics checks that got holds exactly want.
func wantMetrics(t testing.TB, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %s", k, got[k])
		}
	}
}

// events returns a span's events as "name{k=v,...}".
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name+attrs(attribute.NewSet(e.Attributes...)))
	}
	return out
}

// attr returns the value of key on s, "" if it has none.
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// wantBounds checks the bucket boundaries of the histogram name.
func wantBounds(t testing.TB, r *rig, name string, want ...float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			var got [][]float64
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got = append(got, p.Bounds)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got = append(got, p.Bounds)
				}
			}
			if len(got) == 0 {
				t.Fatalf("%s has no histogram data points", name)
			}
			for _, b := range got {
				if !slices.Equal(b, want) {
					t.Errorf("%s buckets %v, want %v", name, b, want)
				}
			}
			return
		}
	}
	t.Errorf("no metric %s", name)
}

func wantEvents(t testing.TB, s sdktrace.ReadOnlySpan, want ...string) {
	t.Helper()
	got := events(s)
	if !slices.Equal(got, want) {
		t.Errorf("events of %s:\n got %q\nwant %q", s.Name(), got, want)
	}
}
