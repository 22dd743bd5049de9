package grpcretry

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// failing answers every attempt before the nth with code, then succeeds.
func failing(code codes.Code, n int) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(_ context.Context, a int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if a < n {
			return nil, status.Error(code, "failing")
		}
		return ok(a)
	}
}

// TestUnaryStatusCodes checks the classification table: which codes are
// retried for every call, which only for idempotent methods, which never.
func TestUnaryStatusCodes(t *testing.T) {
	always := []codes.Code{codes.Unavailable, codes.ResourceExhausted}
	idempotentOnly := []codes.Code{codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Aborted}
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		for _, idem := range []bool{false, true} {
			srv := &server{unary: failing(code, 2)}
			opts := []Option{WithStrategy(simple(2))}
			if idem {
				opts = append(opts, WithIdempotentMethods(method))
			}
			c := client(t, srv, opts...)
			_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			want := slices.Contains(always, code) || (idem && slices.Contains(idempotentOnly, code))
			if got := srv.calls.Load() == 2; got != want {
				t.Errorf("%v (idempotent %v): retried %v, want %v (err %v)", code, idem, got, want, err)
			}
			if want != (err == nil) {
				t.Errorf("%v (idempotent %v): err %v", code, idem, err)
			}
			if err != nil {
				var re *retry.Error
				if !errors.As(err, &re) || status.Code(err) != code {
					t.Errorf("%v: err %v is not a *retry.Error with the code", code, err)
				}
			}
		}
	}
}

// TestIdempotentCallOption marks one call idempotent, and NoRetry one call
// as a single attempt.
func TestIdempotentCallOption(t *testing.T) {
	srv := &server{unary: failing(codes.Internal, 2)}
	c := client(t, srv, WithStrategy(simple(2)))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, Idempotent()); err != nil {
		t.Fatalf("idempotent call: %v", err)
	}
	srv2 := &server{unary: failing(codes.Unavailable, 2)}
	c2 := client(t, srv2, WithStrategy(simple(2)))
	if _, err := c2.UnaryCall(context.Background(), &testpb.SimpleRequest{}, NoRetry()); status.Code(err) != codes.Unavailable || srv2.calls.Load() != 1 {
		t.Fatalf("NoRetry: %v after %d calls", err, srv2.calls.Load())
	}
}

// TestWithRetryableCodes replaces A6's retryableStatusCodes.
func TestWithRetryableCodes(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 2)}
	c := client(t, srv, WithStrategy(simple(2)), WithRetryableCodes(codes.Aborted))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err == nil || srv.calls.Load() != 1 {
		t.Fatalf("UNAVAILABLE outside the list was retried: %v, %d calls", err, srv.calls.Load())
	}
	srv2 := &server{unary: failing(codes.Aborted, 2)}
	c2 := client(t, srv2, WithStrategy(simple(2)), WithRetryableCodes(codes.Aborted))
	if _, err := c2.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("ABORTED in the list was not retried: %v", err)
	}
}

// TestNeverLeftClient: a call that never reached a server (a refused
// connection) is retried even when no code is retryable, as A6's
// transparent retries are; an UNAVAILABLE the server sent is not.
func TestNeverLeftClient(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	attempts := 0
	var infos []retry.Info
	opts := []Option{WithStrategy(simple(3)), WithRetryableCodes(), WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
		attempts++
		infos = append(infos, retry.Classify(err))
	}))}
	c := dial(t, addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)))
	_, err = c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if status.Code(err) != codes.Unavailable || attempts != 3 {
		t.Fatalf("refused connection: %v after %d attempts, want UNAVAILABLE after 3", err, attempts)
	}
	if infos[0].Safety != retry.Safe {
		t.Fatalf("a call that never left is %v, want safe", infos[0].Safety)
	}

	srv := &server{unary: failing(codes.Unavailable, 2)}
	c = client(t, srv, WithStrategy(simple(3)), WithRetryableCodes())
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err == nil || srv.calls.Load() != 1 {
		t.Fatalf("server's UNAVAILABLE retried with no retryable codes: %v, %d calls", err, srv.calls.Load())
	}
}

