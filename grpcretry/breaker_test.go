package grpcretry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// handClock is a clock the test moves by hand.
type handClock struct{ d atomic.Int64 }

var handEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *handClock) now() time.Time           { return handEpoch.Add(time.Duration(c.d.Load())) }
func (c *handClock) advance(by time.Duration) { c.d.Add(int64(by)) }

// TestBreakerUnavailable: against a real server that fails UNAVAILABLE, the
// circuit of the ClientConn's target opens; then unary calls and streams
// fail at once with retry.ErrCircuitOpen and the server sees no call; once
// the server is back and OpenFor has passed, a probe closes the circuit.
func TestBreakerUnavailable(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv := &server{
		unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if down.Load() {
				return nil, status.Error(codes.Unavailable, "down")
			}
			return ok(n)
		},
		output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			if down.Load() {
				return status.Error(codes.Unavailable, "down")
			}
			return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
		},
	}
	var clock handClock
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.now})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b)}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	ctx := t.Context()
	scope := addr // cc.Target(), the default scope

	for i := 0; b.State(scope) != retry.BreakerOpen; i++ {
		if i == 5 {
			t.Fatalf("the circuit did not open after %d failed calls (%d attempts); state of %q: %v", i, srv.calls.Load(), scope, b.State(scope))
		}
		if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i+1, err)
		}
	}
	before := srv.calls.Load()
	for range 5 {
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		var re *retry.Error
		if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &re) || re.Attempts != 0 {
			t.Fatalf("unary call while open: %v, want retry.ErrCircuitOpen after 0 attempts", err)
		}
		if _, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{}); !errors.Is(err, retry.ErrCircuitOpen) {
			t.Fatalf("stream while open: %v, want retry.ErrCircuitOpen", err)
		}
	}
	if got := srv.calls.Load() - before; got != 0 {
		t.Fatalf("the server saw %d calls while the circuit was open", got)
	}

	down.Store(false)
	clock.advance(time.Second)
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if s := b.State(scope); s != retry.BreakerClosed {
		t.Fatalf("after a successful probe: %v, want closed", s)
	}
	st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("stream once closed: %v", err)
	}
	if got := srv.calls.Load() - before; got != 2 {
		t.Fatalf("after the circuit closed: the server saw %d calls, want 2 (the probe, the stream)", got)
	}
}

// TestBreakerStreams: streams consult the breaker as Do's attempts do
// (issue 25). An open circuit refuses a stream before it is opened, through
// the call's loop, so that its Trace sees the refusal; a half-open one lets
// at most Probes streams reach the server, and refuses the others before
// they are opened.
func TestBreakerStreams(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	srv := &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
		output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			if down.Load() {
				return status.Error(codes.Unavailable, "down")
			}
			entered <- struct{}{}
			select {
			case <-release:
			case <-s.Context().Done():
				return s.Context().Err()
			}
			return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
		},
	}
	var clock handClock
	const probes = 2
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Probes: probes, Now: clock.now})
	var gaveUp atomic.Pointer[retry.Error]
	trace := &retry.Trace{GiveUp: func(_ context.Context, _ string, e *retry.Error) { gaveUp.Store(e) }}
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithRetryOptions(retry.WithTrace(trace))}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	ctx := t.Context()
	scope := addr

	for i := 0; b.State(scope) != retry.BreakerOpen; i++ {
		if i == 5 {
			t.Fatalf("the circuit did not open after %d failed calls", i)
		}
		_, _ = c.UnaryCall(ctx, &testpb.SimpleRequest{})
	}

	// Open: refused before it is opened, and the Trace is told.
	gaveUp.Store(nil)
	before := srv.calls.Load()
	_, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	var re *retry.Error
	if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &re) || re.Attempts != 0 {
		t.Fatalf("stream while open: %v, want retry.ErrCircuitOpen after 0 attempts", err)
	}
	if e := gaveUp.Load(); e == nil || !errors.Is(e.Reason, retry.ErrCircuitOpen) || e.Attempts != 0 {
		t.Fatalf("the Trace's GiveUp saw %v, want the refusal (retry.ErrCircuitOpen, 0 attempts)", e)
	}
	if got := srv.calls.Load() - before; got != 0 {
		t.Fatalf("the server saw %d calls while the circuit was open", got)
	}

	// Half-open: of five streams, the first probes receives reach the
	// server; the others are refused without being opened.
	down.Store(false)
	clock.advance(time.Second)
	if s := b.State(scope); s != retry.BreakerHalfOpen {
		t.Fatalf("state %v, want half-open", s)
	}
	const streams = 5
	var sts []testpb.TestService_StreamingOutputCallClient
	for range streams {
		st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatalf("stream while half-open: %v", err)
		}
		sts = append(sts, st)
	}
	results := make(chan error, streams)
	for _, st := range sts[:probes] {
		go func() { _, err := st.Recv(); results <- err }()
	}
	for range probes {
		<-entered // each probe holds its place in the server
	}
	for i, st := range sts[probes:] {
		if _, err := st.Recv(); !errors.Is(err, retry.ErrCircuitOpen) {
			t.Fatalf("stream %d beyond the %d probes: %v, want retry.ErrCircuitOpen", probes+i+1, probes, err)
		}
	}
	close(release)
	for range probes {
		if err := <-results; err != nil {
			t.Fatalf("probe: %v", err)
		}
	}
	if got := srv.calls.Load() - before; got != probes {
		t.Fatalf("while half-open the server saw %d streams, want %d (the probes)", got, probes)
	}
	if s := b.State(scope); s != retry.BreakerClosed {
		t.Fatalf("after the probes succeeded: %v, want closed", s)
	}
}

