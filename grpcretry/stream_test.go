package grpcretry

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func payload(n int) *testpb.Payload { return &testpb.Payload{Body: make([]byte, n)} }

// TestServerStreamRetriedBeforeFirstMessage: a server stream that fails
// before its first message is retried, with grpc-previous-rpc-attempts.
func TestServerStreamRetriedBeforeFirstMessage(t *testing.T) {
	srv := &server{output: func(n int, req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "not yet")
		}
		for _, p := range req.GetResponseParameters() {
			if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(int(p.GetSize()))}); err != nil {
				return err
			}
		}
		return nil
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
	if !slices.Equal(sizes, []int{1, 2, 3}) || !slices.Equal(srv.seen(), []string{"", "1"}) {
		t.Fatalf("received %v; attempts %q", sizes, srv.seen())
	}
}

// TestServerStreamCommittedByFirstMessage: after the first response message
// the call is committed, and a failure comes back as grpc returned it.
func TestServerStreamCommittedByFirstMessage(t *testing.T) {
	srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)}); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "gone")
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable || srv.calls.Load() != 1 {
		t.Fatalf("after the first message: %v after %d attempts", err, srv.calls.Load())
	}
}

// TestServerStreamEmpty: a stream that ends with OK and no message is a
// success, and gives io.EOF.
func TestServerStreamEmpty(t *testing.T) {
	srv := &server{output: func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
		return nil
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("empty stream, second Recv: %v", err)
	}
}

// sumInput is a client-streaming handler that reads every message and fails
// the attempts before the nth with UNAVAILABLE, after reading them all.
func sumInput(failUntil int, got *[][]int) func(int, testpb.TestService_StreamingInputCallServer) error {
	return func(n int, s testpb.TestService_StreamingInputCallServer) error {
		var sizes []int
		total := 0
		for {
			m, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			sizes = append(sizes, len(m.GetPayload().GetBody()))
			total += len(m.GetPayload().GetBody())
		}
		*got = append(*got, sizes)
		if n < failUntil {
			return status.Error(codes.Unavailable, "lost it")
		}
		return s.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
	}
}

// TestClientStreamReplay: the client's messages are replayed on a retry,
// and CloseSend with them.
func TestClientStreamReplay(t *testing.T) {
	var got [][]int
	srv := &server{input: sumInput(2, &got)}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingInputCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 20, 30} {
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(n)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.CloseAndRecv()
	if err != nil || r.GetAggregatedPayloadSize() != 60 {
		t.Fatalf("%v, %v", r, err)
	}
	if len(got) != 2 || !slices.Equal(got[0], got[1]) || !slices.Equal(got[1], []int{10, 20, 30}) {
		t.Fatalf("the server read %v", got)
	}
}

// TestClientStreamBufferLimit: messages past the replay buffer commit the
// call, which is then not retried.
func TestClientStreamBufferLimit(t *testing.T) {
	for _, tc := range []struct {
		limit   int
		retried bool
	}{{1000, true}, {100, false}} {
		var got [][]int
		srv := &server{input: sumInput(2, &got)}
		c := client(t, srv, WithStrategy(simple(3)), WithBufferLimit(tc.limit))
		st, err := c.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(40)}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = st.CloseAndRecv()
		if tc.retried != (err == nil) || srv.calls.Load() != map[bool]int64{true: 2, false: 1}[tc.retried] {
			t.Errorf("limit %d: %v after %d attempts", tc.limit, err, srv.calls.Load())
		}
		if !tc.retried && (!errors.Is(err, ErrCommitted) || status.Code(err) != codes.Unavailable) {
			t.Errorf("limit %d: %v, want ErrCommitted and UNAVAILABLE", tc.limit, err)
		}
	}
}

// TestBidiRetry: a bidirectional stream that fails before its first
// response is retried with the messages sent so far.
func TestBidiRetry(t *testing.T) {
	srv := &server{duplex: func(n int, s testpb.TestService_FullDuplexCallServer) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if n == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return s.Send(&testpb.StreamingOutputCallResponse{Payload: m.GetPayload()})
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(7)}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil || len(r.GetPayload().GetBody()) != 7 || srv.calls.Load() != 2 {
		t.Fatalf("%v, %v after %d attempts", r, err, srv.calls.Load())
	}
	st.CloseSend()
}