// TestLocalResourceExhausted: grpc's own message-size limit is not the
// server throttling, and is not retried.
func TestLocalResourceExhausted(t *testing.T) {
	srv := &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, 1000)}}, nil
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.MaxCallRecvMsgSize(100))
	if status.Code(err) != codes.ResourceExhausted || srv.calls.Load() != 1 {
		t.Fatalf("%v after %d calls, want RESOURCE_EXHAUSTED after 1", err, srv.calls.Load())
	}
	if info := retry.Classify(err); info.Throttle || info.Fault != retry.FaultClient {
		t.Fatalf("a local size limit classified as throttling: %+v", info)
	}
}

// TestThrottle: RESOURCE_EXHAUSTED from the server is a throttling error.
func TestThrottle(t *testing.T) {
	srv := &server{unary: failing(codes.ResourceExhausted, 9)}
	var info retry.Info
	c := client(t, srv, WithStrategy(simple(1)), WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) { info = retry.Classify(err) })))
	c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if !info.Throttle || !info.Retryable() {
		t.Fatalf("RESOURCE_EXHAUSTED: %+v, want a retryable throttle", info)
	}
}

// TestPreviousAttempts: each retry carries grpc-previous-rpc-attempts.
func TestPreviousAttempts(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 3)}
	c := client(t, srv, WithStrategy(simple(3)))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.seen(); !slices.Equal(got, []string{"", "1", "2"}) {
		t.Fatalf("grpc-previous-rpc-attempts %q, want none, 1, 2", got)
	}
}

// pushback answers the first attempt with UNAVAILABLE and the given
// grpc-retry-pushback-ms values, and succeeds after.
func pushback(values ...string) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n > 1 {
			return ok(n)
		}
		md := metadata.MD{}
		for _, v := range values {
			md.Append(PushbackKey, v)
		}
		grpc.SetTrailer(ctx, md)
		return nil, status.Error(codes.Unavailable, "pushed back")
	}
}

// TestPushback checks the forms of grpc-retry-pushback-ms through the delays
// the strategy hands out: a valid value is the wait (the backoff, 1 ms, is
// shorter), a negative, malformed or repeated one stops retrying, and one
// beyond the client's cap ends the call at once.
func TestPushback(t *testing.T) {
	const none = -1 // no retry
	for _, tc := range []struct {
		values []string
		delay  time.Duration
		reason error
	}{
		{nil, time.Second, nil}, // the backoff
		{[]string{"250"}, 250 * time.Millisecond, nil},
		{[]string{"10"}, 10 * time.Millisecond, nil}, // A6: exactly, shorter than the backoff too
		{[]string{"0"}, 0, nil},
		{[]string{"-1"}, none, ErrPushback},
		{[]string{"soon"}, none, ErrPushback},
		{[]string{"1.5"}, none, ErrPushback},
		{[]string{"10", "20"}, none, ErrPushback},
		{[]string{"120000"}, none, retry.ErrRetryAfterTooLong},                  // over WithMaxRetryAfter's minute
		{[]string{"99999999999999999999999"}, none, retry.ErrRetryAfterTooLong}, // saturates
	} {
		srv := &server{unary: pushback(tc.values...)}
		rec := &recorder{inner: &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(time.Second)}}
		c := client(t, srv, WithStrategy(rec), WithMaxRetryAfter(time.Minute))
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if tc.delay == none {
			if !errors.Is(err, tc.reason) || srv.calls.Load() != 1 {
				t.Errorf("pushback %q: %v after %d calls, want %v", tc.values, err, srv.calls.Load(), tc.reason)
			}
			continue
		}
		if err != nil || !slices.Equal(rec.got(), []time.Duration{tc.delay}) {
			t.Errorf("pushback %q: err %v, delays %v, want %v", tc.values, err, rec.got(), tc.delay)
		}
	}
}

