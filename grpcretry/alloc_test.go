package grpcretry

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// allocServer is a test service that allocates the same for every call, so
// that a client's allocations can be told apart: UnaryCall fails two calls
// in three with UNAVAILABLE if flaky, and StreamingOutputCall sends one
// message.
type allocServer struct {
	testpb.UnimplementedTestServiceServer
	flaky bool
	n     atomic.Int64
}

func (s *allocServer) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s.flaky && s.n.Add(1)%3 != 0 {
		return nil, status.Error(codes.Unavailable, "down")
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *allocServer) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	return st.Send(&testpb.StreamingOutputCallResponse{})
}

// TestAllocations pins what the interceptors add to a call, in allocations,
// over the same call without them, to a real server over bufconn (the
// server's allocations, the same for both, are counted too): a unary call
// that succeeds, one that fails twice with UNAVAILABLE and then succeeds
// (without the interceptor, the caller's own three calls), and a server
// stream read to its end. The default options' counts include retry.Do's
// mark on the attempts' contexts (see retry.CallerRetries), which Unmarked
// saves. The race detector changes allocation counts, so it is skipped there.
func TestAllocations(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	ureq, sreq := &testpb.SimpleRequest{}, &testpb.StreamingOutputCallRequest{}
	unary := func(c testpb.TestServiceClient) func() {
		return func() {
			if _, err := c.UnaryCall(ctx, ureq); err != nil {
				t.Fatal(err)
			}
		}
	}
	threeCalls := func(c testpb.TestServiceClient) func() {
		return func() {
			for i := 0; ; i++ {
				_, err := c.UnaryCall(ctx, ureq)
				if err == nil {
					return
				}
				if status.Code(err) != codes.Unavailable || i == 2 {
					t.Fatal(err)
				}
			}
		}
	}
	stream := func(c testpb.TestServiceClient) func() {
		return func() {
			st, err := c.StreamingOutputCall(ctx, sreq)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != io.EOF {
				t.Fatalf("after the message: %v, want io.EOF", err)
			}
		}
	}
	noWait := WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)})
	unmarked := WithRetryOptions(retry.Unmarked())
	through := func(srv *allocServer, opts ...Option) testpb.TestServiceClient {
		return bufClient(t, srv, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)), grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	}
	ok, flaky := &allocServer{}, &allocServer{flaky: true}
	plain, plainFlaky := bufClient(t, ok), bufClient(t, flaky)
	for _, tc := range []struct {
		name      string
		base, run func()
		max       float64 // extra allocations
	}{
		{"unary", unary(plain), unary(through(ok)), 2},
		{"unary, Unmarked", unary(plain), unary(through(ok, unmarked)), 1},
		{"two retries", threeCalls(plainFlaky), unary(through(flaky, noWait)), 17},
		{"two retries, Unmarked", threeCalls(plainFlaky), unary(through(flaky, noWait, unmarked)), 15},
		{"stream", stream(plain), stream(through(ok)), 7},
		{"stream, Unmarked", stream(plain), stream(through(ok, unmarked)), 6},
	} {
		tc.base() // connect
		tc.run()
		base := testing.AllocsPerRun(500, tc.base)
		got := testing.AllocsPerRun(500, tc.run)
		t.Logf("%s: %v allocations, %v without the interceptor", tc.name, got, base)
		if got-base > tc.max {
			t.Errorf("%s: %v allocations more than without the interceptor, want at most %v", tc.name, got-base, tc.max)
		}
	}
}
