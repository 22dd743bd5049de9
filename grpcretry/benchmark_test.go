package grpcretry

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// BenchmarkUnary measures a unary call on loopback, side by side: without
// an interceptor, through the interceptor with nothing failing, and through
// it with two retries (UNAVAILABLE twice, no backoff).
func BenchmarkUnary(b *testing.B) {
	okSrv := &server{unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return &testpb.SimpleResponse{}, nil
	}}
	addr := serve(b, okSrv)
	flaky := &server{unary: failing(codes.Unavailable, 3)}
	flakyAddr := serve(b, flaky)
	for _, bc := range []struct {
		name string
		addr string
		opts []grpc.DialOption
	}{
		{"plain", addr, nil},
		{"interceptor", addr, []grpc.DialOption{grpc.WithUnaryInterceptor(UnaryClientInterceptor())}},
		{"two-retries", flakyAddr, []grpc.DialOption{grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithStrategy(simple(3))))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := dial(b, bc.addr, bc.opts...)
			ctx := context.Background()
			req := &testpb.SimpleRequest{}
			if _, err := c.UnaryCall(ctx, req); err != nil { // connect first
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.UnaryCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnaryPaired makes, in each iteration, one call without the
// interceptor and one through it, to the same server, and reports the ratio
// of their total times: on a shared machine, pairs see the same load, where
// separate runs do not.
func BenchmarkUnaryPaired(b *testing.B) {
	addr := serve(b, &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return &testpb.SimpleResponse{}, nil
	}})
	plain := dial(b, addr)
	intercepted := dial(b, addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor()))
	ctx := context.Background()
	req := &testpb.SimpleRequest{}
	for _, c := range []testpb.TestServiceClient{plain, intercepted} {
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	var tp, ti time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := plain.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := intercepted.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
		tp, ti = tp+mid.Sub(start), ti+time.Since(mid)
	}
	b.ReportMetric(float64(ti)/float64(tp), "interceptor/plain")
}

// BenchmarkHedgingTail measures what hedging does to the tail latency of
// unary calls to a loopback server with a slow tail: each attempt takes 20 ms
// with probability 2 %, else the round trip alone. Each iteration makes one
// call without hedging and one with (Hedging{}: a second copy at the 95th
// percentile of the latencies seen), to two servers alike, and reports the
// p99 of each, their ratio, and the server attempts per hedged call (the
// load hedging adds). Run it with -benchtime 5000x.
func BenchmarkHedgingTail(b *testing.B) {
	slowTail := func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if rand.Float64() < 0.02 {
			time.Sleep(20 * time.Millisecond) // the slow tail measured, in real time: a benchmark, it checks nothing
		}
		return &testpb.SimpleResponse{}, nil
	}
	plainSrv, hedgedSrv := &server{unary: slowTail}, &server{unary: slowTail}
	plain := dial(b, serve(b, plainSrv), grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithIdempotentMethods(method))))
	hedged := dial(b, serve(b, hedgedSrv), grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithIdempotentMethods(method), WithHedging(Hedging{}))))
	ctx := context.Background()
	req := &testpb.SimpleRequest{}
	var lp, lh []time.Duration
	calls := 0
	for b.Loop() {
		start := time.Now()
		if _, err := plain.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
		lp = append(lp, time.Since(start))
		start = time.Now()
		if _, err := hedged.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
		lh = append(lh, time.Since(start))
		calls++
	}
	p99 := func(l []time.Duration) time.Duration {
		slices.Sort(l)
		return l[min(len(l)*99/100, len(l)-1)]
	}
	pp, ph := p99(lp), p99(lh)
	b.ReportMetric(float64(pp)/1e6, "p99-plain-ms")
	b.ReportMetric(float64(ph)/1e6, "p99-hedged-ms")
	b.ReportMetric(float64(ph)/float64(pp), "p99-ratio")
	b.ReportMetric(float64(hedgedSrv.calls.Load())/float64(calls), "attempts/call")
}