// TestBreakerHalfOpenStreamOutgrowsBuffer: a stream the half-open circuit
// leaves to its first receive, whose messages outgrow the replay buffer
// before that, is opened then with every message kept so far, and the
// breaker's consultation at the receive makes it the probe.
func TestBreakerHalfOpenStreamOutgrowsBuffer(t *testing.T) {
	var got [][]int
	srv := &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
		input: sumInput(0, &got),
	}
	var clock handClock
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.now})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithBufferLimit(50)}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	for i := 0; b.State(addr) != retry.BreakerOpen; i++ {
		if i == 5 {
			t.Fatalf("the circuit did not open after %d failed calls", i)
		}
		_, _ = c.UnaryCall(t.Context(), &testpb.SimpleRequest{})
	}
	clock.advance(time.Second)
	st, err := c.StreamingInputCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the second outgrows the 50 bytes
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(40)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.CloseAndRecv()
	if err != nil || r.GetAggregatedPayloadSize() != 120 {
		t.Fatalf("CloseAndRecv = %v, %v; want a sum of 120", r, err)
	}
	if len(got) != 1 || len(got[0]) != 3 {
		t.Errorf("the server received %v, want one stream of the three messages", got)
	}
	if s := b.State(addr); s != retry.BreakerClosed {
		t.Errorf("after the probe succeeded: %v, want closed", s)
	}
}

// TestBreakerOfRetryOptions: a breaker given as retry.WithBreaker in
// WithRetryOptions, alone or replacing WithBreaker's, is the one streams
// consult before they are opened, in the scope the loop gives the call (a
// retry.Scope of WithRetryOptions included), as the unary calls' loop
// does: with its circuit open a stream is refused and the server sees
// nothing, whatever the state of a breaker or scope it replaced.
func TestBreakerOfRetryOptions(t *testing.T) {
	for _, tc := range []struct {
		name             string
		replaced, scoped bool
	}{
		{"alone", false, false},
		{"replacing WithBreaker's", true, false},
		{"with a retry.Scope of its own", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &server{
				unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
					return nil, status.Error(codes.Unavailable, "down")
				},
				output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
					return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
				},
			}
			var clock handClock
			b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.now})
			addr := serve(t, srv)
			opts := []Option{WithStrategy(simple(3)), WithRetryOptions(retry.WithBreaker(b))}
			if tc.replaced {
				opts = append(opts, WithBreaker(retry.NewBreaker(retry.BreakerOptions{})))
			}
			scope := addr // cc.Target(), the default scope
			if tc.scoped {
				scope = "svc" // the loop's, which the streams must consult too
				opts = append(opts, WithRetryOptions(retry.Scope(scope)))
			}
			// Below grpcretry's, an interceptor counts the streams opened
			// on the connection: the server may not have seen one yet.
			var opened atomic.Int64
			count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				opened.Add(1)
				return streamer(ctx, desc, cc, method, opts...)
			}
			c := dial(t, addr,
				grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
				grpc.WithChainStreamInterceptor(StreamClientInterceptor(opts...), count))
			ctx := t.Context()
			for i := 0; b.State(scope) != retry.BreakerOpen; i++ {
				if i == 5 {
					t.Fatalf("the circuit did not open after %d failed calls", i)
				}
				_, _ = c.UnaryCall(ctx, &testpb.SimpleRequest{})
			}
			before := srv.calls.Load()
			st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			if !errors.Is(err, retry.ErrCircuitOpen) {
				t.Fatalf("stream while the circuit is open: %v, want retry.ErrCircuitOpen", err)
			}
			if got := srv.calls.Load() - before; got != 0 || opened.Load() != 0 {
				t.Fatalf("%d streams opened, %d seen by the server, while the circuit was open", opened.Load(), got)
			}
		})
	}
}
