package grpcretry

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestBreakerUnavailable: against a real server that fails UNAVAILABLE, the
// circuit of the ClientConn's target opens; then unary calls and streams
// fail at once with retry.ErrCircuitOpen, as UNAVAILABLE, and the server sees
// no call; once the server is back and OpenFor has passed, a probe closes
// the circuit, and streams go through again. (The breaker's counting of
// unary calls, through an outage, is TestConformance's.)
func TestBreakerUnavailable(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv := &server{
		unary: downWhile(&down),
		output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			if down.Load() {
				return status.Error(codes.Unavailable, "down")
			}
			return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
		},
	}
	var clock retrytest.Clock
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.Now})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b)}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	ctx := t.Context()
	scope := addr // cc.Target(), the default scope

	openCircuit(t, c, b, scope)
	before := srv.calls.Load()
	for range 5 {
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		var re *retry.Error
		if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &re) || re.Attempts != 0 || status.Code(err) != codes.Unavailable {
			t.Fatalf("unary call while open: %v (%v), want retry.ErrCircuitOpen after 0 attempts, UNAVAILABLE", err, status.Code(err))
		}
		if _, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{}); !errors.Is(err, retry.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
			t.Fatalf("stream while open: %v (%v), want retry.ErrCircuitOpen, UNAVAILABLE", err, status.Code(err))
		}
	}
	if got := srv.calls.Load() - before; got != 0 {
		t.Fatalf("the server saw %d calls while the circuit was open", got)
	}

	down.Store(false)
	clock.Advance(time.Second)
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
	var clock retrytest.Clock
	const probes = 2
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Probes: probes, Now: clock.Now})
	var gaveUp atomic.Pointer[retry.Error]
	trace := &retry.Trace{GiveUp: func(_ context.Context, _ string, e *retry.Error) { gaveUp.Store(e) }}
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithRetryOptions(retry.WithTrace(trace))}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	ctx := t.Context()
	scope := addr

	openCircuit(t, c, b, scope)

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
	clock.Advance(time.Second)
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
		if _, err := st.Recv(); !errors.Is(err, retry.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
			t.Fatalf("stream %d beyond the %d probes: %v (%v), want retry.ErrCircuitOpen, UNAVAILABLE", probes+i+1, probes, err, status.Code(err))
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
// before that, is opened then with every message kept so far, as the probe
// the breaker lets through at that send; its receive reports the probe's
// verdict, which closes the circuit.
func TestBreakerHalfOpenStreamOutgrowsBuffer(t *testing.T) {
	var got [][]int
	srv := &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
		input: sumInput(0, &got),
	}
	c, b, addr := halfOpenClient(t, srv)
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

// halfOpenClient serves srv, whose unary calls must fail UNAVAILABLE for
// now, and dials it through both interceptors with a breaker on a hand
// clock and a replay buffer of 50 bytes; it opens the circuit of the
// ClientConn's target, the address it returns, and ends its open spell:
// the circuit is half-open.
func halfOpenClient(t *testing.T, srv *server) (testpb.TestServiceClient, *retry.Breaker, string) {
	t.Helper()
	var clock retrytest.Clock
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.Now})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithBufferLimit(50)}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	openCircuit(t, c, b, addr)
	clock.Advance(time.Second)
	return c, b, addr
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
			var clock retrytest.Clock
			b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.Now})
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
			openCircuit(t, c, b, scope)
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

// downWhile is a unary handler that fails UNAVAILABLE while down is set.
func downWhile(down *atomic.Bool) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if down.Load() {
			return nil, status.Error(codes.Unavailable, "down")
		}
		return ok(n)
	}
}

// openCircuit fails unary calls through c until b's circuit of scope opens;
// the server's unary handler must fail UNAVAILABLE.
func openCircuit(t *testing.T, c testpb.TestServiceClient, b *retry.Breaker, scope string) {
	t.Helper()
	for i := 0; b.State(scope) != retry.BreakerOpen; i++ {
		if i == 5 {
			t.Fatalf("the circuit did not open after %d failed calls", i)
		}
		_, _ = c.UnaryCall(t.Context(), &testpb.SimpleRequest{})
	}
}

