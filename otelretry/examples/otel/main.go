// Command otel shows a retrying HTTP client in OpenTelemetry: it calls a
// flaky server on loopback through an httpretry.Transport instrumented by
// otelretry, and prints the spans and metrics with the SDK's stdout
// exporters.
//
// The server answers GET /orders with 503, then 429 with Retry-After: 1,
// then 200; GET /stock always with 503, so that call gives up. Run it with
//
//	go run ./otelretry/examples/otel
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	if err := run(os.Stdout, "1", nil); err != nil {
		log.Fatal(err)
	}
}

// run makes the two calls and writes the spans and metrics to out.
// retryAfter is the server's Retry-After on its 429; s is the client's
// strategy, nil for an Adaptive.
func run(out io.Writer, retryAfter string, s retry.Strategy) error {
	ctx := context.Background()
	spans, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(out), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))

	if s == nil {
		s = retry.NewAdaptive(retry.AdaptiveOptions{})
	}
	inst := otelretry.New(otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(mp),
		otelretry.WithHTTPConventions(), otelretry.WithStrategy("http", s))
	defer inst.Close()

	srv := httptest.NewServer(flaky(retryAfter))
	defer srv.Close()
	client := &http.Client{Transport: &httpretry.Transport{
		Strategy: s,
		Scope:    func(r *http.Request) string { return r.URL.Path }, // a quota per endpoint
		Options:  []retry.Option{inst.Option()},
	}}

	for _, path := range []string{"/orders", "/stock"} {
		cctx, span := tp.Tracer("example").Start(ctx, "GET "+path)
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			fmt.Fprintf(os.Stderr, "GET %s: %s\n", path, resp.Status)
		} else {
			fmt.Fprintf(os.Stderr, "GET %s: %v\n", path, err)
		}
		span.End()
	}
	// Shutting the providers down exports what is left: the metrics.
	if err := tp.Shutdown(ctx); err != nil {
		return err
	}
	return mp.Shutdown(ctx)
}

// flaky is the server: GET /orders fails twice (503, then 429 with
// Retry-After), GET /stock always.
func flaky(retryAfter string) http.Handler {
	var mu sync.Mutex
	orders := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/orders" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		orders++
		n := orders
		mu.Unlock()
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			_, _ = io.WriteString(w, `{"orders":[]}`)
		}
	})
}
