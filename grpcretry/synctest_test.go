package grpcretry

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// The tests of this file run in virtual time: a synctest bubble holds a real
// grpc.Server and ClientConn joined by an in-memory listener (a bubble
// cannot hold sockets), so that waits, deadlines, attempt timeouts and
// hedging delays are exact and cost no real time.

// vclient serves srv in the current bubble and dials it through both
// interceptors built from opts. Everything is closed by t's cleanup.
func vclient(t *testing.T, srv *server, opts ...Option) testpb.TestServiceClient {
	t.Helper()
	return bufClient(t, srv,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
}

// bufClient serves srv over bufconn and dials it with grpc's retry off and
// opts. Everything is closed by t's cleanup.
func bufClient(t *testing.T, srv testpb.TestServiceServer, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, srv)
	go gs.Serve(lis)
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufconn", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
	})
	return testpb.NewTestServiceClient(cc)
}

// clock records when each attempt reached the server, in virtual time.
type clock struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

func newClock() *clock { return &clock{start: time.Now()} }

func (c *clock) mark() {
	c.mu.Lock()
	c.at = append(c.at, time.Since(c.start))
	c.mu.Unlock()
}

func (c *clock) times() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.at...)
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestVirtualPushbackWait: the retry after a pushback of 250 ms reaches the
// server 250 ms after the failure.
func TestVirtualPushbackWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			clk.mark()
			if n == 1 {
				grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "250"))
				return nil, status.Error(codes.Unavailable, "later")
			}
			return ok(n)
		}}
		c := vclient(t, srv, WithStrategy(simple(2)))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := clk.times(); !equalDurations(got, []time.Duration{0, 250 * time.Millisecond}) {
			t.Fatalf("attempts at %v", got)
		}
	})
}

// TestVirtualAttemptTimeout: an attempt is cut at exactly the attempt
// timeout, and the retry of an idempotent method follows at once.
func TestVirtualAttemptTimeout(t *testing.T) {
	for _, idem := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			clk := newClock()
			srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				clk.mark()
				if n == 1 {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return ok(n)
			}}
			var info retry.Info
			opts := []Option{WithStrategy(simple(2)), WithAttemptTimeout(100 * time.Millisecond),
				WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) { info = retry.Classify(err) }))}
			if idem {
				opts = append(opts, WithIdempotentMethods("/grpc.testing.TestService/"))
			}
			c := vclient(t, srv, opts...)
			_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if !info.Timeout || info.Fault != retry.FaultServer {
				t.Errorf("idempotent %v: attempt timeout classified %+v", idem, info)
			}
			want := []time.Duration{0}
			if idem {
				want = append(want, 100*time.Millisecond)
			}
			if idem != (err == nil) || (!idem && status.Code(err) != codes.DeadlineExceeded) || !equalDurations(clk.times(), want) {
				t.Errorf("idempotent %v: %v, attempts at %v", idem, err, clk.times())
			}
		})
	}
	// Adaptive does not retry timeouts by default.
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		c := vclient(t, srv, WithAttemptTimeout(10*time.Millisecond), WithIdempotentMethods(method))
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err == nil || srv.calls.Load() != 1 {
			t.Fatalf("the default Adaptive retried a timeout: %v, %d calls", err, srv.calls.Load())
		}
	})
}

// TestVirtualStreamAttemptTimeout: the attempt timeout bounds a stream
// attempt until its first message, and not after it.
func TestVirtualStreamAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			clk.mark()
			if n == 1 {
				<-s.Context().Done()
				return s.Context().Err()
			}
			if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
			time.Sleep(time.Second) // far past the attempt timeout, after the commit
			return s.Send(&testpb.StreamingOutputCallResponse{})
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithAttemptTimeout(100*time.Millisecond),
			WithIdempotentMethods("/grpc.testing.TestService/StreamingOutputCall"))
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := st.Recv(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if _, err := st.Recv(); err == nil || !equalDurations(clk.times(), []time.Duration{0, 100 * time.Millisecond}) {
			t.Fatalf("end: %v; attempts at %v", err, clk.times())
		}
	})
}

// TestVirtualCallerDeadline: a wait that could not end before the caller's
// deadline is not started, and the caller's DEADLINE_EXCEEDED is not
// retried.
func TestVirtualCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "10000"))
			return nil, status.Error(codes.Unavailable, "down")
		}}
		c := vclient(t, srv, WithStrategy(simple(5)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		if !errors.Is(err, retry.ErrDeadline) || srv.calls.Load() != 1 || time.Since(start) != 0 {
			t.Fatalf("a 10 s pushback under a 5 s deadline: %v after %d calls and %v", err, srv.calls.Load(), time.Since(start))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		srv := &server{unary: func(ctx context.Context, _ int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			<-ctx.Done()
			return nil, status.Error(codes.DeadlineExceeded, "too slow")
		}}
		c := vclient(t, srv, WithStrategy(simple(5)), WithIdempotentMethods(method))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || srv.calls.Load() != 1 || time.Since(start) != 20*time.Millisecond {
			t.Fatalf("the caller's deadline: %v after %d calls and %v", err, srv.calls.Load(), time.Since(start))
		}
	})
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

// TestVirtualSendAfterFailedAttempt: a send on an attempt the server has
// already ended keeps the message and returns nil, and the receive that
// follows retries with every message, the one sent after the failure too.
func TestVirtualSendAfterFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got [][]int
		srv := &server{input: func(n int, s testpb.TestService_StreamingInputCallServer) error {
			if n == 1 {
				return status.Error(codes.Unavailable, "going away")
			}
			return sumInput(0, &got)(n, s)
		}}
		c := vclient(t, srv, WithStrategy(simple(3)))
		st, err := c.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(1)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the server has ended the attempt, and the client knows
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(2)}); err != nil {
			t.Fatalf("send after the attempt ended: %v", err)
		}
		rs := st.(*grpc.GenericClientStream[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]).ClientStream.(*retryStream)
		rs.mu.Lock()
		broken := rs.broken
		rs.mu.Unlock()
		if !broken {
			t.Fatal("the second send did not see the attempt end")
		}
		r, err := st.CloseAndRecv()
		if err != nil || r.GetAggregatedPayloadSize() != 3 || len(got) != 1 || len(got[0]) != 2 {
			t.Fatalf("%v, %v; the retry read %v", r, err, got)
		}
	})
}