// heldStreams is a server whose unary calls fail UNAVAILABLE and whose
// server-streaming calls' first attempts wait for the test's verdict
// (nil: answer with a message), and a client on it whose interceptors
// share a breaker on a hand clock.
type heldStreams struct {
	srv     *server
	b       *retry.Breaker
	clock   retrytest.Clock
	c       testpb.TestServiceClient
	addr    string
	entered chan struct{}
	verdict chan error
}

func newHeldStreams(t *testing.T) *heldStreams {
	h := &heldStreams{entered: make(chan struct{}, 1), verdict: make(chan error, 1)}
	h.srv = &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
		output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			if n == 1 {
				h.entered <- struct{}{}
				if err := <-h.verdict; err != nil {
					return err
				}
			}
			return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
		},
	}
	h.b = retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: h.clock.Now})
	h.addr = serve(t, h.srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(h.b)}
	h.c = dial(t, h.addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	return h
}

// TestBreakerStreamOpenedBeforeTheCircuitOpens: a stream opened through a
// closed circuit is judged by that circuit, although its loop runs at the
// first receive. If the circuit opens in between, the receive reads the
// server's answer rather than refusing an attempt already made; if it lets
// probes through by then, the stream's late failure is no probe's: it
// leaves the probe's place to the stream's own retry, which closes the
// circuit.
func TestBreakerStreamOpenedBeforeTheCircuitOpens(t *testing.T) {
	for _, halfOpen := range []bool{false, true} {
		h := newHeldStreams(t)
		st, err := h.c.StreamingOutputCall(t.Context(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		<-h.entered
		openCircuit(t, h.c, h.b, h.addr)
		if !halfOpen {
			h.verdict <- nil
			if _, err := st.Recv(); err != nil {
				t.Fatalf("the stream the server answered: %v, want its message", err)
			}
			continue
		}
		h.clock.Advance(time.Second)
		h.verdict <- status.Error(codes.Unavailable, "down then")
		if _, err := st.Recv(); err != nil {
			t.Fatalf("the stream whose stale attempt failed: %v, want its retry's message", err)
		}
		if s := h.b.State(h.addr); s != retry.BreakerClosed {
			t.Fatalf("after the retry, the probe, succeeded: %v, want closed", s)
		}
	}
}

// TestBreakerStreamRefusalIsDecidedOnce: the breaker's answer when a
// stream is created is the call's: refused, the call reports a refusal of 0
// attempts (the Trace told, nothing sent, the probe's place left free),
// even if the circuit lets probes through by the time its loop runs; let
// through, the stream reaches the server. A clock whose open spell ends
// just after one reading puts that moment at each reading in turn.
func TestBreakerStreamRefusalIsDecidedOnce(t *testing.T) {
	for at := int64(1); at <= 4; at++ {
		var (
			now      atomic.Int64
			readings atomic.Int64
			clock    = func() time.Time {
				v := now.Load()
				if readings.Add(1) == at {
					now.Add(int64(time.Second)) // the spell ends just after this reading
				}
				return retrytest.Epoch.Add(time.Duration(v))
			}
			attempts, gaveUp atomic.Int64
		)
		trace := &retry.Trace{
			AttemptDone: func(context.Context, string, int, error) { attempts.Add(1) },
			GiveUp:      func(context.Context, string, *retry.Error) { gaveUp.Add(1) },
		}
		srv := &server{
			unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				return nil, status.Error(codes.Unavailable, "down")
			},
			output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
				return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
			},
		}
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock})
		addr := serve(t, srv)
		opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithRetryOptions(retry.WithTrace(trace))}
		c := dial(t, addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)), grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
		readings.Store(-1 << 62) // no spell ends while the circuit opens
		openCircuit(t, c, b, addr)
		attempts.Store(0)
		before := srv.calls.Load()
		readings.Store(0)
		st, err := c.StreamingOutputCall(t.Context(), &testpb.StreamingOutputCallRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		var re *retry.Error
		switch {
		case err == nil:
			if n := srv.calls.Load() - before; n != 1 {
				t.Fatalf("spell ending after reading %d: a stream let through reached the server %d times", at, n)
			}
		case errors.As(err, &re) && re.Reason == retry.ErrCircuitOpen:
			if re.Attempts != 0 || attempts.Load() != 0 || gaveUp.Load() == 0 || srv.calls.Load() != before {
				t.Fatalf("spell ending after reading %d: a refused stream reported %d attempts (the Trace %d), %d give-ups, %d calls reached the server; want a refusal of none",
					at, re.Attempts, attempts.Load(), gaveUp.Load(), srv.calls.Load()-before)
			}
			readings.Store(-1 << 62)
			now.Store(int64(time.Second)) // the spell is over, if it was not
			srv.unary = func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) { return ok(n) }
			if _, err := c.UnaryCall(t.Context(), &testpb.SimpleRequest{}); err != nil || b.State(addr) != retry.BreakerClosed {
				t.Fatalf("spell ending after reading %d: the probe after the refusal: %v, circuit %v; want it through, and closed", at, err, b.State(addr))
			}
		default:
			t.Fatalf("spell ending after reading %d: %v (%#v), want the message or a refusal", at, err, re)
		}
	}
}

