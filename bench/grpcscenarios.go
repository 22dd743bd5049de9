package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	grpcmw "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// The gRPC scenarios make one unary call, TestService.UnaryCall of grpc's
// own test service, through each library's client interceptor to a
// loopback grpc.Server shared by all:
//
//   - success: the server answers at once.
//   - two retries: the call carries a request id in its metadata; the
//     server fails the first two attempts of that id with UNAVAILABLE, then
//     answers (3 attempts reach the server), with no delay between attempts.
//
// Every row dials its own grpc.ClientConn to the server, with grpc's own
// retry off (grpc.WithDisableRetry(), as grpcretry's documentation asks, so
// that only the interceptor retries), and keeps it from one call to the
// next. The retrying rows are configured alike: at most 3 attempts,
// UNAVAILABLE retried, no delay between attempts.
//
// A scenario returns an error unless the call succeeds with the response
// the server sends.

// GRPCLib is one gRPC client configuration under test.
type GRPCLib struct {
	// Name identifies the library in benchmark names and in the table.
	Name string
	// Success runs the success scenario once.
	Success Scenario
	// TwoRetries runs the two-retries scenario once; nil if the row does
	// not retry (bare) or has no row for it.
	TwoRetries Scenario

	conns []*grpc.ClientConn
	dials *atomic.Int64
}

// Dials returns how many connections the library's client connections have
// dialled: 1 per ClientConn if each kept its connection.
func (l *GRPCLib) Dials() int64 { return l.dials.Load() }

// Conns returns how many ClientConns the library uses.
func (l *GRPCLib) Conns() int { return len(l.conns) }

// Close closes the library's client connections.
func (l *GRPCLib) Close() {
	for _, cc := range l.conns {
		cc.Close()
	}
}

const (
	grpcReqIDKey = "x-req" // the metadata key of a two-retries call's id
	grpcUser     = "ok"    // the Username of every successful response
)

// grpcServer is the test service, on the loopback grpc.Server shared by
// every gRPC library.
type grpcServer struct {
	testpb.UnimplementedTestServiceServer
	addr     string
	attempts atomic.Int64 // UnaryCalls served, failed or not

	mu    sync.Mutex
	tries map[string]int // attempts seen per request id, until the one answered
}

// Attempts returns how many calls the server has served.
func (s *grpcServer) Attempts() int64 { return s.attempts.Load() }

// Pending returns how many request ids have not had their answer yet.
func (s *grpcServer) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tries)
}

// UnaryCall answers a call without a request id at once; a call with one
// fails with UNAVAILABLE until its id has failed `failures` times.
func (s *grpcServer) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.attempts.Add(1)
	if ids := metadata.ValueFromIncomingContext(ctx, grpcReqIDKey); len(ids) > 0 {
		s.mu.Lock()
		s.tries[ids[0]]++
		n := s.tries[ids[0]]
		if n > failures {
			delete(s.tries, ids[0])
		}
		s.mu.Unlock()
		if n <= failures {
			return nil, status.Error(codes.Unavailable, "unavailable")
		}
	}
	return &testpb.SimpleResponse{Username: grpcUser}, nil
}

var (
	grpcServerOnce sync.Once
	grpcSrv        *grpcServer
)

// GRPCServer returns the loopback gRPC server, started on first use and
// left running until the process exits.
func GRPCServer() *grpcServer {
	grpcServerOnce.Do(func() {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(fmt.Sprintf("bench: gRPC server: %v", err))
		}
		grpcSrv = &grpcServer{addr: lis.Addr().String(), tries: map[string]int{}}
		gs := grpc.NewServer()
		testpb.RegisterTestServiceServer(gs, grpcSrv)
		go gs.Serve(lis)
	})
	return grpcSrv
}

// grpcDial returns a client of the test service over a new ClientConn to
// the server, with grpc's retry off, through interceptor (none if nil);
// each connection it dials adds 1 to dials.
func grpcDial(interceptor grpc.UnaryClientInterceptor, dials *atomic.Int64) (*grpc.ClientConn, testpb.TestServiceClient) {
	var d net.Dialer
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, "tcp", addr)
		}),
	}
	if interceptor != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(interceptor))
	}
	cc, err := grpc.NewClient("passthrough:///"+GRPCServer().addr, opts...)
	if err != nil {
		panic(fmt.Sprintf("bench: gRPC client: %v", err))
	}
	return cc, testpb.NewTestServiceClient(cc)
}

// grpcReqIDs numbers the two-retries calls of the whole process.
var grpcReqIDs atomic.Uint64

