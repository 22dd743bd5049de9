package grpcretry

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
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

// TestVirtualStreamAttemptTimeout: the attempt timeout bounds a stream
// attempt until its first message, and not after it.
func TestVirtualStreamAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newClock()
		srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
			clk.mark()
			if n == 1 {
				<-s.Context().Done()
				return s.Context().Err()
			}
			if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
			time.Sleep(time.Second) // far past the attempt timeout, after the commit
			return s.Send(&testpb.StreamingOutputCallResponse{})
		}}
		c := vclient(t, srv, WithStrategy(simple(3)), WithAttemptTimeout(100*time.Millisecond),
			WithIdempotentMethods("/grpc.testing.TestService/StreamingOutputCall"))
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := st.Recv(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if _, err := st.Recv(); err == nil || !equalDurations(clk.times(), []time.Duration{0, 100 * time.Millisecond}) {
			t.Fatalf("end: %v; attempts at %v", err, clk.times())
		}
	})
}

// TestVirtualSendAfterFailedAttempt: a send on an attempt the server has
// already ended keeps the message and returns nil, and the receive that
// follows retries with every message, the one sent after the failure too.
func TestVirtualSendAfterFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got [][]int
		srv := &server{input: func(n int, s testpb.TestService_StreamingInputCallServer) error {
			if n == 1 {
				return status.Error(codes.Unavailable, "going away")
			}
			return sumInput(0, &got)(n, s)
		}}
		c := vclient(t, srv, WithStrategy(simple(3)))
		st, err := c.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(1)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the server has ended the attempt, and the client knows
		if err := st.Send(&testpb.StreamingInputCallRequest{Payload: payload(2)}); err != nil {
			t.Fatalf("send after the attempt ended: %v", err)
		}
		rs := st.(*grpc.GenericClientStream[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]).ClientStream.(*retryStream)
		rs.mu.Lock()
		broken := rs.broken
		rs.mu.Unlock()
		if !broken {
			t.Fatal("the second send did not see the attempt end")
		}
		r, err := st.CloseAndRecv()
		if err != nil || r.GetAggregatedPayloadSize() != 3 || len(got) != 1 || len(got[0]) != 2 {
			t.Fatalf("%v, %v; the retry read %v", r, err, got)
		}
	})
}

// TestVirtualStreamOutlivesItsLoop: a stream whose attempt the loop opened
// (a retry, or the first attempt of a half-open circuit) keeps delivering
// messages after it committed, when WithRetryOptions bounds the loop with
// retry.MaxElapsed or retry.AttemptTimeout: those bound the loop's
// attempts, whose contexts end when retry.Do returns, not the call.
func TestVirtualStreamOutlivesItsLoop(t *testing.T) {
	bounds := map[string]retry.Option{"MaxElapsed": retry.MaxElapsed(time.Minute), "AttemptTimeout": retry.AttemptTimeout(time.Minute)}
	for name, bound := range bounds {
		for _, halfOpen := range []bool{false, true} {
			t.Run(name+map[bool]string{false: ", a retry", true: ", half-open"}[halfOpen], func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := &server{
						unary: func(context.Context, int, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
							return nil, status.Error(codes.Unavailable, "down")
						},
						output: func(n int, req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
							if n == 1 && !halfOpen {
								return status.Error(codes.Unavailable, "not yet")
							}
							return sendsAfter(0, 10*time.Millisecond, 10*time.Millisecond)(n, req, s)
						},
					}
					opts := []Option{WithStrategy(simple(3)), WithRetryOptions(bound)}
					var b *retry.Breaker
					if halfOpen {
						b = retry.NewBreaker(retry.BreakerOptions{MinAttempts: 4, OpenFor: time.Second})
						opts = append(opts, WithBreaker(b))
					}
					c := vclient(t, srv, opts...)
					if halfOpen {
						openCircuit(t, c, b, "passthrough:///bufconn")
						time.Sleep(time.Second)
					}
					st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
					if err != nil {
						t.Fatal(err)
					}
					recvAll(t, st, 3)
				})
			})
		}
	}
}

// TestVirtualStreamRetryBoundedByItsLoop: until its first message, a retry
// is still bounded by what bounds the loop's attempts: retry.MaxElapsed and
// retry.AttemptTimeout of WithRetryOptions cut a retry that never answers.
func TestVirtualStreamRetryBoundedByItsLoop(t *testing.T) {
	bounds := map[string]retry.Option{"MaxElapsed": retry.MaxElapsed(50 * time.Millisecond), "AttemptTimeout": retry.AttemptTimeout(50 * time.Millisecond)}
	for name, bound := range bounds {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &server{output: func(n int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
					if n == 1 {
						return status.Error(codes.Unavailable, "not yet")
					}
					<-s.Context().Done()
					return s.Context().Err()
				}}
				c := vclient(t, srv, WithStrategy(simple(3)), WithRetryOptions(bound))
				start := time.Now()
				st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.Recv(); err == nil || time.Since(start) != 50*time.Millisecond {
					t.Fatalf("a retry that never answers: %v after %v, want an error after 50ms", err, time.Since(start))
				}
			})
		})
	}
}

// TestVirtualStreamAttemptTimeoutEndsAtFirstMessage: WithAttemptTimeout
// bounds a stream attempt until its first response message, not until the
// loop has done with it: a Trace that takes longer than the timeout after
// the first message arrived (at 10 ms of 40) does not cancel the stream,
// whose second message comes at 110 ms.
func TestVirtualStreamAttemptTimeoutEndsAtFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &server{output: sendsAfter(10*time.Millisecond, 100*time.Millisecond)}
		slowTrace := &retry.Trace{AttemptDone: func(context.Context, string, int, error) { time.Sleep(60 * time.Millisecond) }}
		c := vclient(t, srv, WithStrategy(simple(3)), WithAttemptTimeout(40*time.Millisecond), WithRetryOptions(retry.WithTrace(slowTrace)))
		st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		recvAll(t, st, 2)
	})
}

// sendsAfter is a server-streaming handler that sends a message after each
// of waits, one after the other, and ends OK; it returns when its call
// ends.
func sendsAfter(waits ...time.Duration) func(int, *testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
	return func(_ int, _ *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
		for _, wait := range waits {
			select {
			case <-time.After(wait):
			case <-s.Context().Done():
				return s.Context().Err()
			}
			if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: payload(1)}); err != nil {
				return err
			}
		}
		return nil
	}
}

// recvAll receives n messages from st, and then its end, io.EOF.
func recvAll(t *testing.T, st grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse], n int) {
	t.Helper()
	for i := range n {
		if _, err := st.Recv(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

// The tests from here to the end of the file hold the stream interceptor to
// grpc-go's own retry (test/retry_test.go, TestRetryStreaming) where Header
// and Context meet retries: a Header on an attempt that ends Trailers-Only
// with a retryable status retries first, as gRFC A6 commits a call on
// headers and not on a Trailers-Only response; headers the server sent
// commit it. Each runs a real grpc.Server on loopback.

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