// TestBreakerStreamOutgrowsBufferAsItsLoopStarts: a stream the half-open
// circuit left to its loop, whose messages outgrow the replay buffer once
// a receive has started the loop but before the breaker was consulted,
// waits for the loop's first attempt to open the stream: opened by the
// send, it would reach the server although the breaker then refused the
// call's only attempt.
func TestBreakerStreamOutgrowsBufferAsItsLoopStarts(t *testing.T) {
	var got [][]int
	srv := &server{
		unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		},
		input: sumInput(0, &got),
	}
	var (
		clock   retrytest.Clock
		hold    atomic.Bool
		started = make(chan struct{})
		release = make(chan struct{})
		opened  = make(chan struct{}, 1)
	)
	trace := &retry.Trace{CallStart: func(ctx context.Context, _ string) context.Context {
		if hold.CompareAndSwap(true, false) {
			close(started)
			<-release
		}
		return ctx
	}}
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock.Now})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithBufferLimit(50), WithRetryOptions(retry.WithTrace(trace))}
	count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		opened <- struct{}{}
		return streamer(ctx, desc, cc, method, opts...)
	}
	c := dial(t, addr,
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(opts...), count))
	openCircuit(t, c, b, addr)
	clock.Advance(time.Second)

	st, err := c.StreamingInputCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(40)}); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	received := make(chan error, 1)
	go func() {
		var m testpb.StreamingInputCallResponse
		received <- st.RecvMsg(&m) // runs the loop, held before the breaker
	}()
	<-started
	sent := make(chan error, 1)
	go func() { sent <- st.Send(&testpb.StreamingInputCallRequest{Payload: payload(40)}) }()
	select {
	case <-opened: // the send opened the stream itself
	case <-time.After(100 * time.Millisecond): // the send waits for the loop
	}
	probe, err := b.Allow(addr) // the probe's one place, taken elsewhere
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	err = <-received
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ErrCircuitOpen || re.Attempts != 0 {
		t.Fatalf("the receive: %v, want a refusal of 0 attempts", err)
	}
	if err := <-sent; err != io.EOF {
		t.Fatalf("the send that outgrew the buffer: %v, want io.EOF (the receive tells why)", err)
	}
	if len(opened) != 0 {
		t.Fatal("the stream was opened although the breaker refused its only attempt")
	}
	probe.Done(t.Context(), nil)
	if s := b.State(addr); s != retry.BreakerClosed {
		t.Fatalf("after the probe: %v, want closed", s)
	}
}

