package grpcretry

// Tests of retry.Info.Allowed: a valid grpc-retry-pushback-ms, or a
// google.rpc.RetryInfo with a retry_delay, is the server's permission to
// retry a failure the interceptor may retry; nothing else is. Every answer
// comes from a real grpc.Server on loopback.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// End to end with the interceptor's own strategy (no WithStrategy): a
// DEADLINE_EXCEEDED from the server with a pushback of 0, for an
// idempotent method, is retried, and the call succeeds on attempt 2.
func TestZeroConfigRetriesADeadlineExceededWithPushback(t *testing.T) {
	srv := &server{unary: hinted(codes.DeadlineExceeded, noDelay, "0")}
	c := client(t, srv, WithIdempotentMethods(method))
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if err != nil || string(r.GetPayload().GetBody()) != "2" || srv.calls.Load() != 2 {
		t.Fatalf("%v after %d calls; want success on attempt 2", err, srv.calls.Load())
	}
}

// End to end with the interceptor's own strategy: NOT_FOUND answers show a
// server at work, so three in a row leave the next call's UNAVAILABLE its
// retry.
func TestZeroConfigNotFoundsDoNotStopTheRetryOfUnavailable(t *testing.T) {
	var answered atomic.Int32
	srv := &server{unary: func(_ context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		switch answered.Add(1) {
		case 1, 2, 3:
			return nil, status.Error(codes.NotFound, "no such item")
		case 4:
			return nil, status.Error(codes.Unavailable, "down")
		}
		return ok(n)
	}}
	c := client(t, srv)
	for i := range 3 {
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.NotFound || srv.calls.Load() != int64(i+1) {
			t.Fatalf("call %d: %v after %d calls in all, want NOT_FOUND once", i+1, err, srv.calls.Load())
		}
	}
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if err != nil || string(r.GetPayload().GetBody()) != "2" || srv.calls.Load() != 5 {
		t.Fatalf("after three NOT_FOUND: %v after %d calls in all; want success on attempt 2", err, srv.calls.Load())
	}
}

// The permission is what makes the difference: in a scope where every
// attempt times out, Adaptive refuses to retry a DEADLINE_EXCEEDED (the
// service looks overloaded), and still retries the one the server sent
// with a pushback of 0. Streaks and client-side throttling are off so that
// only the timeout rule decides.
func TestAllowedTimeoutIsRetriedWhereOthersAreNot(t *testing.T) {
	var allow atomic.Bool
	srv := &server{unary: func(ctx context.Context, n int, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if allow.Load() {
			return hinted(codes.DeadlineExceeded, noDelay, "0")(ctx, n, req)
		}
		return nil, status.Error(codes.DeadlineExceeded, "slow")
	}}
	c := client(t, srv, WithIdempotentMethods(method),
		WithStrategy(retry.NewAdaptive(retry.AdaptiveOptions{Streak: -1, Multiplier: -1})))
	for range 12 {
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
			t.Fatal(err)
		}
	}
	before := srv.calls.Load()
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if !errors.Is(err, retry.ErrNotRetryable) || srv.calls.Load() != before+1 {
		t.Fatalf("DEADLINE_EXCEEDED without pushback where every attempt times out: %v after %d calls, want no retry", err, srv.calls.Load()-before)
	}
	allow.Store(true)
	r, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if err != nil || string(r.GetPayload().GetBody()) != "2" {
		t.Fatalf("DEADLINE_EXCEEDED with pushback 0 there: %v, want success on attempt 2", err)
	}
}
