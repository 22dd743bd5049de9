package grpcretry

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
)

// The tests of this file hold the stream interceptor to grpc-go's own retry
// (test/retry_test.go, TestRetryStreaming) where Header and Context meet
// retries: a Header on an attempt that ends Trailers-Only with a retryable
// status retries first, as gRFC A6 commits a call on headers and not on a
// Trailers-Only response; headers the server sent commit it. Each runs a
// real grpc.Server on loopback.

// attemptKey is the header a test server sends with its attempt number.
const attemptKey = "test-attempt"

// sendAttemptHeader sends the attempt number as header metadata.
func sendAttemptHeader(ctx context.Context, n int) error {
	return grpc.SendHeader(ctx, metadata.Pairs(attemptKey, string(rune('0'+n))))
}

// A server stream whose first attempt fails Trailers-Only with UNAVAILABLE:
// Header retries it, and returns the headers of the second attempt, whose
// messages follow.
func TestHeaderRetriesTrailersOnlyFailure(t *testing.T) {
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting") // no header: Trailers-Only
		}
		if err := sendAttemptHeader(s.Context(), n); err != nil {
			return err
		}
		return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(n)})
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := st.Header()
	if err != nil || !slices.Equal(md.Get(attemptKey), []string{"2"}) {
		t.Fatalf("Header() = %v, %v; want the second attempt's headers", md, err)
	}
	r, err := st.Recv()
	if err != nil || len(r.GetPayload().GetBody()) != 2 {
		t.Fatalf("Recv() = %v, %v; want the second attempt's message", r, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if !slices.Equal(srv.seen(), []string{"", "1"}) {
		t.Fatalf("attempts %q, want two", srv.seen())
	}
}

// grpc-go's "Retry via ClientStream.Header()": a bidirectional stream sends
// a message, the first attempt fails Trailers-Only, and Header makes the
// retry, which replays the message; the second attempt ends OK without
// headers, so Header returns none and RecvMsg io.EOF.
func TestHeaderRetryReplaysAndEndsOK(t *testing.T) {
	var (
		mu  sync.Mutex
		got []int
	)
	srv := &server{duplex: func(n int, s testpb.TestService_FullDuplexCallServer) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		mu.Lock()
		got = append(got, len(m.GetPayload().GetBody()))
		mu.Unlock()
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil // OK, Trailers-Only
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(5)}); err != nil {
		t.Fatal(err)
	}
	if md, err := st.Header(); md != nil || err != nil {
		t.Fatalf("Header() = %v, %v; want nil, nil after an OK Trailers-Only end", md, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("Recv() = %v, want io.EOF", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if srv.calls.Load() != 2 || !slices.Equal(got, []int{5, 5}) {
		t.Fatalf("%d attempts, the server read %v; want 2, the message replayed", srv.calls.Load(), got)
	}
}

// Header on a call that fails for good returns no headers and no error, as
// grpc's does; RecvMsg returns the call's *retry.Error, every time.
func TestHeaderOnCallThatFailsReturnsNothing(t *testing.T) {
	for _, tc := range []struct {
		code     codes.Code
		attempts int64
		reason   error
	}{
		{codes.Unavailable, 3, retry.ErrMaxAttempts},
		{codes.InvalidArgument, 1, retry.ErrNotRetryable},
	} {
		srv := &server{output: func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
			return status.Error(tc.code, "no")
		}}
		c := client(t, srv, WithStrategy(simple(3)))
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if md, err := st.Header(); md != nil || err != nil {
			t.Errorf("%v: Header() = %v, %v; want nil, nil", tc.code, md, err)
		}
		for range 2 {
			_, err := st.Recv()
			var re *retry.Error
			if !errors.As(err, &re) || !errors.Is(err, tc.reason) || status.Code(err) != tc.code {
				t.Errorf("%v: Recv() = %v; want a *retry.Error with %v", tc.code, err, tc.reason)
			}
		}
		if srv.calls.Load() != tc.attempts {
			t.Errorf("%v: %d attempts, want %d", tc.code, srv.calls.Load(), tc.attempts)
		}
	}
}

// Headers the server sent commit the call (grpc-go's "No retry after
// header"): the failure after them is not retried, even for an idempotent
// method, and comes back as grpc returned it, as after a first message: the
// Header that returned them ended the retry loop.
func TestHeaderFromServerCommits(t *testing.T) {
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if err := sendAttemptHeader(s.Context(), n); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "down")
	}}
	c := client(t, srv, WithStrategy(simple(3)), WithIdempotentMethods("/grpc.testing.TestService/"))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := st.Header(); err != nil || !slices.Equal(md.Get(attemptKey), []string{"1"}) {
		t.Fatalf("Header() = %v, %v", md, err)
	}
	_, err = st.Recv()
	var re *retry.Error
	if status.Code(err) != codes.Unavailable || errors.As(err, &re) || srv.calls.Load() != 1 {
		t.Fatalf("after Header: %v (%T) after %d attempts; want grpc's UNAVAILABLE after 1", err, err, srv.calls.Load())
	}
}