// TestBreakerAbandonedStreamsHoldNoProbe: a stream abandoned unread (its
// context cancelled) leaves the half-open circuit's probe place free for
// the next call, whether it was created as the open spell ended (State
// saw the circuit open, Allow let a probe through) or opened before its
// first receive because its messages outgrew the replay buffer.
func TestBreakerAbandonedStreamsHoldNoProbe(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(map[bool]string{false: "created as the spell ends", true: "opened early"}[early], func(t *testing.T) { abandonedStream(t, early) })
	}
}

func abandonedStream(t *testing.T, early bool) {
	var (
		now      atomic.Int64
		readings atomic.Int64
		clock    = func() time.Time {
			v := now.Load()
			if readings.Add(1) == 1 {
				now.Add(int64(time.Second)) // the spell ends just after State's reading
			}
			return retrytest.Epoch.Add(time.Duration(v))
		}
		down atomic.Bool
		got  [][]int
	)
	down.Store(true)
	srv := &server{
		unary: downWhile(&down),
		input: sumInput(0, &got),
	}
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second, Now: clock})
	addr := serve(t, srv)
	opts := []Option{WithStrategy(simple(3)), WithBreaker(b), WithBufferLimit(50)}
	c := dial(t, addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)), grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	readings.Store(-1 << 62)
	openCircuit(t, c, b, addr)
	if early {
		now.Store(int64(time.Second)) // half-open
	} else {
		readings.Store(0)
	}
	ctx, cancel := context.WithCancel(t.Context())
	st, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	readings.Store(-1 << 62)
	if early {
		for range 2 { // the second outgrows the buffer: opened now, a probe
			if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(40)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel() // abandoned, never read
	down.Store(false)
	// The place is freed as the call's context ends, in a goroutine of
	// its own for a stream opened early: the next call may have to try
	// again, for a while.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		_, err := c.UnaryCall(t.Context(), &testpb.SimpleRequest{})
		if err == nil {
			break
		}
		if !errors.Is(err, retry.ErrCircuitOpen) || time.Since(start) > 5*time.Second {
			t.Fatalf("the next call after the abandoned stream: %v; want it through as the probe", err)
		}
	}
	if s := b.State(addr); s != retry.BreakerClosed {
		t.Fatalf("after the probe: %v, want closed", s)
	}
}

// TestBreakerHalfOpenStreamRefusedByGrpcFreesItsProbe: half-open, a stream
// whose first send outgrows the replay buffer is opened early as the
// probe; grpc refuses the message (larger than MaxCallSendMsgSize), which
// ends the stream. The call is over (its receive returns that error), and
// the probe's place is free at once for the next call, which closes the
// circuit, rather than held until OpenFor runs out.
func TestBreakerHalfOpenStreamRefusedByGrpcFreesItsProbe(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var got [][]int
	srv := &server{unary: downWhile(&down), input: sumInput(0, &got)}
	c, b, addr := halfOpenClient(t, srv)
	st, err := c.StreamingInputCall(t.Context(), grpc.MaxCallSendMsgSize(100))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Send(&testpb.StreamingInputCallRequest{Payload: payload(200)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a send larger than MaxCallSendMsgSize: %v, want RESOURCE_EXHAUSTED", err)
	}
	down.Store(false)
	if _, err := c.UnaryCall(t.Context(), &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("the next call after the stream grpc ended: %v; want it through as the probe", err)
	}
	if s := b.State(addr); s != retry.BreakerClosed {
		t.Fatalf("after the probe: %v, want closed", s)
	}
	if _, err := st.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the receive after the refused send: %v, want its RESOURCE_EXHAUSTED", err)
	}
	if st.Context().Err() == nil {
		t.Fatal("the stream's Context is not done once grpc ended the stream")
	}
	if len(got) != 0 {
		t.Fatalf("the server read %v", got)
	}
}
