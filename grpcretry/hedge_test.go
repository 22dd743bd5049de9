package grpcretry

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// slowFirst makes the first attempt wait until it is cancelled (and says so
// on cancelled), and answers the others with their number once the first
// has reached the server. Without that wait a loaded machine can run the
// hedge and its answer before the first copy's request is written, and the
// client then rightly cancels a copy the server never sees.
func slowFirst(cancelled chan<- struct{}) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	arrived := make(chan struct{})
	return func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n == 1 {
			close(arrived)
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		grpc.SetHeader(ctx, metadata.Pairs("attempt", "hedge"))
		return ok(n)
	}
}

// TestHedgeWinnerAndCancellation: a hedge goes out after the delay, the
// first answer wins, and the slow attempt is cancelled at the server.
func TestHedgeWinnerAndCancellation(t *testing.T) {
	cancelled := make(chan struct{})
	srv := &server{unary: slowFirst(cancelled)}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: 5 * time.Millisecond}))
	var header metadata.MD
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&header))
	if err != nil || string(r.GetPayload().GetBody()) != "2" {
		t.Fatalf("%v, %v", r, err)
	}
	if got := header.Get("attempt"); len(got) != 1 || got[0] != "hedge" {
		t.Fatalf("the caller's header is %v, not the winner's", header)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the losing attempt was not cancelled")
	}
	// The two copies may reach the server in either order: identify them
	// by the header each carries, not by when they arrived.
	got := srv.seen()
	slices.Sort(got)
	if !slices.Equal(got, []string{"", "1"}) {
		t.Fatalf("grpc-previous-rpc-attempts %q, want the original's none and the hedge's 1, in any order", got)
	}
}

// TestHedgeNonFatal: a retryable failure sends the next hedge at once,
// without waiting for the hedging delay.
func TestHedgeNonFatal(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 2)}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if err != nil || string(r.GetPayload().GetBody()) != "2" {
		t.Fatalf("%v, %v", r, err)
	}
}

// TestHedgeFatal: a failure that is not retryable ends the call with it.
func TestHedgeFatal(t *testing.T) {
	srv := &server{unary: failing(codes.InvalidArgument, 2)}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if status.Code(err) != codes.InvalidArgument || srv.calls.Load() != 1 {
		t.Fatalf("%v after %d attempts", err, srv.calls.Load())
	}
}

// TestHedgeExhausted: when every copy fails, the call fails once, without a
// retry of the whole group.
func TestHedgeExhausted(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 100)}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if status.Code(err) != codes.Unavailable || srv.calls.Load() != 3 || !errors.Is(err, errHedged) {
		t.Fatalf("%v after %d attempts", err, srv.calls.Load())
	}
}

// TestHedgePushbackStops: a pushback that says stop ends the hedging.
func TestHedgePushbackStops(t *testing.T) {
	srv := &server{unary: pushback("-1")}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable || srv.calls.Load() != 1 {
		t.Fatalf("%v after %d attempts", err, srv.calls.Load())
	}
}

// TestHedgeQuantile: with no fixed delay, hedging starts once enough
// latencies are known, at their quantile.
func TestHedgeQuantile(t *testing.T) {
	var l latencies
	if _, ok := l.quantile(0.95); ok {
		t.Fatal("a quantile of nothing")
	}
	for i := range 100 {
		l.add(time.Duration(i+1) * time.Millisecond)
	}
	if d, ok := l.quantile(0.95); !ok || d != 96*time.Millisecond {
		t.Fatalf("p95 of 1..100 ms: %v %v", d, ok)
	}
	srv := &server{unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) { return ok(n) }}
	ic := newInterceptor([]Option{WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{})})
	c := dial(t, serve(t, srv), grpc.WithUnaryInterceptor(ic.unary))
	for range minSamples {
		if _, ok := ic.hedge.hedgeDelay(); ok {
			t.Fatal("a delay before enough latencies were seen")
		}
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if d, ok := ic.hedge.hedgeDelay(); !ok || d <= 0 {
		t.Fatalf("after %d calls: %v %v", minSamples, d, ok)
	}
	for range 10 { // hedged calls now
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if ic.hedge.lat.n != minSamples+10 {
		t.Fatalf("hedged calls recorded %d latencies, want %d", ic.hedge.lat.n, minSamples+10)
	}
}

// TestHedgeFailureFillsTheCallersMetadata: a hedged call that fails fills
// the caller's grpc.Header, grpc.Trailer and grpc.Peer from the copy whose
// failure it returns, as plain grpc (and the interceptor without hedging)
// fills them on failure: a fatal failure of the first copy, and the last
// of three retryable ones.
func TestHedgeFailureFillsTheCallersMetadata(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		from string // the copy whose failure comes back
	}{{codes.InvalidArgument, "1"}, {codes.Unavailable, "3"}} {
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			grpc.SetHeader(ctx, metadata.Pairs("copy", strconv.Itoa(n)))
			grpc.SetTrailer(ctx, metadata.Pairs("copy", strconv.Itoa(n)))
			return nil, status.Error(tc.code, "failing")
		}}
		c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
		var header, trailer metadata.MD
		var p peer.Peer
		_, err := c.UnaryCall(t.Context(), &testpb.SimpleRequest{}, grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
		if status.Code(err) != tc.code {
			t.Fatalf("%v: %v", tc.code, err)
		}
		if h, tr := header.Get("copy"), trailer.Get("copy"); !slices.Equal(h, []string{tc.from}) || !slices.Equal(tr, []string{tc.from}) || p.Addr == nil {
			t.Errorf("%v: header %v, trailer %v, peer %v; want those of copy %s", tc.code, header, trailer, p.Addr, tc.from)
		}
	}
}