// TestHeaderCommits: headers the server sent commit the stream, as grpc's
// own retry does: a failure after them is not retried.
func TestHeaderCommits(t *testing.T) {
	srv := &server{output: func(_ int, _ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
		if err := st.SendHeader(metadata.MD{}); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "down")
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st.Header()
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable || srv.calls.Load() != 1 {
		t.Fatalf("after headers the server sent: %v after %d attempts, want UNAVAILABLE after 1", err, srv.calls.Load())
	}
}

// TestStreamGiveUp: a stream that keeps failing gives a *retry.Error.
func TestStreamGiveUp(t *testing.T) {
	srv := &server{output: func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	var re *retry.Error
	if !errors.As(err, &re) || !errors.Is(err, retry.ErrMaxAttempts) || status.Code(err) != codes.Unavailable || srv.calls.Load() != 3 {
		t.Fatalf("%v after %d attempts", err, srv.calls.Load())
	}
}

// TestStreamNeverOpened: a stream that could not be opened (a refused
// connection) is retried by its first receive, and reports every attempt.
func TestStreamNeverOpened(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	attempts := 0
	c := dial(t, addr, grpc.WithStreamInterceptor(StreamClientInterceptor(WithStrategy(simple(3)),
		WithRetryOptions(retry.OnAttemptFailed(func(context.Context, int, error) { attempts++ })))))
	st, err := c.StreamingInputCall(context.Background())
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(1)}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := st.CloseAndRecv(); status.Code(err) != codes.Unavailable || attempts != 3 {
		t.Fatalf("%v after %d attempts", err, attempts)
	}
}

// TestBidiConcurrentRetry: one goroutine sends while another receives, and
// the first attempt fails after reading two messages: the retry replays
// what was sent, the messages sent during it follow in order, and every
// echo arrives once.
func TestBidiConcurrentRetry(t *testing.T) {
	srv := &server{duplex: func(n int, s testpb.TestService_FullDuplexCallServer) error {
		for i := 0; ; i++ {
			m, err := s.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if n == 1 && i == 1 {
				return status.Error(codes.Unavailable, "restarting")
			}
			if n > 1 {
				if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: m.GetPayload()}); err != nil {
					return err
				}
			}
		}
	}}
	c := client(t, srv, WithStrategy(simple(3)))
	st, err := c.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	sendErr := sendInBackground(st, n, func(i int) *testpb.StreamingOutputCallRequest {
		return &testpb.StreamingOutputCallRequest{Payload: payload(i + 1)}
	})
	for i := range n {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if len(r.GetPayload().GetBody()) != i+1 {
			t.Fatalf("echo %d has %d bytes", i, len(r.GetPayload().GetBody()))
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if srv.calls.Load() != 2 {
		t.Fatalf("%d attempts", srv.calls.Load())
	}
}

// heldSend is a grpc.ClientStream whose second SendMsg waits, once it has
// begun, until release is closed.
type heldSend struct {
	grpc.ClientStream
	sends            int
	entered, release chan struct{}
}

func (h *heldSend) SendMsg(m any) error {
	if h.sends++; h.sends == 2 {
		close(h.entered)
		<-h.release
	}
	return h.ClientStream.SendMsg(m)
}

// TestSendOnARetriedAttemptAfterTheCommit: a send on the first attempt
// that returns io.EOF after the loop has retried the call, replayed the
// message and committed on the retry's first message, returns nil: the
// message went out on the retry, and the application goes on sending.
func TestSendOnARetriedAttemptAfterTheCommit(t *testing.T) {
	srv := &server{duplex: answerEach(func(n int, m *testpb.StreamingOutputCallRequest) (*testpb.StreamingOutputCallResponse, error) {
		if n == 1 {
			return nil, status.Error(codes.Unavailable, "restarting")
		}
		return &testpb.StreamingOutputCallResponse{Payload: m.GetPayload()}, nil
	})}
	first := &heldSend{entered: make(chan struct{}), release: make(chan struct{})}
	attempts := 0
	hold := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if attempts++; attempts == 1 && err == nil {
			first.ClientStream = cs
			return first, nil
		}
		return cs, err
	}
	c := dial(t, serve(t, srv), grpc.WithChainStreamInterceptor(StreamClientInterceptor(WithStrategy(simple(3))), hold))
	st, err := c.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	sendErr := make(chan error, 1)
	go func() { sendErr <- st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(2)}) }()
	<-first.entered // the second message is kept, and on its way to the first attempt
	for i := range 2 {
		if r, err := st.Recv(); err != nil || len(r.GetPayload().GetBody()) != i+1 {
			t.Fatalf("echo %d: %v, %v", i, r, err)
		}
	}
	close(first.release)
	if err := <-sendErr; err != nil {
		t.Fatalf("the send on the first attempt, retried and committed meanwhile: %v, want nil", err)
	}
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: payload(3)}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || len(r.GetPayload().GetBody()) != 3 {
		t.Fatalf("echo 2: %v, %v", r, err)
	}
	st.CloseSend()
	if _, err := st.Recv(); err != io.EOF || srv.calls.Load() != 2 {
		t.Fatalf("end: %v after %d attempts", err, srv.calls.Load())
	}
}

// answerEach is a bidirectional handler that answers each request as it
// reads it, with what answer makes of it, until the client closes its side;
// an error of answer's ends the call.
func answerEach(answer func(n int, m *testpb.StreamingOutputCallRequest) (*testpb.StreamingOutputCallResponse, error)) func(int, testpb.TestService_FullDuplexCallServer) error {
	return func(n int, s testpb.TestService_FullDuplexCallServer) error {
		for {
			m, err := s.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			r, err := answer(n, m)
			if err != nil {
				return err
			}
			if err := s.Send(r); err != nil {
				return err
			}
		}
	}
}

