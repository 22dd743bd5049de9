package otelretry_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/grpcretry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// flakyHealth answers UNAVAILABLE to its first two checks.
type flakyHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *flakyHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) <= 2 {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestGRPCInterceptor: a unary call through grpcretry's interceptor against
// a real grpc.Server on loopback that is UNAVAILABLE twice.
func TestGRPCInterceptor(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	health := &flakyHealth{}
	healthpb.RegisterHealthServer(gs, health)
	go gs.Serve(lis)
	defer gs.Stop()

	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	var mu sync.Mutex
	var seen []trace.SpanID // the span in each attempt's context
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		seen = append(seen, trace.SpanFromContext(ctx).SpanContext().SpanID())
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(
			grpcretry.UnaryClientInterceptor(
				grpcretry.WithStrategy(&retry.Simple{Backoff: retry.Constant(0)}),
				grpcretry.WithScope(func(*grpc.ClientConn, string) string { return "health" }),
				grpcretry.WithRetryOptions(inst.Option())),
			record))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, span := r.caller(context.Background())
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	caller := r.ended("caller")[0]
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	want := []trace.SpanID{caller.SpanContext().SpanID(), attempts[0].SpanContext().SpanID(), attempts[1].SpanContext().SpanID()}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d attempts, want 3", len(seen))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("attempt %d runs in span %v, want %v (the caller's for the first, then the attempt's)", i+1, seen[i], want[i])
		}
	}
	for i, a := range attempts {
		if got, want := attr(a, "previous-rpc-attempts"), []string{"1", "2"}[i]; got != want || attr(a, "transparent-retry") != "false" {
			t.Errorf("attempt span %d: previous-rpc-attempts %q (want %s), transparent-retry %q", i+2, got, want, attr(a, "transparent-retry"))
		}
	}
	if evs := events(caller); len(evs) != 4 {
		t.Errorf("caller's events %q, want a failure and a wait per retry", evs)
	}
	m := r.metrics(t)
	for k, v := range map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=health}":    "1",
		"grpc.client.call.retries{retry.outcome=success,retry.scope=health}": "1/2",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
	if _, ok := m["retry.client.call.retries{retry.outcome=success,retry.scope=health}"]; ok {
		t.Error("the per-call retries are recorded under the generic name too")
	}
}

// TestGRPCTransparentRetries: attempts that never leave the client (the
// server is not listening yet) are retried as gRFC A6's transparent retries:
// counted in grpc.client.call.transparent_retries, not in
// grpc.client.call.retries, and their retries' spans say transparent-retry.
func TestGRPCTransparentRetries(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens until the first retry
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &flakyHealth{})
	defer gs.Stop()

	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	var once sync.Once
	listen := retry.OnRetry(func(context.Context, int, time.Duration, error) {
		once.Do(func() {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			go gs.Serve(l)
		})
	})
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1, MaxDelay: 5 * time.Millisecond}, MinConnectTimeout: time.Second}),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(
			grpcretry.WithStrategy(&retry.Simple{MaxAttempts: 100, Backoff: retry.Constant(10 * time.Millisecond)}),
			grpcretry.WithScope(func(*grpc.ClientConn, string) string { return "health" }),
			grpcretry.WithRetryOptions(listen, inst.Option()))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, span := r.caller(context.Background())
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	attempts := r.ended(otelretry.SpanAttempt)
	m := r.metrics(t)
	transparent := 0
	for _, a := range attempts {
		if attr(a, "transparent-retry") == "true" {
			transparent++
		}
	}
	// The first attempts fail without leaving the client; once the server
	// listens, its two UNAVAILABLE answers are retried as ordinary retries.
	if transparent == 0 || len(attempts) != transparent+2 {
		t.Fatalf("%d attempt spans, %d of them transparent retries, want all but the 2 after the server's answers", len(attempts), transparent)
	}
	for k, v := range map[string]string{
		"grpc.client.call.transparent_retries{retry.outcome=success,retry.scope=health}": "1/" + itoa(transparent),
		"grpc.client.call.retries{retry.outcome=success,retry.scope=health}":             "1/2",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
}
