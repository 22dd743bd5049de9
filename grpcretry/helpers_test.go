package grpcretry

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

// server is the test service on a real grpc.Server: each handler is a
// function the test sets, told the attempt number from the
// grpc-previous-rpc-attempts header.
type server struct {
	testpb.UnimplementedTestServiceServer
	unary  func(ctx context.Context, n int, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error)
	output func(n int, req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error
	input  func(n int, s testpb.TestService_StreamingInputCallServer) error
	duplex func(n int, s testpb.TestService_FullDuplexCallServer) error

	calls    atomic.Int64
	mu       sync.Mutex
	previous []string // the grpc-previous-rpc-attempts of each call, "" for none
}

// attempt records a call and returns its attempt number.
func (s *server) attempt(ctx context.Context) int {
	s.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	v := ""
	if vs := md.Get(PreviousAttemptsKey); len(vs) > 0 {
		v = vs[0]
	}
	s.mu.Lock()
	s.previous = append(s.previous, v)
	s.mu.Unlock()
	n, _ := strconv.Atoi(v)
	return n + 1
}
func (s *server) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.previous...)
}
func (s *server) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return s.unary(ctx, s.attempt(ctx), req)
}
func (s *server) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	return s.output(s.attempt(st.Context()), req, st)
}
func (s *server) StreamingInputCall(st testpb.TestService_StreamingInputCallServer) error {
	return s.input(s.attempt(st.Context()), st)
}
func (s *server) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	return s.duplex(s.attempt(st.Context()), st)
}

// serve starts srv on a loopback port, behind the server options, and
// returns its address.
func serve(t testing.TB, srv *server, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// dial connects to addr with grpc's own retry off and the given options.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry()}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// client serves srv and dials it through both interceptors with opts.
func client(t testing.TB, srv *server, opts ...Option) testpb.TestServiceClient {
	t.Helper()
	return dial(t, serve(t, srv),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
}

// recorder is a Strategy that hands out the delays of the strategy it wraps
// to the test instead of waiting them: the loop waits nothing, and the test
// reads what it would have waited.
type recorder struct {
	inner  retry.Strategy
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) AcquireInitialToken(scope string) (retry.Token, error) {
	t, err := r.inner.AcquireInitialToken(scope)
	return retry.NewToken(0, 0, t), err
}
func (r *recorder) RefreshToken(t retry.Token, err error) (retry.Token, error) {
	next, err := r.inner.RefreshToken(t.Value().(retry.Token), err)
	if err != nil {
		return retry.Token{}, err
	}
	r.mu.Lock()
	r.delays = append(r.delays, next.Delay())
	r.mu.Unlock()
	return retry.NewToken(next.RetryCount(), 0, next), nil
}
func (r *recorder) RecordSuccess(t retry.Token) error {
	return r.inner.RecordSuccess(t.Value().(retry.Token))
}
func (r *recorder) got() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.delays...)
}

// simple is a strategy of n attempts that waits nothing between them.
func simple(n int) *retry.Simple {
	return &retry.Simple{MaxAttempts: n, Backoff: retry.Constant(0)}
}

// ok is a unary handler that answers with the attempt number as its body.
func ok(n int) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: []byte(strconv.Itoa(n))}}, nil
}

const method = "/grpc.testing.TestService/UnaryCall"

// The tests that dial through vclient run in virtual time: a synctest bubble
// holds a real grpc.Server and ClientConn joined by an in-memory listener (a
// bubble cannot hold sockets), so that waits, deadlines, attempt timeouts and
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
