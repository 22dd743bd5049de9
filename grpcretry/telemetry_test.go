package grpcretry

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/callinfo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// tellSink records what the interceptors tell an instrumentation of one
// call, as otelretry's state of a call does.
type tellSink struct {
	outer callinfo.Sink

	mu     sync.Mutex
	rpcs   []string // "method target", one per attempt
	hedges int
}

func (s *tellSink) RPC(method, target string) {
	s.mu.Lock()
	s.rpcs = append(s.rpcs, method+" "+target)
	s.mu.Unlock()
}

func (s *tellSink) Hedge() {
	s.mu.Lock()
	s.hedges++
	s.mu.Unlock()
}

func (s *tellSink) Outer() callinfo.Sink { return s.outer }

func (s *tellSink) told() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rpcs...), s.hedges
}

// sinkTrace is a retry.Trace that gives each call's context the sink, as
// otelretry's CallStart gives it the call's state.
func sinkTrace(s *tellSink) retry.Option {
	return retry.WithTrace(&retry.Trace{CallStart: func(ctx context.Context, _ string) context.Context {
		s.outer = callinfo.From(ctx)
		return callinfo.With(ctx, s)
	}})
}

// tellHealth is a health service on a real grpc.Server: Check answers
// UNAVAILABLE to the first failChecks calls, and holds the call numbered
// holdCheck until it is cancelled; Watch answers its first call
// UNAVAILABLE, the others with one status.
type tellHealth struct {
	healthpb.UnimplementedHealthServer
	failChecks, holdCheck int32
	checks, watches       atomic.Int32
}

func (h *tellHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	n := h.checks.Add(1)
	if n <= h.failChecks {
		return nil, status.Error(codes.Unavailable, "not yet")
	}
	if n == h.holdCheck {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *tellHealth) Watch(_ *healthpb.HealthCheckRequest, st grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if h.watches.Add(1) == 1 {
		return status.Error(codes.Unavailable, "not yet")
	}
	return st.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// tellConn serves h on loopback and dials it through both interceptors.
func tellConn(t *testing.T, h *tellHealth, opts ...Option) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, h)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	opts = append([]Option{WithStrategy(&retry.Simple{Backoff: retry.Constant(0)})}, opts...)
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestTellsUnary: each attempt of a unary call tells the instrumentation's
// sink the method, named because generated code marks it static, and the
// canonical target; a call made without grpc.StaticMethod tells "".
func TestTellsUnary(t *testing.T) {
	sink := &tellSink{}
	conn := tellConn(t, &tellHealth{failChecks: 2}, WithRetryOptions(sinkTrace(sink)))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	rpc := "grpc.health.v1.Health/Check " + conn.CanonicalTarget()
	if rpcs, hedges := sink.told(); !slices.Equal(rpcs, []string{rpc, rpc, rpc}) || hedges != 0 {
		t.Errorf("told %q and %d hedges, want %q for each of 3 attempts and none", rpcs, hedges, rpc)
	}

	arbitrary := &tellSink{}
	conn = tellConn(t, &tellHealth{}, WithRetryOptions(sinkTrace(arbitrary)))
	if err := conn.Invoke(context.Background(), "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}); err != nil {
		t.Fatal(err)
	}
	if rpcs, _ := arbitrary.told(); !slices.Equal(rpcs, []string{" " + conn.CanonicalTarget()}) {
		t.Errorf("a call without grpc.StaticMethod told %q, want no method and the target", rpcs)
	}
}

// TestTellsHedges: a hedged call tells its method once, for the loop's one
// attempt, and each hedge it sends; a call that is not hedged, none.
func TestTellsHedges(t *testing.T) {
	sink := &tellSink{}
	conn := tellConn(t, &tellHealth{holdCheck: 1},
		WithIdempotentMethods("/grpc.health.v1.Health/"),
		WithHedging(Hedging{MaxAttempts: 3, Delay: 20 * time.Millisecond}),
		WithRetryOptions(sinkTrace(sink)))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	rpc := "grpc.health.v1.Health/Check " + conn.CanonicalTarget()
	if rpcs, hedges := sink.told(); !slices.Equal(rpcs, []string{rpc}) || hedges != 1 {
		t.Errorf("told %q and %d hedges, want %q once and 1 hedge", rpcs, hedges, rpc)
	}
}

// TestTellsStreams: a stream's loop tells the method and target for each
// attempt, the first (opened before the loop ran) included.
func TestTellsStreams(t *testing.T) {
	sink := &tellSink{}
	conn := tellConn(t, &tellHealth{}, WithRetryOptions(sinkTrace(sink)))
	st, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the status: %v, want io.EOF", err)
	}
	rpc := "grpc.health.v1.Health/Watch " + conn.CanonicalTarget()
	if rpcs, hedges := sink.told(); !slices.Equal(rpcs, []string{rpc, rpc}) || hedges != 0 {
		t.Errorf("told %q and %d hedges, want %q for each of 2 attempts and none", rpcs, hedges, rpc)
	}
}

// TestTellsEnclosingCall: a call made in an attempt of an application's
// loop tells that loop's sink too, through the sink of its own loop.
func TestTellsEnclosingCall(t *testing.T) {
	inner, outer := &tellSink{}, &tellSink{}
	conn := tellConn(t, &tellHealth{}, WithRetryOptions(sinkTrace(inner)))
	client := healthpb.NewHealthClient(conn)
	err := retry.Do(context.Background(), &retry.Simple{}, func(ctx context.Context) error {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}, sinkTrace(outer))
	if err != nil {
		t.Fatal(err)
	}
	rpc := "grpc.health.v1.Health/Check " + conn.CanonicalTarget()
	for name, s := range map[string]*tellSink{"inner": inner, "outer": outer} {
		if rpcs, _ := s.told(); !slices.Equal(rpcs, []string{rpc}) {
			t.Errorf("%s sink told %q, want %q", name, rpcs, rpc)
		}
	}
}

// TestCallLabels: a call's method is a label only when the call says it is
// static (gRFC A66), and the target is the channel's canonical one.
func TestCallLabels(t *testing.T) {
	cc, err := grpc.NewClient("passthrough:///example.com:443", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, tc := range []struct {
		opts      []grpc.CallOption
		cc        *grpc.ClientConn
		m, target string
	}{
		{[]grpc.CallOption{grpc.StaticMethod()}, cc, "pkg.Svc/Do", "passthrough:///example.com:443"},
		{nil, cc, "", "passthrough:///example.com:443"},
		{[]grpc.CallOption{grpc.WaitForReady(true), grpc.StaticMethod()}, nil, "pkg.Svc/Do", ""},
	} {
		if m, target := CallLabels("/pkg.Svc/Do", tc.cc, tc.opts); m != tc.m || target != tc.target {
			t.Errorf("CallLabels(%v) = %q, %q; want %q, %q", tc.opts, m, target, tc.m, tc.target)
		}
	}
}