// retryInfo answers the first attempt with a google.rpc.RetryInfo of d and,
// if pb is set, a pushback.
func retryInfo(code codes.Code, d time.Duration, pb string) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n > 1 {
			return ok(n)
		}
		if pb != "" {
			grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, pb))
		}
		st, err := status.New(code, "later").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			panic(err)
		}
		return nil, st.Err()
	}
}

// TestRetryInfo: google.rpc.RetryInfo's retry_delay is a minimum wait, the
// longer of it and a pushback wins, and the client's cap bounds it; it does
// not make a code retryable that is not.
func TestRetryInfo(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		d      time.Duration
		pb     string
		delays []time.Duration
		reason error
	}{
		{codes.Unavailable, 3 * time.Second, "", []time.Duration{3 * time.Second}, nil},
		{codes.Unavailable, time.Second, "2000", []time.Duration{2 * time.Second}, nil},
		{codes.Unavailable, 4 * time.Second, "2000", []time.Duration{4 * time.Second}, nil},
		{codes.Unavailable, -time.Second, "", []time.Duration{time.Millisecond}, nil},
		{codes.Unavailable, 2 * time.Minute, "", nil, retry.ErrRetryAfterTooLong},
		{codes.FailedPrecondition, time.Second, "", nil, retry.ErrNotRetryable},
	} {
		srv := &server{unary: retryInfo(tc.code, tc.d, tc.pb)}
		rec := &recorder{inner: &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(time.Millisecond)}}
		c := client(t, srv, WithStrategy(rec), WithMaxRetryAfter(time.Minute))
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if tc.reason != nil {
			if !errors.Is(err, tc.reason) {
				t.Errorf("%v RetryInfo %v: %v, want %v", tc.code, tc.d, err, tc.reason)
			}
			continue
		}
		if err != nil || !slices.Equal(rec.got(), tc.delays) {
			t.Errorf("%v RetryInfo %v pushback %q: %v, delays %v, want %v", tc.code, tc.d, tc.pb, err, rec.got(), tc.delays)
		}
	}
}

// TestCallerDeadline: a wait that would end past the caller's deadline is not
// started, every attempt's deadline is within the caller's, and the caller's
// own DEADLINE_EXCEEDED is never retried.
func TestCallerDeadline(t *testing.T) {
	var deadlines []time.Time
	srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, d)
		grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "10000"))
		return nil, status.Error(codes.Unavailable, "down")
	}}
	c := client(t, srv, WithStrategy(simple(5)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	caller, _ := ctx.Deadline()
	start := time.Now()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if !errors.Is(err, retry.ErrDeadline) || srv.calls.Load() != 1 || time.Since(start) > 4*time.Second {
		t.Fatalf("a 10 s pushback under a 5 s deadline: %v after %d calls", err, srv.calls.Load())
	}
	// The server reckons the deadline from grpc-timeout when the call arrives,
	// so it may be later by the time on the wire.
	if len(deadlines) != 1 || deadlines[0].IsZero() || deadlines[0].After(caller.Add(100*time.Millisecond)) {
		t.Fatalf("the server saw deadline %v, the caller's is %v", deadlines, caller)
	}

	block := &server{unary: func(ctx context.Context, _ int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		<-ctx.Done()
		return nil, status.Error(codes.DeadlineExceeded, "too slow")
	}}
	c = client(t, block, WithStrategy(simple(5)), WithIdempotentMethods(method))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	_, err = c.UnaryCall(ctx2, &testpb.SimpleRequest{})
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || block.calls.Load() != 1 {
		t.Fatalf("the caller's deadline: %v after %d calls", err, block.calls.Load())
	}
}

// TestDefaultStrategy: with no options the interceptor retries UNAVAILABLE
// through its own Adaptive strategy.
func TestDefaultStrategy(t *testing.T) {
	srv := &server{unary: failing(codes.Unavailable, 2)}
	c := client(t, srv)
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if err != nil || string(r.GetPayload().GetBody()) != "2" {
		t.Fatalf("%v, %v", r, err)
	}
}

// TestGRPCRetryDisabled: grpc's own retry, turned on by a service config,
// multiplies our attempts unless the connection is dialled with
// grpc.WithDisableRetry, as the documentation says it must be.
func TestGRPCRetryDisabled(t *testing.T) {
	const config = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
		"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	for _, disable := range []bool{true, false} {
		srv := &server{unary: failing(codes.Unavailable, 100)}
		opts := []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultServiceConfig(config),
			grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithStrategy(simple(2)))),
		}
		if disable {
			opts = append(opts, grpc.WithDisableRetry())
		}
		cc, err := grpc.NewClient(serve(t, srv), opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = testpb.NewTestServiceClient(cc).UnaryCall(context.Background(), &testpb.SimpleRequest{})
		cc.Close()
		want := int64(2)
		if !disable {
			want = 8
		}
		if err == nil || srv.calls.Load() != want {
			t.Errorf("WithDisableRetry %v: the server saw %d attempts, want %d", disable, srv.calls.Load(), want)
		}
	}
}

