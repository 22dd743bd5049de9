package grpcretry

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// errAttemptTimeout is the cause of a stream attempt's cancellation by the
// attempt timeout.
var errAttemptTimeout = errors.New("grpcretry: attempt timed out")

// StreamClientInterceptor returns an interceptor that retries streaming
// calls as gRPC A6 does, through a retry.Strategy: a stream is retried until
// it is committed, by its first response message (or a call of Header), or
// by client messages that outgrow the replay buffer (WithBufferLimit, 256 KiB
// by default). Until then the client messages sent are kept, and a retry
// sends them again (and CloseSend, if it was called) before it reads. After
// that, errors come back as grpc returned them. Install it with
// grpc.WithStreamInterceptor, with grpc.WithDisableRetry().
//
// The retry decision is made when the application receives: the first
// RecvMsg (CloseAndRecv, Recv) runs the call's retry loop, retry.Do, whose
// first attempt is the stream already open. A SendMsg on an attempt that has
// failed keeps the message and returns nil, so that the receive that follows
// can retry; once the call is committed it returns io.EOF as grpc does.
// Messages that are not protocol buffers have no known size: the first one
// commits the call.
func StreamClientInterceptor(opts ...Option) grpc.StreamClientInterceptor {
	i := newInterceptor(opts)
	return i.stream
}

func (i *interceptor) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	idem, noRetry, opts := callOptions(opts)
	if noRetry {
		return streamer(ctx, desc, cc, method, opts...)
	}
	s := &retryStream{
		i: i, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer,
		idempotent: idem || i.cfg.isIdempotent(method),
	}
	s.opts = append(append(s.opts, opts...), grpc.Header(&s.header), grpc.Trailer(&s.trailer), grpc.Peer(&s.peer))
	s.open(ctx)
	if s.openErr != nil && !s.i.cfg.classify(s.openErr, s.outcome(ctx)).info.Retryable() {
		// Nothing to retry: report it where grpc would, as a give-up.
		s.cancel(nil)
		return nil, &retry.Error{Attempts: 1, Err: s.openErr, Reason: retry.ErrNotRetryable}
	}
	return s, nil
}

// retryStream is a grpc.ClientStream that retries until it is committed.
type retryStream struct {
	i          *interceptor
	ctx        context.Context // the caller's
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	method     string
	streamer   grpc.Streamer
	opts       []grpc.CallOption
	idempotent bool

	mu        sync.Mutex // guards the fields below; held while sending
	cur       grpc.ClientStream
	openErr   error // the current attempt could not be opened
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	actx      context.Context
	attempts  int
	buf       []any
	size      int
	closed    bool // CloseSend was called
	broken    bool // a send on the current attempt failed
	committed bool
	started   bool // the retry loop ran: the call is past its first receive
	header    metadata.MD
	trailer   metadata.MD
	peer      peer.Peer
}

// open starts an attempt. Called with s.mu held, or before s is shared.
func (s *retryStream) open(ctx context.Context) {
	s.attempts++
	if s.cancel != nil {
		s.cancel(nil)
		s.stopTimer()
	}
	actx, cancel := context.WithCancelCause(ctx)
	if s.attempts > 1 {
		actx = metadata.AppendToOutgoingContext(actx, PreviousAttemptsKey, strconv.Itoa(s.attempts-1))
	}
	s.actx, s.cancel = actx, cancel
	if d := s.i.cfg.attemptTimeout; d > 0 && !s.committed {
		s.timer = time.AfterFunc(d, func() { cancel(errAttemptTimeout) })
	}
	s.header, s.trailer, s.peer, s.broken = nil, nil, peer.Peer{}, false
	s.cur, s.openErr = s.streamer(actx, s.desc, s.cc, s.method, s.opts...)
	if s.openErr != nil {
		s.cur = nil
	}
}

func (s *retryStream) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// commit ends retrying: the buffer goes, and so does the attempt timeout.
// Called with s.mu held.
func (s *retryStream) commit() {
	s.committed = true
	s.buf, s.size = nil, 0
	s.stopTimer()
}

func (s *retryStream) outcome(ctx context.Context) outcome {
	return outcome{
		trailer:    s.trailer,
		answered:   s.header != nil,
		sent:       sent(s.peer.Addr),
		idempotent: s.idempotent,
		timedOut:   !expired(ctx) && context.Cause(s.actx) == errAttemptTimeout,
		callerDone: expired(ctx),
	}
}