// A hedged call inside an application's loop leaves an answered failure to
// the loop, which retries it: 3 calls for 3 attempts, where the hedged call
// used to give up Unsafe after one and nothing retried it.
func TestHedgedCallLeavesAnsweredFailuresToTheCaller(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 1000)}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 3}))
	attempts := 0
	err := retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
		attempts++
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		return err
	})
	if err == nil || attempts != 3 || srv.calls.Load() != 3 {
		t.Fatalf("%v after %d attempts and %d calls, want 3 and 3", err, attempts, srv.calls.Load())
	}
}

// slow answers after d.
func slow(d time.Duration, clk *clock) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if clk != nil {
			clk.mark()
		}
		time.Sleep(d)
		return ok(n)
	}
}

// TestVirtualHedgeDelays: hedges go out at the hedging delay, one after the
// other, up to MaxAttempts; the first answer wins.
func TestVirtualHedgeDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			clk.mark()
			if n < 3 {
				<-ctx.Done() // the first two never answer
				return nil, ctx.Err()
			}
			time.Sleep(5 * time.Millisecond)
			return ok(n)
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: 20 * time.Millisecond, MaxAttempts: 3}))
		start := time.Now()
		r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if err != nil || string(r.GetPayload().GetBody()) != "3" || time.Since(start) != 45*time.Millisecond {
			t.Fatalf("%v, %v after %v", r, err, time.Since(start))
		}
		if got := clk.times(); !equalDurations(got, []time.Duration{0, 20 * time.Millisecond, 40 * time.Millisecond}) {
			t.Fatalf("copies at %v", got)
		}
	})
}

// TestVirtualHedgePushback: after a retryable failure with a pushback, the
// next hedge goes out when the pushback says, not at once.
func TestVirtualHedgePushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			clk.mark()
			if n == 1 {
				grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "300"))
				return nil, status.Error(codes.Unavailable, "later")
			}
			return ok(n)
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour}))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := clk.times(); !equalDurations(got, []time.Duration{0, 300 * time.Millisecond}) {
			t.Fatalf("copies at %v", got)
		}
	})
}

// TestVirtualHedgeOnlyIdempotent: a method not declared idempotent is not
// hedged.
func TestVirtualHedgeOnlyIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: slow(30*time.Millisecond, nil)}
		c := vclient(t, srv, WithStrategy(simple(3)), WithHedging(Hedging{Delay: time.Millisecond}))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil || srv.calls.Load() != 1 {
			t.Fatalf("%v after %d attempts", err, srv.calls.Load())
		}
	})
}

// TestVirtualHedgeQuota: a winning hedge gets its tokens back, and a hedge
// the quota cannot pay for is not sent.
func TestVirtualHedgeQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := retry.NewTokenBucket(20)
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if n == 1 {
				time.Sleep(time.Second)
			}
			return ok(n)
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Millisecond, Quota: q, Cost: 15}))
		if r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil || string(r.GetPayload().GetBody()) != "2" {
			t.Fatalf("%v, %v", r, err)
		}
		if q.Available() != 20 {
			t.Fatalf("a winning hedge left the quota at %d, want 20", q.Available())
		}
		q.Take(10) // 10 left: less than a hedge costs
		start := time.Now()
		if r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil || string(r.GetPayload().GetBody()) != "1" || time.Since(start) != time.Second {
			t.Fatalf("with a short quota: %v, %v after %v", r, err, time.Since(start))
		}
	})
}

// TestVirtualHedgeBudget: a budget that allows no retry allows no hedge.
func TestVirtualHedgeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: slow(20*time.Millisecond, nil)}
		b := retry.NewBudget(retry.BudgetOptions{Ratio: -1, MinPerSecond: -1})
		c := vclient(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Millisecond, Budget: b}))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil || srv.calls.Load() != 1 {
			t.Fatalf("%v after %d attempts", err, srv.calls.Load())
		}
	})
}

// TestVirtualHedgeOffWhileThrottled: while Adaptive's send-rate limiter is
// limiting the scope, no hedge is sent.
func TestVirtualHedgeOffWhileThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: slow(20*time.Millisecond, nil)}
		a := retry.NewAdaptive(retry.AdaptiveOptions{})
		// One throttle starts the limiter; the retry's wait (1 s of
		// throttling backoff) does not fit the deadline, so nothing waits.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		retry.Do(ctx, a, func(context.Context) error { return retry.Throttled(errors.New("slow down")) }, retry.Scope("throttled"))
		if _, limiting := a.Rate("throttled"); !limiting {
			t.Fatal("the limiter is not limiting after a throttle")
		}
		c := vclient(t, srv, WithStrategy(a), WithIdempotentMethods(method), WithScope(func(*grpc.ClientConn, string) string { return "throttled" }),
			WithHedging(Hedging{Delay: time.Millisecond}))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil || srv.calls.Load() != 1 {
			t.Fatalf("%v after %d attempts", err, srv.calls.Load())
		}
	})
}

// TestVirtualHedgeCallerDeadline: hedges run under the caller's deadline,
// and all of them end with it.
func TestVirtualHedgeCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		var ended []time.Duration
		var mu sync.Mutex
		srv := &server{unary: func(ctx context.Context, _ int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			clk.mark()
			<-ctx.Done()
			mu.Lock()
			ended = append(ended, time.Since(clk.start))
			mu.Unlock()
			return nil, ctx.Err()
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: 5 * time.Millisecond, MaxAttempts: 3}))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v", err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := clk.times(); !equalDurations(got, []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond}) ||
			!equalDurations(ended, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}) {
			t.Fatalf("copies at %v, ended at %v", got, ended)
		}
	})
}