// grpcCall makes one UnaryCall through c, with a new request id in its
// metadata if flaky, and checks the response.
func grpcCall(ctx context.Context, c testpb.TestServiceClient, req *testpb.SimpleRequest, flaky bool) error {
	if flaky {
		ctx = metadata.AppendToOutgoingContext(ctx, grpcReqIDKey, strconv.FormatUint(grpcReqIDs.Add(1), 10))
	}
	resp, err := c.UnaryCall(ctx, req)
	if err != nil {
		return err
	}
	if resp.GetUsername() != grpcUser {
		return fmt.Errorf("UnaryCall: response %v, want username %q", resp, grpcUser)
	}
	return nil
}

// grpcLib builds a row whose success scenario calls through the
// interceptor success (or none, if nil) and whose two-retries scenario
// calls through twoRetries (no scenario if nil), each over its own
// ClientConn.
func grpcLib(name string, success, twoRetries grpc.UnaryClientInterceptor) GRPCLib {
	l := GRPCLib{Name: name, dials: new(atomic.Int64)}
	req := &testpb.SimpleRequest{}
	cc, c := grpcDial(success, l.dials)
	l.conns = append(l.conns, cc)
	l.Success = func(ctx context.Context) error { return grpcCall(ctx, c, req, false) }
	if twoRetries != nil {
		cc, c := grpcDial(twoRetries, l.dials)
		l.conns = append(l.conns, cc)
		l.TwoRetries = func(ctx context.Context) error { return grpcCall(ctx, c, req, true) }
	}
	return l
}

// GRPCLibs dials every gRPC library's connections and returns the table of
// gRPC libraries, bare first. The success ratios are relative to the row
// named "bare", the two-retries ratios to the row named "grpcretry". The
// caller closes each library when done with it.
func GRPCLibs() []GRPCLib {
	// grpcretry with a Simple strategy: 3 attempts, no delay, no quota, as
	// the two-retries rows of the other tables.
	simple := grpcretry.UnaryClientInterceptor(grpcretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}))
	// go-grpc-middleware's retry: WithMax(3) is its attempt limit (it
	// makes at most 3 calls; without it, it does not retry at all),
	// BackoffLinear(0) no wait; its default codes retry UNAVAILABLE (and
	// RESOURCE_EXHAUSTED).
	mw := grpcmw.UnaryClientInterceptor(grpcmw.WithMax(3), grpcmw.WithBackoff(grpcmw.BackoffLinear(0)))
	return []GRPCLib{
		// No interceptor, no retries: the baseline of the success
		// scenario.
		grpcLib("bare", nil, nil),
		grpcLib("grpcretry", simple, simple),
		// grpcretry's zero configuration (its own Adaptive strategy,
		// 3 attempts, jittered backoff): success only, as its retries
		// wait.
		grpcLib("grpcretry-default", grpcretry.UnaryClientInterceptor(), nil),
		grpcLib("go-grpc-middleware", mw, mw),
	}
}

// The allocation scenarios compare what each interceptor adds to a call, in
// allocations, over the same call made without one. They run over bufconn,
// grpc-go's in-memory listener, to a real grpc.Server of the test service,
// so that no socket's own work enters the counts:
//
//   - unary: one UnaryCall that the server answers at once.
//   - two retries: one UnaryCall that the server fails twice with
//     UNAVAILABLE, then answers. Without an interceptor, the caller makes
//     the three calls itself, one after another, with the same request id.
//   - stream: one StreamingOutputCall whose server sends one message and
//     ends: the first message received, then the end of the stream (io.EOF).
//
// The rows are a call without interceptor, grpcretry's interceptors with
// their default options, the same with retry.Unmarked() (no nesting mark on
// the attempts' contexts), go-grpc-middleware v2's retry interceptors and
// grpc-go's built-in retry (a service config's retryPolicy). The retrying
// rows make at most 3 attempts, UNAVAILABLE retried, without waiting
// between them: grpcretry's two-retries row has a retry.Simple strategy of
// 3 attempts and no backoff for that (its default, retry.Adaptive, waits a
// jittered backoff), and grpc-go's retryPolicy waits at most 1 µs, its
// shortest.

// GRPCAllocRow is one client configuration of the allocation scenarios.
type GRPCAllocRow struct {
	// Name identifies the row in benchmark names.
	Name string
	// Unary, TwoRetries and Stream run the scenarios once.
	Unary, TwoRetries, Stream Scenario

	conns []*grpc.ClientConn
}

// Close closes the row's client connections.
func (r *GRPCAllocRow) Close() {
	for _, cc := range r.conns {
		cc.Close()
	}
}

// StreamingOutputCall sends one empty message and ends the stream.
func (s *grpcServer) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	s.attempts.Add(1)
	return st.Send(&testpb.StreamingOutputCallResponse{})
}

var (
	bufServerOnce sync.Once
	bufLis        *bufconn.Listener
	bufSrv        *grpcServer
)

// BufServer returns the test service on a bufconn listener, started on
// first use and left running until the process exits.
func BufServer() *grpcServer {
	bufServerOnce.Do(func() {
		bufLis = bufconn.Listen(1 << 20)
		bufSrv = &grpcServer{tries: map[string]int{}}
		gs := grpc.NewServer()
		testpb.RegisterTestServiceServer(gs, bufSrv)
		go gs.Serve(bufLis)
	})
	return bufSrv
}

