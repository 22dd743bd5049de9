package otelretry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
	"github.com/retrykit/retry/otelretry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkDo measures what the instrumentation adds to a call: none is the
// call without it, noop with the API's no-op providers, empty-trace with a
// retry.Trace without hooks (what any option that is not zero costs the
// loop), sdk with the SDK (every span recorded, metrics to a manual
// reader) and a recording caller's span. success is a call that succeeds at once; retry one whose
// first attempt fails (no wait), so that retry - success is the cost of an
// attempt that fails and is retried; refused one whose first attempt an open
// circuit breaker refuses, what every call costs while a service is down.
func BenchmarkDo(b *testing.B) {
	r := newRig(b)
	noop := otelretry.New(otelretry.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelretry.WithMeterProvider(metricnoop.NewMeterProvider()))
	tp := sdktrace.NewTracerProvider() // records every span, exports none
	defer func() { _ = tp.Shutdown(context.Background()) }()
	sdk := otelretry.New(otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(r.mp))
	ctx, span := tp.Tracer("bench").Start(context.Background(), "caller")
	defer span.End()
	ok := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		opt  retry.Option
	}{
		{"none", retry.Option{}},
		{"noop", noop.Option()},
		{"empty-trace", retry.WithTrace(&retry.Trace{})}, // the general loop, without instrumentation
		{"sdk", sdk.Option()},
	} {
		b.Run(c.name+"/success", func(b *testing.B) {
			s := retry.NewStandard(retry.StandardOptions{})
			opts := []retry.Option{retry.Scope("svc"), c.opt}
			b.ReportAllocs()
			for b.Loop() {
				if err := retry.Do(ctx, s, ok, opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/refused", func(b *testing.B) {
			brk := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 1, OpenFor: time.Hour})
			opts := []retry.Option{retry.Scope("svc"), retry.WithBreaker(brk), c.opt}
			_ = retry.Do(ctx, &retry.No{}, func(context.Context) error { return retry.Transient(errBoom) }, opts...)
			s := retry.NewStandard(retry.StandardOptions{})
			b.ReportAllocs()
			for b.Loop() {
				if err := retry.Do(ctx, s, ok, opts...); !errors.Is(err, retry.ErrCircuitOpen) {
					b.Fatalf("err = %v, want the open circuit's refusal", err)
				}
			}
		})
		b.Run(c.name+"/retry", func(b *testing.B) {
			s := &retry.Simple{Backoff: retry.Constant(0)}
			opts := []retry.Option{retry.Scope("svc"), c.opt}
			fail := retry.Transient(errBoom)
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				err := retry.Do(ctx, s, func(context.Context) error {
					if n++; n == 1 {
						return fail
					}
					return nil
				}, opts...)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHTTPRetry puts the cost of a retry in proportion: a GET through
// httpretry.Transport against a loopback server that fails every other
// request, so that each call is a 503 and a retried 200, without and with
// the SDK instrumentation.
func BenchmarkHTTPRetry(b *testing.B) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	r := newRig(b)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	sdk := otelretry.New(otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(r.mp), otelretry.WithHTTPConventions())
	ctx, span := tp.Tracer("bench").Start(context.Background(), "caller")
	defer span.End()
	for _, c := range []struct {
		name string
		opt  retry.Option
	}{{"none", retry.Option{}}, {"sdk", sdk.Option()}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &httpretry.Transport{
				Strategy: &retry.Simple{Backoff: retry.Constant(0)},
				Options:  []retry.Option{c.opt},
			}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
