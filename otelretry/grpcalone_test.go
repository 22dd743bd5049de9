package otelretry_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/grpcretry"
	"github.com/retrykit/retry/otelretry"
	"github.com/retrykit/retry/otelretry/grpcotel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// These tests install grpcretry's interceptors alone, given the
// instrumentation's Option, and no grpcotel interceptor (but the last, which
// has no grpcretry): grpcretry tells the
// instrumentation each call's method and target and each hedge itself, so
// that gRFC A96's metrics carry grpc.method and grpc.target for unary
// calls, hedged calls and streams.

// serveHealth serves h on a loopback port with a real grpc.Server.
func serveHealth(t *testing.T, h healthpb.HealthServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, h)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// dialRetrying dials addr through grpcretry's interceptors alone, in scope
// health, without waits between attempts, with the further options.
func dialRetrying(t *testing.T, addr string, opts ...grpcretry.Option) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpcretry.Option{
		grpcretry.WithStrategy(&retry.Simple{Backoff: retry.Constant(0)}),
		grpcretry.WithScope(func(*grpc.ClientConn, string) string { return "health" }),
	}, opts...)
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(opts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// a96 is the attribute set of gRFC A96's metrics for a call on conn to
// method (as recorded: without its slash, or "other"), in scope, with
// outcome.
func a96(conn *grpc.ClientConn, method, scope, outcome string) string {
	return "{grpc.method=" + method + ",grpc.target=" + conn.CanonicalTarget() +
		",retry.outcome=" + outcome + ",retry.scope=" + scope + "}"
}

// noUnknown fails if a gRPC metric in m records grpc.method or grpc.target
// as otelretry.Unknown.
func noUnknown(t *testing.T, m map[string]string) {
	t.Helper()
	for k, v := range m {
		if strings.HasPrefix(k, "grpc.") && strings.Contains(k, "="+otelretry.Unknown+",") {
			t.Errorf("%s = %s: an attribute the interceptor knows is %s", k, v, otelretry.Unknown)
		}
	}
}

// hasMetrics checks that m holds want, among others.
func hasMetrics(t *testing.T, m, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q; metrics %v", k, m[k], v, m)
		}
	}
}

// TestGRPCRetryAloneUnary: a unary call answered UNAVAILABLE twice and then
// served records its two retries and its retry_delay under the method and
// the channel's canonical target, with no interceptor but grpcretry's.
func TestGRPCRetryAloneUnary(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	conn := dialRetrying(t, serveHealth(t, &flakyHealth{}), grpcretry.WithRetryOptions(inst.Option()))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	call := a96(conn, "grpc.health.v1.Health/Check", "health", "success")
	m := r.metrics(t)
	wantMetrics(t, m, map[string]string{
		"retry.client.attempts{error.type=server,retry.outcome=failure,retry.scope=health}": "2",
		"retry.client.attempts{retry.outcome=success,retry.scope=health}":                   "1",
		"retry.client.retries{error.type=server,retry.outcome=failure,retry.scope=health}":  "1",
		"retry.client.retries{retry.outcome=success,retry.scope=health}":                    "1",
		"retry.client.retry.delay{error.type=server,retry.scope=health}":                    "2/0",
		"grpc.client.call.retries" + call:                                                   "1/2",
		"grpc.client.call.retry_delay" + call:                                               "1/0",
	})
}

// TestGRPCRetryAloneArbitraryMethod: a call without grpc.StaticMethod (not
// generated code's) records grpc.method as otelretry.Unknown, as gRFC A66
// has it, and its target all the same.
func TestGRPCRetryAloneArbitraryMethod(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	conn := dialRetrying(t, serveHealth(t, &flakyHealth{}), grpcretry.WithRetryOptions(inst.Option()))
	err := conn.Invoke(context.Background(), "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if err != nil {
		t.Fatal(err)
	}
	call := a96(conn, otelretry.Unknown, "health", "success")
	m := r.metrics(t)
	hasMetrics(t, m, map[string]string{
		"grpc.client.call.retries" + call:     "1/2",
		"grpc.client.call.retry_delay" + call: "1/0",
	})
}