// pastDeadline is a context whose deadline has passed but whose timer has
// not fired yet: what a call sees when the server's RST_STREAM for the
// deadline arrives first.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestCallerDeadlinePassed: a DEADLINE_EXCEEDED that arrives once the
// caller's deadline has passed is the caller's, even before its context
// says so: not retried, and the loop stops with the context's error.
func TestCallerDeadlinePassed(t *testing.T) {
	ctx := pastDeadline{context.Background()}
	c := newConfig(nil)
	e := c.classify(status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM"), outcome{idempotent: true, callerDone: expired(ctx)})
	if e.info.Retryable() {
		t.Fatalf("the caller's deadline classified %+v", e.info)
	}
	if err := c.vetHints(ctx, e, false); err != context.DeadlineExceeded {
		t.Fatalf("vet: %v", err)
	}
	if attemptTimedOut(ctx, ctx) {
		t.Fatal("the caller's deadline taken for the attempt's")
	}
}

// TestHeadersCommit: a failure after the server sent its headers comes from
// a handler that ran: as A6 commits such a call, only an idempotent method
// is retried, whatever the code.
func TestHeadersCommit(t *testing.T) {
	for _, idem := range []bool{false, true} {
		srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			if n == 1 {
				grpc.SendHeader(ctx, metadata.Pairs("handled", "yes"))
				return nil, status.Error(codes.Unavailable, "failed halfway")
			}
			return ok(n)
		}}
		opts := []Option{WithStrategy(simple(2))}
		if idem {
			opts = append(opts, WithIdempotentMethods(method))
		}
		c := client(t, srv, opts...)
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if idem != (err == nil) || srv.calls.Load() != map[bool]int64{false: 1, true: 2}[idem] {
			t.Errorf("idempotent %v: %v after %d calls", idem, err, srv.calls.Load())
		}
	}
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		s.SendHeader(metadata.Pairs("handled", "yes"))
		return status.Error(codes.Unavailable, "failed halfway")
	}}
	c := client(t, srv, WithStrategy(simple(2)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable || srv.calls.Load() != 1 {
		t.Fatalf("stream: %v after %d calls", err, srv.calls.Load())
	}
}

// TestCallDoneBeforeItsFirstAttempt: a call whose context is done before
// its first attempt has the status grpc gives it, not UNKNOWN, and still
// wraps the loop's *retry.Error, hedged or not; the server sees nothing.
func TestCallDoneBeforeItsFirstAttempt(t *testing.T) {
	srv := &server{
		unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) { return ok(n) },
		output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
		},
	}
	c := client(t, srv, WithStrategy(simple(3)))
	hedged := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods(method), WithHedging(Hedging{Delay: time.Hour, MaxAttempts: 2}))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel()
	for _, tc := range []struct {
		ctx  context.Context
		code codes.Code
	}{{cancelled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
		_, err := c.UnaryCall(tc.ctx, &testpb.SimpleRequest{})
		var re *retry.Error
		if status.Code(err) != tc.code || !errors.As(err, &re) || re.Attempts != 0 || !errors.Is(err, tc.ctx.Err()) {
			t.Fatalf("unary call: %v (%v), want %v and a *retry.Error of 0 attempts", err, status.Code(err), tc.code)
		}
		_, err = hedged.UnaryCall(tc.ctx, &testpb.SimpleRequest{})
		if status.Code(err) != tc.code || !errors.As(err, &re) || re.Attempts != 0 {
			t.Fatalf("hedged unary call: %v (%v), want %v and a *retry.Error of 0 attempts", err, status.Code(err), tc.code)
		}
		st, err := c.StreamingOutputCall(tc.ctx, &testpb.StreamingOutputCallRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != tc.code {
			t.Fatalf("stream: %v (%v), want %v", err, status.Code(err), tc.code)
		}
	}
	if n := srv.calls.Load(); n != 0 {
		t.Fatalf("the server saw %d calls", n)
	}
}

// seenOptions is a unary interceptor chained below the retrying one: it
// records, for each attempt, how many grpc.Header, grpc.Trailer and
// grpc.Peer options the attempt carried, and the trailer pointers.
type seenOptions struct {
	mu       sync.Mutex
	headers  []int
	trailers [][]*metadata.MD
	peers    []int
}

func (s *seenOptions) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var h, p int
	var tr []*metadata.MD
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			h++
		case grpc.TrailerCallOption:
			tr = append(tr, o.TrailerAddr)
		case grpc.PeerCallOption:
			p++
		}
	}
	s.mu.Lock()
	s.headers, s.trailers, s.peers = append(s.headers, h), append(s.trailers, tr), append(s.peers, p)
	s.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// An attempt carries no grpc.Header option of the interceptor's (its copy of
