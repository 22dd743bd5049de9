package grpcretry

// Tests of retry.Info.Allowed: a valid grpc-retry-pushback-ms, or a
// google.rpc.RetryInfo with a retry_delay, is the server's permission to
// retry a failure the interceptor may retry; nothing else is. Every answer
// comes from a real grpc.Server on loopback.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// noDelay marks a hint case without a RetryInfo.
const noDelay = time.Duration(-1 << 63)

// hinted answers the first attempt with code, the given pushback values and,
// unless delay is noDelay, a google.rpc.RetryInfo of delay; it succeeds
// after.
func hinted(code codes.Code, delay time.Duration, pushbacks ...string) func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n > 1 {
			return ok(n)
		}
		md := metadata.MD{}
		for _, v := range pushbacks {
			md.Append(PushbackKey, v)
		}
		grpc.SetTrailer(ctx, md)
		st := status.New(code, "hinted")
		if delay != noDelay {
			var err error
			if st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err != nil {
				panic(err)
			}
		}
		return nil, st.Err()
	}
}

// The classification of the first attempt, as the strategy gets it.
func TestAllowedOnlyWithAValidServerHint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handler    func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error)
		idempotent bool
		allowed    bool
		exact      bool
	}{
		{"UNAVAILABLE, pushback 0", hinted(codes.Unavailable, noDelay, "0"), false, true, true},
		{"UNAVAILABLE, pushback 250", hinted(codes.Unavailable, noDelay, "250"), false, true, true},
		{"UNAVAILABLE, idempotent, pushback 0", hinted(codes.Unavailable, noDelay, "0"), true, true, true},
		{"RESOURCE_EXHAUSTED, pushback 1000", hinted(codes.ResourceExhausted, noDelay, "1000"), false, true, true},
		{"UNAVAILABLE, RetryInfo 1s", hinted(codes.Unavailable, time.Second), false, true, false},
		{"UNAVAILABLE, RetryInfo 0s", hinted(codes.Unavailable, 0), false, true, false},
		{"INTERNAL, idempotent, RetryInfo 0s", hinted(codes.Internal, 0), true, true, false},
		{"DEADLINE_EXCEEDED, idempotent, pushback 0", hinted(codes.DeadlineExceeded, noDelay, "0"), true, true, true},
		{"UNAVAILABLE, no hint", hinted(codes.Unavailable, noDelay), false, false, false},
		{"UNAVAILABLE, pushback -1", hinted(codes.Unavailable, noDelay, "-1"), false, false, false},
		{"UNAVAILABLE, pushback soon", hinted(codes.Unavailable, noDelay, "soon"), false, false, false},
		{"UNAVAILABLE, two pushbacks", hinted(codes.Unavailable, noDelay, "10", "20"), false, false, false},
		{"UNAVAILABLE, RetryInfo -1s", hinted(codes.Unavailable, -time.Second), false, false, false},
		{"UNAVAILABLE, pushback -1 beside RetryInfo 1s", hinted(codes.Unavailable, time.Second, "-1"), false, false, false},
		// Hints on failures that may not be retried give no permission;
		// Exact stays what it was.
		{"DEADLINE_EXCEEDED, not idempotent, pushback 0", hinted(codes.DeadlineExceeded, noDelay, "0"), false, false, true},
		{"FAILED_PRECONDITION, pushback 0", hinted(codes.FailedPrecondition, noDelay, "0"), true, false, true},
		{"NOT_FOUND, RetryInfo 0s", hinted(codes.NotFound, 0), true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				infos []retry.Info
			)
			opts := []Option{WithStrategy(simple(1)), WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
				mu.Lock()
				infos = append(infos, retry.Classify(err))
				mu.Unlock()
			}))}
			if tc.idempotent {
				opts = append(opts, WithIdempotentMethods(method))
			}
			c := client(t, &server{unary: tc.handler}, opts...)
			_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err == nil || len(infos) != 1 {
				t.Fatalf("err %v, %d failed attempts seen", err, len(infos))
			}
			info := infos[0]
			if info.Allowed != tc.allowed || info.Exact != tc.exact {
				t.Errorf("%+v; want Allowed %v, Exact %v", info, tc.allowed, tc.exact)
			}
			if info.Allowed && !info.Retryable() {
				t.Errorf("Allowed on a failure no strategy retries: %+v", info)
			}
		})
	}
}
