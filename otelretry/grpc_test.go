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
	"github.com/retrykit/retry/otelretry/grpcotel"
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
// a real grpc.Server on loopback that is UNAVAILABLE twice, with grpcotel's
// interceptor below it (as programs once had to install it), which counts
// nothing twice.
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
			grpcotel.UnaryClientInterceptor(inst),
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
	call := grpcAttrs(conn, "success")
	for k, v := range map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=health}": "1",
		"grpc.client.call.retries" + call:                                 "1/2",
		"grpc.client.call.retry_delay" + call:                             "1/0",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
	for _, k := range []string{"retry.client.call.retries{retry.outcome=success,retry.scope=health}",
		"grpc.client.call.transparent_retries" + call, "grpc.client.call.hedges" + call} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %s, want nothing recorded (no such retries, or the generic name)", k, v)
		}
	}
}

// grpcAttrs is the attribute set of gRFC A96's metrics for a call on conn to
// the health service's Check, in scope health, with outcome.
func grpcAttrs(conn *grpc.ClientConn, outcome string) string {
	return "{grpc.method=grpc.health.v1.Health/Check,grpc.target=" + conn.CanonicalTarget() +
		",retry.outcome=" + outcome + ",retry.scope=health}"
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
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(
			grpcretry.WithStrategy(&retry.Simple{MaxAttempts: 100, Backoff: retry.Constant(10 * time.Millisecond)}),
			grpcretry.WithScope(func(*grpc.ClientConn, string) string { return "health" }),
			grpcretry.WithRetryOptions(listen, inst.Option())),
			grpcotel.UnaryClientInterceptor(inst)))
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
	call := grpcAttrs(conn, "success")
	for k, v := range map[string]string{
		"grpc.client.call.transparent_retries" + call: "1/" + itoa(transparent),
		"grpc.client.call.retries" + call:             "1/2",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
	wantBounds(t, r, "grpc.client.call.retries", 1, 2, 3, 4, 5)
	wantBounds(t, r, "grpc.client.call.transparent_retries", 1, 2, 3, 4, 5, 10)
}

// slowFirstHealth holds its first check until the call is cancelled (or
// for 10 s) and answers the others at once: a call hedged after a short
// delay is won by its hedge.
type slowFirstHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *slowFirstHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) == 1 {
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(10 * time.Second):
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestGRPCHedges: a call that grpcretry hedges is one attempt of its retry
// loop, its hedges sent within it; grpcretry tells the instrumentation of
// each, which records gRFC A96's grpc.client.call.hedges. grpcotel's
// interceptor below grpcretry's, as programs once had to install it, sees
// each copy as well, and the hedge is counted once. The calls that are not
// hedged record no hedges (a 0 is not reported), and every call records
// grpc.client.call.retry_delay, 0 when it never waited.
func TestGRPCHedges(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	health := &slowFirstHealth{}
	healthpb.RegisterHealthServer(gs, health)
	go gs.Serve(lis)
	defer gs.Stop()

	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(
			grpcretry.UnaryClientInterceptor(
				grpcretry.WithStrategy(&retry.Simple{Backoff: retry.Constant(0)}),
				grpcretry.WithScope(func(*grpc.ClientConn, string) string { return "health" }),
				grpcretry.WithIdempotentMethods("/grpc.health.v1.Health/"),
				grpcretry.WithHedging(grpcretry.Hedging{MaxAttempts: 3, Delay: 20 * time.Millisecond}),
				grpcretry.WithRetryOptions(inst.Option())),
			grpcotel.UnaryClientInterceptor(inst)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	client := healthpb.NewHealthClient(conn)
	for range 2 { // the first is won by its hedge, the second answered at once
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := health.calls.Load(); n != 3 {
		t.Fatalf("the server saw %d checks, want 3 (a call and its hedge, then a call)", n)
	}
	call := grpcAttrs(conn, "success")
	m := r.metrics(t)
	for k, v := range map[string]string{
		"grpc.client.call.hedges" + call:      "1/1",
		"grpc.client.call.retry_delay" + call: "2/0",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
	for _, k := range []string{"grpc.client.call.retries" + call, "grpc.client.call.transparent_retries" + call} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %s, want nothing: the call made no such retries", k, v)
		}
	}
	wantBounds(t, r, "grpc.client.call.hedges", 1, 2, 3, 4, 5)
	wantBounds(t, r, "grpc.client.call.retry_delay", 0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002,
		0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1,
		0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1, 2, 5, 10, 20, 50, 100)
}

// TestGRPCConventionsWithoutInterceptor: a call the gRPC interceptor did not
// see (a plain retry.Do) still carries gRFC A96's required attributes, as
// otelretry.Unknown, and records its retry_delay although it never waited.
func TestGRPCConventionsWithoutInterceptor(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	if err := retry.Do(context.Background(), &retry.Simple{}, func(context.Context) error { return nil },
		retry.Scope("svc"), inst.Option()); err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, r.metrics(t), map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=svc}":                                            "1",
		"grpc.client.call.retry_delay{grpc.method=other,grpc.target=other,retry.outcome=success,retry.scope=svc}": "1/0",
	})
}