// A Header called while a Recv runs the retry loop waits for headers, not
// for a message: it skips the attempt that failed without headers, returns
// the retry's headers while the server holds its first message back, and
// the Recv gets that message.
func TestHeaderDuringRecvRetry(t *testing.T) {
	release := make(chan struct{})
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		if err := sendAttemptHeader(s.Context(), n); err != nil {
			return err
		}
		<-release
		return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(n)})
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		size int
		err  error
	}
	recv := make(chan result, 1)
	go func() {
		r, err := st.Recv()
		recv <- result{len(r.GetPayload().GetBody()), err}
	}()
	// Header comes once the Recv runs the loop, not before (when it would
	// run the loop itself).
	rs := st.(*grpc.GenericClientStream[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]).ClientStream.(*retryStream)
	for {
		rs.mu.Lock()
		running := rs.loop == loopRunning
		rs.mu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	md, err := st.Header()
	close(release)
	if err != nil || !slices.Equal(md.Get(attemptKey), []string{"2"}) {
		t.Fatalf("Header() = %v, %v; want the second attempt's headers", md, err)
	}
	if r := <-recv; r.err != nil || r.size != 2 {
		t.Fatalf("Recv() = %d bytes, %v", r.size, r.err)
	}
	if srv.calls.Load() != 2 {
		t.Fatalf("%d attempts", srv.calls.Load())
	}
}

// The stream's Context lives as long as the call: taken before the first
// receive, it is not done when the interceptor retries, while the retry
// runs, nor after its first message; it reads the peer of the attempt that
// talks; it ends when the stream does. Reading it does not commit the call.
func TestContextLivesAcrossRetries(t *testing.T) {
	arrived, release, finish := make(chan struct{}), make(chan struct{}), make(chan struct{})
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		close(arrived) // the first attempt is over: the retry is under way
		<-release
		if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)}); err != nil {
			return err
		}
		<-finish
		return nil
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	st, err := c.StreamingOutputCall(parent, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := st.Context()
	done := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		done <- err
	}()
	<-arrived
	if err := ctx.Err(); err != nil {
		t.Fatalf("the stream's context ended (%v, cause %v) when the interceptor retried", err, context.Cause(ctx))
	}
	if st.Context() != ctx {
		t.Error("Context() returned another context during the retry")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Recv: %v", err)
	}
	select {
	case <-ctx.Done():
		t.Fatalf("the stream's context ended after its first message: %v", context.Cause(ctx))
	default:
	}
	if p, ok := peer.FromContext(ctx); !ok || p.Addr == nil {
		t.Errorf("the stream's context has no peer: %v, %v", p, ok)
	}
	if srv.calls.Load() != 2 {
		t.Fatalf("%d attempts: reading Context must not stop the retry", srv.calls.Load())
	}
	close(finish)
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the stream's context lives on after the stream ended")
	}
	if !errors.Is(context.Cause(ctx), context.Canceled) || ctx.Err() != context.Canceled {
		t.Errorf("after the end: Err %v, Cause %v; want Canceled", ctx.Err(), context.Cause(ctx))
	}
}

// The stream's Context ends with the caller's context, and with a call that
// gives up; its deadline is the caller's.
func TestContextEndsWithTheCall(t *testing.T) {
	srv := &server{output: func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := st.Context()
	if _, err := st.Recv(); !errors.Is(err, retry.ErrMaxAttempts) {
		t.Fatalf("Recv: %v", err)
	}
	if ctx.Err() == nil {
		t.Error("the context of a call that gave up is not done")
	}

	block := make(chan struct{})
	defer close(block)
	srv = &server{output: func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
		<-block
		return nil
	}}
	c = client(t, srv, WithStrategy(simple(3)))
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	st, err = c.StreamingOutputCall(parent, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx = st.Context()
	want, _ := parent.Deadline()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(want) {
		t.Errorf("deadline %v, %v; want the caller's %v", d, ok, want)
	}
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after the caller's cancellation: %v", ctx.Err())
	}
}

// A call committed during the wait before a retry (here its client messages
// outgrow the replay buffer while the loop waits the server's pushback) is
// not retried: the retry could not replay what the buffer no longer holds.
// The loop ends with the failure and ErrCommitted, after one attempt.
func TestVirtualCommitDuringRetryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{duplex: func(n int, s testpb.TestService_FullDuplexCallServer) error {
			if n > 1 {
				return status.Error(codes.FailedPrecondition, "a retry of a committed call")
			}
			if _, err := s.Recv(); err != nil {
				return err
			}
			grpc.SetTrailer(s.Context(), metadata.Pairs(PushbackKey, "100"))
			return status.Error(codes.Unavailable, "later")
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithBufferLimit(100))
		st, err := c.FullDuplexCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(40)}); err != nil {
			t.Fatal(err)
		}
		recv := make(chan error, 1)
		go func() {
			_, err := st.Recv()
			recv <- err
		}()
		synctest.Wait() // the first attempt failed: the loop waits 100 ms
		for range 2 {
			_ = st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(40)}) // 120 bytes: committed
		}
		err = <-recv
		if !errors.Is(err, ErrCommitted) || status.Code(err) != codes.Unavailable || srv.calls.Load() != 1 {
			t.Fatalf("%v after %d attempts; want UNAVAILABLE and ErrCommitted after 1", err, srv.calls.Load())
		}
	})
}