// bufDial returns a client of the test service over a new ClientConn to the
// bufconn server, with the given options besides its dialer.
func bufDial(opts ...grpc.DialOption) (*grpc.ClientConn, testpb.TestServiceClient) {
	BufServer()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bufLis.DialContext(ctx) }),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		panic(fmt.Sprintf("bench: gRPC client: %v", err))
	}
	return cc, testpb.NewTestServiceClient(cc)
}

// grpcFirstMessage opens a StreamingOutputCall through c, receives its one
// message and then the stream's end.
func grpcFirstMessage(ctx context.Context, c testpb.TestServiceClient, req *testpb.StreamingOutputCallRequest) error {
	st, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		return err
	}
	if _, err := st.Recv(); err != nil {
		return err
	}
	if _, err := st.Recv(); err != io.EOF {
		return fmt.Errorf("StreamingOutputCall: after the message, %v, want io.EOF", err)
	}
	return nil
}

// grpcBuiltinConfig is grpc-go's retryPolicy for the test service: 3
// attempts, UNAVAILABLE retried, the shortest backoff grpc accepts.
const grpcBuiltinConfig = `{"methodConfig": [{
	"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.000001s",
		"maxBackoff": "0.000001s",
		"backoffMultiplier": 1,
		"retryableStatusCodes": ["UNAVAILABLE"]
	}
}]}`

// grpcAllocRow builds a row: its unary and stream scenarios over a
// ClientConn dialled with opts, its two-retries scenario over one dialled
// with retryOpts (none if nil; the unary one if retryOpts is empty and
// not nil). If manual, two retries is the caller's own loop of at most 3
// calls.
func grpcAllocRow(name string, manual bool, opts, retryOpts []grpc.DialOption) GRPCAllocRow {
	r := GRPCAllocRow{Name: name}
	ureq, sreq := &testpb.SimpleRequest{}, &testpb.StreamingOutputCallRequest{}
	cc, c := bufDial(opts...)
	r.conns = append(r.conns, cc)
	r.Unary = func(ctx context.Context) error { return grpcCall(ctx, c, ureq, false) }
	r.Stream = func(ctx context.Context) error { return grpcFirstMessage(ctx, c, sreq) }
	switch {
	case manual:
		r.TwoRetries = func(ctx context.Context) error {
			ctx = metadata.AppendToOutgoingContext(ctx, grpcReqIDKey, strconv.FormatUint(grpcReqIDs.Add(1), 10))
			var err error
			for range 1 + failures {
				if _, err = c.UnaryCall(ctx, ureq); status.Code(err) != codes.Unavailable {
					return err
				}
			}
			return err
		}
	case retryOpts != nil:
		rc := c
		if len(retryOpts) > 0 {
			var cc *grpc.ClientConn
			cc, rc = bufDial(retryOpts...)
			r.conns = append(r.conns, cc)
		}
		r.TwoRetries = func(ctx context.Context) error { return grpcCall(ctx, rc, ureq, true) }
	}
	return r
}

// GRPCAllocRows dials every row of the allocation scenarios and returns
// them, the call without interceptor ("plain") first. The caller closes
// each row when done with it.
func GRPCAllocRows() []GRPCAllocRow {
	noRetry := grpc.WithDisableRetry()
	noWait := grpcretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)})
	unmarked := grpcretry.WithRetryOptions(retry.Unmarked())
	mw := []grpcmw.CallOption{grpcmw.WithMax(3), grpcmw.WithBackoff(grpcmw.BackoffLinear(0))}
	return []GRPCAllocRow{
		grpcAllocRow("plain", true, []grpc.DialOption{noRetry}, nil),
		grpcAllocRow("grpcretry",
			false,
			[]grpc.DialOption{noRetry,
				grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor()),
				grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor())},
			[]grpc.DialOption{noRetry, grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(noWait))}),
		grpcAllocRow("grpcretry-unmarked",
			false,
			[]grpc.DialOption{noRetry,
				grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(unmarked)),
				grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(unmarked))},
			[]grpc.DialOption{noRetry, grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(noWait, unmarked))}),
		grpcAllocRow("go-grpc-middleware",
			false,
			[]grpc.DialOption{noRetry,
				grpc.WithUnaryInterceptor(grpcmw.UnaryClientInterceptor(mw...)),
				grpc.WithStreamInterceptor(grpcmw.StreamClientInterceptor(mw...))},
			[]grpc.DialOption{}),
		grpcAllocRow("grpc-builtin",
			false,
			[]grpc.DialOption{grpc.WithDefaultServiceConfig(grpcBuiltinConfig)},
			[]grpc.DialOption{}),
	}
}