// sizeOf is a message's size for the replay buffer, or -1 if unknown.
func sizeOf(m any) int {
	if pm, ok := m.(proto.Message); ok {
		return proto.Size(pm)
	}
	return -1
}

// SendMsg sends m on the current attempt and keeps it for a retry until the
// call is committed.
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		n := sizeOf(m)
		if n < 0 || s.size+n > s.i.cfg.bufferLimit {
			s.commit()
		} else {
			s.buf = append(s.buf, m)
			s.size += n
		}
	}
	if s.cur == nil || s.broken {
		if s.committed {
			return io.EOF // the attempt is over; RecvMsg reports how
		}
		return nil
	}
	err := s.cur.SendMsg(m)
	if err == io.EOF && !s.committed {
		s.broken = true // the receive that follows learns why, and retries
		return nil
	}
	return err
}

// CloseSend closes the sending side of the current attempt, and of every
// retry.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cur == nil {
		return nil
	}
	return s.cur.CloseSend()
}

// Header returns the current attempt's header metadata. Like grpc's own
// retry, it commits the call: the headers the application saw must be those
// of the attempt it talks to.
func (s *retryStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	s.commit()
	cur, err := s.cur, s.openErr
	s.mu.Unlock()
	if cur == nil {
		return nil, err
	}
	return cur.Header()
}

// Trailer returns the current attempt's trailer metadata.
func (s *retryStream) Trailer() metadata.MD {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Trailer()
}

// Context returns the current attempt's context.
func (s *retryStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return s.actx
	}
	return s.cur.Context()
}

// RecvMsg receives the next message. The first call runs the call's retry
// loop; later ones read the committed attempt.
func (s *retryStream) RecvMsg(m any) error {
	s.mu.Lock()
	if s.started {
		cur, err := s.cur, s.openErr
		s.mu.Unlock()
		if cur == nil {
			return err
		}
		err = cur.RecvMsg(m)
		if err != nil {
			s.cancel(nil) // the stream is over
		}
		return err
	}
	s.started = true
	s.mu.Unlock()

	r := &recvLoop{s: s, m: m}
	ropts := make([]retry.Option, 0, len(s.i.cfg.retryOpts)+2)
	ropts = append(ropts, retry.Scope(s.i.cfg.scopeOf(s.cc, s.method)))
	ropts = append(ropts, s.i.cfg.retryOpts...)
	ropts = append(ropts, retry.BeforeRetry(r.vet))
	err := retry.Do(s.ctx, s.i.cfg.strategy, r.attempt, ropts...)
	s.mu.Lock()
	s.commit()
	s.mu.Unlock()
	if err == nil && r.eof {
		err = io.EOF
	}
	if err != nil {
		s.cancel(nil)
	}
	return err
}

// recvLoop is the first receive of a stream, as retry.Do's operation.
type recvLoop struct {
	s    *retryStream
	m    any
	n    int
	eof  bool // the stream ended with an OK status and no message
	last *attemptError
}

func (r *recvLoop) attempt(ctx context.Context) error {
	s := r.s
	r.n++
	s.mu.Lock()
	if r.n > 1 {
		s.open(ctx)
		if s.openErr == nil {
			s.replay()
		}
	}
	cur, openErr := s.cur, s.openErr
	s.mu.Unlock()
	var err error
	if cur == nil {
		err = openErr
	} else {
		err = cur.RecvMsg(r.m)
	}
	switch err {
	case nil:
		return nil
	case io.EOF:
		r.eof = true
		return nil
	}
	s.mu.Lock()
	r.last = s.i.cfg.classify(err, s.outcome(ctx))
	s.mu.Unlock()
	return r.last
}

// replay sends the kept messages on a new attempt, and closes its sending
// side if the application did. Called with s.mu held.
func (s *retryStream) replay() {
	for _, m := range s.buf {
		if err := s.cur.SendMsg(m); err != nil {
			s.broken = true // RecvMsg on the attempt reports why
			return
		}
	}
	if s.closed {
		_ = s.cur.CloseSend()
	}
}

// vet runs before the strategy is asked for a retry.
func (r *recvLoop) vet(ctx context.Context, _ int, _ error) error {
	r.s.mu.Lock()
	committed := r.s.committed
	r.s.mu.Unlock()
	if committed && r.last != nil && r.last.info.Retryable() {
		return ErrCommitted
	}
	return r.s.i.cfg.vetHints(ctx, r.last, retry.CallerRetries(ctx))
}