// TestVirtualStreamOutlivesItsLoop: a stream whose attempt the loop opened
// (a retry, or the first attempt of a half-open circuit) keeps delivering
// messages after it committed, when WithRetryOptions bounds the loop with
// retry.MaxElapsed or retry.AttemptTimeout: those bound the loop's
// attempts, whose contexts end when retry.Do returns, not the call.
func TestVirtualStreamOutlivesItsLoop(t *testing.T) {
	bounds := map[string]retry.Option{"MaxElapsed": retry.MaxElapsed(time.Minute), "AttemptTimeout": retry.AttemptTimeout(time.Minute)}
	for name, bound := range bounds {
		for _, halfOpen := range []bool{false, true} {
			t.Run(name+map[bool]string{false: ", a retry", true: ", half-open"}[halfOpen], func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := &server{
						unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
							return nil, status.Error(codes.Unavailable, "down")
						},
						output: func(n int, req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
							if n == 1 && !halfOpen {
								return status.Error(codes.Unavailable, "not yet")
							}
							return sendsAfter(0, 10*time.Millisecond, 10*time.Millisecond)(n, req, s)
						},
					}
					opts := []Option{WithStrategy(simple(3)), WithRetryOptions(bound)}
					var b *retry.Breaker
					if halfOpen {
						b = retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second})
						opts = append(opts, WithBreaker(b))
					}
					c := vclient(t, srv, opts...)
					if halfOpen {
						openCircuit(t, c, b, "passthrough:///bufconn")
						time.Sleep(time.Second)
					}
					st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
					if err != nil {
						t.Fatal(err)
					}
					recvAll(t, st, 3)
				})
			})
		}
	}
}

// TestVirtualStreamRetryBoundedByItsLoop: until its first message, a retry
// is still bounded by what bounds the loop's attempts: retry.MaxElapsed and
// retry.AttemptTimeout of WithRetryOptions cut a retry that never answers.
func TestVirtualStreamRetryBoundedByItsLoop(t *testing.T) {
	bounds := map[string]retry.Option{"MaxElapsed": retry.MaxElapsed(50 * time.Millisecond), "AttemptTimeout": retry.AttemptTimeout(50 * time.Millisecond)}
	for name, bound := range bounds {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
					if n == 1 {
						return status.Error(codes.Unavailable, "not yet")
					}
					<-s.Context().Done()
					return s.Context().Err()
				}}
				c := vclient(t, srv, WithStrategy(simple(3)), WithRetryOptions(bound))
				start := time.Now()
				st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.Recv(); err == nil || time.Since(start) != 50*time.Millisecond {
					t.Fatalf("a retry that never answers: %v after %v, want an error after 50ms", err, time.Since(start))
				}
			})
		})
	}
}

// TestVirtualStreamAttemptTimeoutEndsAtFirstMessage: WithAttemptTimeout
// bounds a stream attempt until its first response message, not until the
// loop has done with it: a Trace that takes longer than the timeout after
// the first message arrived (at 10 ms of 40) does not cancel the stream,
// whose second message comes at 110 ms.
func TestVirtualStreamAttemptTimeoutEndsAtFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{output: sendsAfter(10*time.Millisecond, 100*time.Millisecond)}
		slowTrace := &retry.Trace{AttemptDone: func(context.Context, string, int, error) { time.Sleep(60 * time.Millisecond) }}
		c := vclient(t, srv, WithStrategy(simple(3)), WithAttemptTimeout(40*time.Millisecond), WithRetryOptions(retry.WithTrace(slowTrace)))
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		recvAll(t, st, 2)
	})
}

// sendsAfter is a server-streaming handler that sends a message after each
// of waits, one after the other, and ends OK; it returns when its call
// ends.
func sendsAfter(waits ...time.Duration) func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
	return func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		for _, wait := range waits {
			select {
			case <-time.After(wait):
			case <-s.Context().Done():
				return s.Context().Err()
			}
			if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)}); err != nil {
				return err
			}
		}
		return nil
	}
}

// recvAll receives n messages from st, and then its end, io.EOF.
func recvAll(t *testing.T, st grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse], n int) {
	t.Helper()
	for i := range n {
		if _, err := st.Recv(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}
