package grpcretry

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
)

// Retries at one layer across services: a front end retries a middle tier
// that calls a back end that is always UNAVAILABLE. Behind the server
// interceptor, the middle tier's calls for the front end's retries make one
// attempt each: the back end sees 3 + 1 + 1 calls, where the same tiers
// without it see 3 × 3.
func TestServerInterceptorPropagatesTheCallersRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []grpc.ServerOption
		backend int64
	}{
		{"with the server interceptor", []grpc.ServerOption{grpc.UnaryInterceptor(UnaryServerInterceptor())}, 5},
		{"without", nil, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := &server{unary: failing(codes.Unavailable, 1000)}
			toBack := dial(t, serve(t, back), grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithStrategy(simple(3)))))
			middle := &server{unary: func(ctx context.Context, _ int, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
				return toBack.UnaryCall(ctx, req)
			}}
			front := dial(t, serve(t, middle, tc.opts...), grpc.WithUnaryInterceptor(UnaryClientInterceptor(WithStrategy(simple(3)))))
			_, err := front.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if status.Code(err) != codes.Unavailable || middle.calls.Load() != 3 || back.calls.Load() != tc.backend {
				t.Fatalf("err %v; middle tier called %d times, back end %d, want 3 and %d", err, middle.calls.Load(), back.calls.Load(), tc.backend)
			}
		})
	}
}

// The claim a caller makes marks only its own call, and only as a retry:
// garbage, zero and repeated values mark nothing; the mark ends with the
// handler.
func TestServerInterceptorTrustsNoMoreThanTheCall(t *testing.T) {
	for value, want := range map[string]bool{
		"1": true, "2": true, "1000000": true,
		"0": false, "-1": false, "+1": false, "x": false, "": false, "99999999999": false,
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(PreviousAttemptsKey, value))
		if got := resent(ctx); got != want {
			t.Errorf("grpc-previous-rpc-attempts %q: resent %v, want %v", value, got, want)
		}
	}
	twice := metadata.NewIncomingContext(context.Background(), metadata.Pairs(PreviousAttemptsKey, "1", PreviousAttemptsKey, "2"))
	if resent(twice) {
		t.Error("two values read as a retry")
	}
	var kept context.Context
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(PreviousAttemptsKey, "4"))
	_, _ = UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		if !retry.CallerRetries(ctx) {
			t.Error("a retry's handler is not marked")
		}
		kept = context.WithoutCancel(ctx)
		return nil, nil
	})
	if retry.CallerRetries(kept) {
		t.Error("the mark outlived the handler")
	}
}

// A streaming call that says it is a retry gets a marked stream context.
func TestStreamServerInterceptorMarksRetries(t *testing.T) {
	marked := make(chan bool, 2)
	srv := &server{output: func(_ int, _ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
		marked <- retry.CallerRetries(st.Context())
		return nil
	}}
	c := dial(t, serve(t, srv, grpc.StreamInterceptor(StreamServerInterceptor())))
	for _, previous := range []string{"", "2"} {
		ctx := context.Background()
		if previous != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, previous)
		}
		st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
		if got := <-marked; got != (previous != "") {
			t.Errorf("grpc-previous-rpc-attempts %q: stream context marked %v", previous, got)
		}
	}
}