// sendInBackground sends the n requests req makes on st, in a goroutine of
// its own, then closes the sending side; the channel gets the first error,
// or nil.
func sendInBackground(st testpb.TestService_FullDuplexCallClient, n int, req func(i int) *testpb.StreamingOutputCallRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := st.Send(req(i)); err != nil {
				done <- err
				return
			}
		}
		done <- st.CloseSend()
	}()
	return done
}

// TestStreamOpenNotRetryable: a stream that cannot be opened for a reason
// retrying cannot fix fails at once, as a *retry.Error.
func TestStreamOpenNotRetryable(t *testing.T) {
	srv := &server{}
	c := client(t, srv, WithStrategy(simple(3)))
	_, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{}, grpc.UseCompressor("no-such-compressor"))
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || status.Code(err) != codes.Internal || srv.calls.Load() != 0 {
		t.Fatalf("%v (%T)", err, err)
	}
}

// delayedFirst is a Strategy whose first token carries a delay, as
// Adaptive's does while its client-side limiter is on, and that never
// retries.
type delayedFirst struct{ d time.Duration }

func (s delayedFirst) AcquireInitialToken(string) (retry.Token, error) {
	return retry.NewToken(0, s.d, nil), nil
}
func (delayedFirst) RefreshToken(retry.Token, error) (retry.Token, error) {
	return retry.Token{}, retry.ErrMaxAttempts
}
func (delayedFirst) RecordSuccess(retry.Token) error { return nil }

// TestStreamLoopDoesNotWaitBeforeTheOpenedAttempt: a stream is opened when
// it is created, before its loop runs; the loop reads that attempt at the
// first receive without waiting the strategy's first delay, which could
// only misreport an attempt already sent as not made (an hour past the
// deadline, a give-up of 0 attempts), with or without a breaker.
func TestStreamLoopDoesNotWaitBeforeTheOpenedAttempt(t *testing.T) {
	srv := &server{output: func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		return s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)})
	}}
	addr := serve(t, srv)
	for _, b := range []*retry.Breaker{nil, retry.NewBreaker(retry.BreakerOptions{})} {
		c := dial(t, addr, grpc.WithStreamInterceptor(StreamClientInterceptor(WithStrategy(delayedFirst{time.Hour}), WithBreaker(b))))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if err != nil {
			t.Fatalf("breaker %v: the stream whose first attempt was sent: %v, want its message", b != nil, err)
		}
	}
}

// TestClientStreamAnsweredEndsItsContext: a client-streaming call is over
// once its one response has come, and its Context is done then, as grpc's
// own stream's is: the call's context would otherwise stay registered with
// the caller's until that one ends, one per call. Whether Header ran the
// loop first or the receive did.
func TestClientStreamAnsweredEndsItsContext(t *testing.T) {
	var got [][]int
	c := client(t, &server{input: sumInput(0, &got)}, WithStrategy(simple(3)))
	for _, header := range []bool{false, true} {
		st, err := c.StreamingInputCall(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(4)}); err != nil {
			t.Fatal(err)
		}
		if header {
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Header(); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := st.CloseAndRecv(); err != nil || r.GetAggregatedPayloadSize() != 4 {
			t.Fatalf("header first %v: CloseAndRecv = %v, %v; want a sum of 4", header, r, err)
		}
		if st.Context().Err() == nil {
			t.Fatalf("header first %v: the stream's Context is not done once its one response came", header)
		}
	}
}

// TestBidiSendBlockedOnFlowControlLetsRecvRun: one goroutine sends while
// another receives, as grpc.ClientStream allows, and each request asks for
// a 1 MB answer: the server answers as it reads, so a send soon waits on
// flow control until the client reads the answers. The receive must not
// wait for that send. Plain grpc finishes this in about a second; the
// deadline fails the test if the stream stalls.
func TestBidiSendBlockedOnFlowControlLetsRecvRun(t *testing.T) {
	srv := &server{duplex: answerEach(func(_ int, m *testpb.StreamingOutputCallRequest) (*testpb.StreamingOutputCallResponse, error) {
		return &testpb.StreamingOutputCallResponse{Payload: payload(int(m.GetResponseParameters()[0].GetSize()))}, nil
	})}
	c := client(t, srv, WithStrategy(simple(3)))
	for _, size := range []int{16 << 10, 300 << 10} {
		const n, answer = 16, 1 << 20
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sendErr := sendInBackground(st, n, func(int) *testpb.StreamingOutputCallRequest {
			return &testpb.StreamingOutputCallRequest{Payload: payload(size), ResponseParameters: []*testpb.ResponseParameters{{Size: answer}}}
		})
		for i := range n {
			r, err := st.Recv()
			if err != nil {
				t.Fatalf("%d-byte requests: answer %d: %v", size, i, err)
			}
			if len(r.GetPayload().GetBody()) != answer {
				t.Fatalf("%d-byte requests: answer %d has %d bytes", size, i, len(r.GetPayload().GetBody()))
			}
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("%d-byte requests: end: %v", size, err)
		}
		if err := <-sendErr; err != nil {
			t.Fatalf("%d-byte requests: send: %v", size, err)
		}
		cancel()
	}
}
