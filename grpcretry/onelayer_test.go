package grpcretry

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
)

// A failure the interceptor leaves to the application crosses a library
// loop that cannot retry: the application's retry.Do (3 attempts) calls a
// library whose loop uses retry.No, which makes the gRPC call. The
// interceptor sees the application's mark and makes one attempt; the
// library passes the failure on; the application retries it: two calls,
// success.
func TestLeftFailureCrossesALibraryLoopThatCannotRetry(t *testing.T) {
	var calls atomic.Int32
	srv := &server{unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if calls.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "the first call fails")
		}
		return ok(2)
	}}
	client := dial(t, serve(t, srv), grpc.WithUnaryInterceptor(UnaryClientInterceptor()))
	library := func(ctx context.Context) error {
		return retry.Do(ctx, &retry.No{}, func(ctx context.Context) error {
			_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
			return err
		})
	}
	attempts := 0
	err := retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
		attempts++
		return library(ctx)
	})
	if err != nil || attempts != 2 || srv.calls.Load() != 2 {
		t.Fatalf("err %v after %d application attempts and %d calls, want success after 2 and 2", err, attempts, srv.calls.Load())
	}
}