// TestGRPCRetryAloneHedges: a hedged call, its first copy held by the
// server, is won by its hedge: grpcretry tells the instrumentation of the
// hedge, which records grpc.client.call.hedges; the call answered at once
// records none.
func TestGRPCRetryAloneHedges(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	health := &slowFirstHealth{}
	conn := dialRetrying(t, serveHealth(t, health),
		grpcretry.WithIdempotentMethods("/grpc.health.v1.Health/"),
		grpcretry.WithHedging(grpcretry.Hedging{MaxAttempts: 3, Delay: 20 * time.Millisecond}),
		grpcretry.WithRetryOptions(inst.Option()))
	client := healthpb.NewHealthClient(conn)
	for range 2 { // the first is won by its hedge, the second answered at once
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := health.calls.Load(); n != 3 {
		t.Fatalf("the server saw %d checks, want 3 (a call and its hedge, then a call)", n)
	}
	call := a96(conn, "grpc.health.v1.Health/Check", "health", "success")
	m := r.metrics(t)
	noUnknown(t, m)
	hasMetrics(t, m, map[string]string{
		"grpc.client.call.hedges" + call:      "1/1",
		"grpc.client.call.retry_delay" + call: "2/0",
	})
	if v, ok := m["grpc.client.call.retries"+call]; ok {
		t.Errorf("grpc.client.call.retries = %s, want nothing: the hedge is not a retry", v)
	}
}

// flakyWatch answers its first Watch UNAVAILABLE, and every other with one
// status, after which the stream ends OK.
type flakyWatch struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *flakyWatch) Watch(_ *healthpb.HealthCheckRequest, st grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if h.calls.Add(1) == 1 {
		return status.Error(codes.Unavailable, "not yet")
	}
	return st.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// TestGRPCRetryAloneStreams: streams, which grpcotel never saw (grpcretry
// opens a stream's first attempt before its loop runs), carry the method
// and target too: a Watch answered UNAVAILABLE and retried records its
// retry, and one served at once, whose only attempt is the stream opened
// before the loop, its retry_delay, both under grpc.health.v1.Health/Watch.
func TestGRPCRetryAloneStreams(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	health := &flakyWatch{}
	conn := dialRetrying(t, serveHealth(t, health), grpcretry.WithRetryOptions(inst.Option()))
	client := healthpb.NewHealthClient(conn)
	for range 2 { // the first retried once, the second served at once
		st, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("after the status: %v, want io.EOF", err)
		}
	}
	if n := health.calls.Load(); n != 3 {
		t.Fatalf("the server saw %d watches, want 3", n)
	}
	call := a96(conn, "grpc.health.v1.Health/Watch", "health", "success")
	m := r.metrics(t)
	noUnknown(t, m)
	hasMetrics(t, m, map[string]string{
		"grpc.client.call.retries" + call:     "1/1",
		"grpc.client.call.retry_delay" + call: "2/0",
	})
}

// TestGRPCRetryTellsEveryInstrumentation: two instrumentations of the same
// calls, and that of an application's retry.Do around a call whose
// interceptor has none, are all told the method and target, each recording
// in its own metrics.
func TestGRPCRetryTellsEveryInstrumentation(t *testing.T) {
	r1, r2, outer := newRig(t), newRig(t), newRig(t)
	inst1 := r1.inst(otelretry.WithGRPCConventions())
	inst2 := r2.inst(otelretry.WithGRPCConventions())
	addr := serveHealth(t, &flakyHealth{})
	conn := dialRetrying(t, addr, grpcretry.WithRetryOptions(inst1.Option(), inst2.Option()))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	call := a96(conn, "grpc.health.v1.Health/Check", "health", "success")
	for i, r := range []*rig{r1, r2} {
		if m := r.metrics(t); m["grpc.client.call.retries"+call] != "1/2" {
			t.Errorf("instrumentation %d: grpc.client.call.retries%s = %q, want 1/2; metrics %v", i+1, call, m["grpc.client.call.retries"+call], m)
		}
	}

	// The application's loop retries; grpcretry's, without an
	// instrumentation, leaves the answered failures to it.
	inst := outer.inst(otelretry.WithGRPCConventions())
	plain := dialRetrying(t, addr)
	client := healthpb.NewHealthClient(plain)
	err := retry.Do(context.Background(), &retry.Simple{Backoff: retry.Constant(0)}, func(ctx context.Context) error {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}, retry.Scope("app"), inst.Option())
	if err != nil {
		t.Fatal(err)
	}
	m := outer.metrics(t)
	noUnknown(t, m)
	if k := "grpc.client.call.retry_delay" + a96(plain, "grpc.health.v1.Health/Check", "app", "success"); m[k] != "1/0" {
		t.Errorf("%s = %q, want 1/0; metrics %v", k, m[k], m)
	}
}

// TestGRPCOtelForAnApplicationsLoop: grpcotel's interceptor, on a channel
// without grpcretry's, tells an application's own instrumented loop the
// method and target of the gRPC calls its attempts make.
func TestGRPCOtelForAnApplicationsLoop(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithGRPCConventions())
	conn, err := grpc.NewClient(serveHealth(t, &flakyHealth{}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithUnaryInterceptor(grpcotel.UnaryClientInterceptor(inst)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	err = retry.Do(context.Background(), &retry.Simple{Backoff: retry.Constant(0)}, func(ctx context.Context) error {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return retry.Transient(err) // the application classifies its own failures
		}
		return nil
	}, retry.Scope("app"), inst.Option())
	if err != nil {
		t.Fatal(err)
	}
	call := a96(conn, "grpc.health.v1.Health/Check", "app", "success")
	m := r.metrics(t)
	hasMetrics(t, m, map[string]string{
		"grpc.client.call.retries" + call:     "1/2",
		"grpc.client.call.retry_delay" + call: "1/0",
	})
}