// the headers would cost every successful call), and one grpc.Trailer (for
// the pushback) and one grpc.Peer (did it leave the client?): the caller's
// own, if it gave them, which then serve both. The caller's options see the
// last attempt, and the pushback read through the caller's trailer is
// obeyed.
func TestAttemptsCaptureOnlyTheTrailerAndPeer(t *testing.T) {
	srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n == 1 {
			// Trailers-Only: headers set here would go out first.
			grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "250"))
			return nil, status.Error(codes.Unavailable, "later")
		}
		grpc.SetHeader(ctx, metadata.Pairs("attempt", string(rune('0'+n))))
		return ok(n)
	}}
	for _, own := range []bool{false, true} {
		seen := &seenOptions{}
		rec := &recorder{inner: &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(time.Second)}}
		c := dial(t, serve(t, srv), grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(WithStrategy(rec)), seen.intercept))
		srv.calls.Store(0)
		var header, trailer metadata.MD
		var p peer.Peer
		var opts []grpc.CallOption
		if own {
			opts = []grpc.CallOption{grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p)}
		}
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, opts...); err != nil {
			t.Fatalf("caller's options %v: %v", own, err)
		}
		if got := rec.got(); !slices.Equal(got, []time.Duration{250 * time.Millisecond}) {
			t.Errorf("caller's options %v: delays %v, want the pushback's 250ms", own, got)
		}
		wantHeaders, wantPeers := []int{0, 0}, []int{1, 1}
		if own {
			wantHeaders = []int{1, 1} // the caller's
		}
		if !slices.Equal(seen.headers, wantHeaders) || !slices.Equal(seen.peers, wantPeers) {
			t.Errorf("caller's options %v: grpc.Header per attempt %v, grpc.Peer %v; want %v and %v", own, seen.headers, seen.peers, wantHeaders, wantPeers)
		}
		for i, tr := range seen.trailers {
			if len(tr) != 1 || own && tr[0] != &trailer {
				t.Errorf("caller's options %v: attempt %d carried trailer options %v, want one (the caller's, if it gave one)", own, i+1, tr)
			}
		}
		if own && (header.Get("attempt")[0] != "2" || p.Addr == nil || len(trailer[PushbackKey]) != 0) {
			t.Errorf("the caller's options hold header %v, peer %v, trailer %v; want the second attempt's", header, p.Addr, trailer)
		}
	}
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
