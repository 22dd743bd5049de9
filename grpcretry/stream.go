package grpcretry

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// errAttemptTimeout is the cause of a stream attempt's cancellation by the
// attempt timeout.
var errAttemptTimeout = errors.New("grpcretry: attempt timed out")

// StreamClientInterceptor returns an interceptor that retries streaming
// calls as gRPC A6 does, through a retry.Strategy: a stream is retried until
// it is committed, by its first response message, by headers the server
// sent (read with Header), or by client messages that outgrow the replay
// buffer (WithBufferLimit, 256 KiB by default). Until then the client
// messages sent are kept, and a retry sends them again (and CloseSend, if it
// was called) before it reads. After that, errors come back as grpc returned
// them. Install it with grpc.WithStreamInterceptor, with
// grpc.WithDisableRetry().
//
// The retry decision is made when the application first receives or reads
// the headers: the first RecvMsg (CloseAndRecv, Recv) or Header runs the
// call's retry loop, retry.Do, whose first attempt is the stream already
// open. Header, as in grpc's own retry, retries an attempt that ends without
// headers (a Trailers-Only status) if its status is retryable, and returns
// the headers of the attempt that answers; if none does, it returns nil
// headers and no error, and RecvMsg returns the call's error. A SendMsg on
// an attempt that has failed keeps the message and returns nil, so that the
// receive that follows can retry; once the call is committed it returns
// io.EOF as grpc does. A send grpc refuses (a message larger than
// MaxCallSendMsgSize) ends the call with that error, as in grpc. Messages
// that are not protocol buffers have no known size: the first one commits
// the call.
//
// The stream's Context lives as long as the call, across its retries; see
// the Context method.
func StreamClientInterceptor(opts ...Option) grpc.StreamClientInterceptor {
	i := newInterceptor(opts)
	return i.stream
}

func (i *interceptor) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	idem, noRetry, opts := callOptions(opts)
	if noRetry {
		return streamer(ctx, desc, cc, method, opts...)
	}
	// The breaker decides before anything reaches the server, as it does
	// for Do's attempts. Through a closed circuit (or without a breaker)
	// the first attempt is opened here, with the breaker's leave, which
	// the loop takes for its first attempt (retry.WithTicket): the attempt
	// is judged by the circuit it went through, whatever the circuit does
	// until the first receive, and the loop does not wait before it. An
	// open circuit refuses the stream now, through the loop, so that its
	// Trace (and otelretry) sees the refusal. A half-open one leaves the
	// opening to the loop's first attempt, after the breaker gave it a
	// probe's place: a stream never read holds none.
	var (
		deferred bool
		ticket   retry.BreakerTicket
	)
	if b := i.cfg.breaker; b != nil {
		scope := i.cfg.scopeOf(cc, method)
		if b.State(scope) == retry.BreakerHalfOpen {
			deferred = true
		} else {
			var err error
			if ticket, err = b.Allow(scope); err != nil {
				return nil, i.refuse(ctx, cc, method, ticket)
			}
			if ticket.Probe() {
				// The open spell ended since State: half-open after all.
				ticket.Release()
				ticket, deferred = retry.BreakerTicket{}, true
			}
		}
	}
	s := &retryStream{
		i: i, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer,
		idempotent: idem || i.cfg.isIdempotent(method),
		ticketed:   !deferred,
		ticket:     ticket,
	}
	s.cond.L = &s.mu
	s.buf = s.bufOne[:0]
	s.r.s = s
	s.call, s.end = context.WithCancel(ctx)
	s.callCtx = callContext{Context: s.call, s: s}
	// The peer tells whether an attempt left the client, at no cost; the
	// rest of a failure's classification is read from the failed attempt.
	s.opts = append(append(s.optBuf[:0], opts...), grpc.Peer(&s.peer))
	if deferred {
		return s, nil
	}
	s.open(nil)
	if s.openErr != nil {
		if failure := s.i.cfg.classify(s.openErr, s.outcome(ctx, nil)); !failure.info.Retryable() {
			// Nothing to retry: report it where grpc would, as a give-up.
			s.ticket.Done(ctx, failure)
			s.end()
			return nil, &retry.Error{Attempts: 1, Err: s.openErr, Reason: retry.ErrNotRetryable}
		}
	}
	return s, nil
}

// refuse runs the call's retry loop, with the breaker, for a stream whose
// circuit refused it, refusal being the breaker's record of that: the loop
// refuses its first attempt with retry.ErrCircuitOpen and tells the call's
// Trace and hooks, as Do does for a unary call. It returns that refusal,
// never nil, with its status (see statusOf).
func (i *interceptor) refuse(ctx context.Context, cc *grpc.ClientConn, method string, refusal retry.BreakerTicket) error {
	opts := make([]retry.Option, 0, len(i.cfg.retryOpts)+2)
	opts = append(opts, retry.Scope(i.cfg.scopeOf(cc, method)))
	opts = append(opts, i.cfg.retryOpts...)
	opts = append(opts, retry.WithTicket(refusal))
	_, err := retry.DoValue(ctx, i.cfg.strategy, func(context.Context) (struct{}, error) {
		return struct{}{}, retry.ErrCircuitOpen // never called: the ticket refuses the attempt
	}, opts...)
	return statusOf(err)
}

// The states of a stream's retry loop.
const (
	loopIdle    = iota // not run yet: neither RecvMsg nor Header was called
	loopRunning        // run by the first RecvMsg or Header
	loopDone           // over: the call is committed, or ended (final)
)

// retryStream is a grpc.ClientStream that retries until it is committed.
// Its Context, its receive loop, its first attempt's record and room for a
// server-streaming call's request are parts of it, not allocations apart.
type retryStream struct {
	i          *interceptor
	ctx        context.Context // the caller's
	call       context.Context // the call's: the caller's, ended by end when the call is over
	end        context.CancelFunc
	callCtx    callContext // what Context returns
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	method     string
	streamer   grpc.Streamer
	opts       []grpc.CallOption  // the caller's, then grpc.Peer(&peer)
	optBuf     [4]grpc.CallOption // opts, unless the caller gave more than 3
	idempotent bool
	ticketed   bool                       // the first attempt was opened, or refused, before the loop, with ticket
	ticket     retry.BreakerTicket        // the breaker's leave for it, or its refusal; zero without a breaker
	live       atomic.Pointer[attemptRef] // the current attempt, for callContext.Value without s.mu
	first      attemptRef                 // the first attempt's, which live points to until a retry
	r          recvLoop                   // the first receive's retry loop

	mu        sync.Mutex // guards the fields below, not the sends on cur
	cond      sync.Cond  // on mu: broadcast when the attempt is replaced and when the loop ends
	cur       grpc.ClientStream
	openErr   error // the current attempt could not be opened
	cancel    context.CancelCauseFunc
	timer     *time.Timer // the attempt timeout, until the first response message
	unlink    func() bool // stops the loop's context from ending the attempt (see open)
	actx      context.Context
	attempts  int
	buf       []any  // the messages kept for a retry: bufOne's until there are two
	bufOne    [1]any // a server-streaming call's one request
	size      int
	closed    bool // CloseSend was called
	broken    bool // a send on the current attempt failed
	committed bool
	loop      int   // loopIdle, loopRunning or loopDone
	final     error // once the loop is done: how it ended the call (io.EOF for OK), or nil if the call goes on
	peer      peer.Peer
}

// attemptRef is an attempt as callContext.Value reads it.
type attemptRef struct {
	cs  grpc.ClientStream // nil if the attempt could not be opened
	ctx context.Context   // the attempt's context
}

// open starts an attempt, in the call's context, so that the end of the
// call ends the attempt. loop is the context retry.Do gave the attempt, nil
// before the loop runs: the attempt has its values (the loop's mark, a
// Trace's), but not its end, which comes when retry.Do returns (a
// retry.MaxElapsed or retry.AttemptTimeout of WithRetryOptions), while an
// attempt that committed goes on. Until its first response message the
// loop's context bounds the attempt, as the attempt timeout does (see
// unbound). An attempt replaced by another has failed, and grpc has ended
// its stream: only these bounds need a context of the attempt's own.
// Called with s.mu held, or before s is shared.
func (s *retryStream) open(loop context.Context) {
	s.attempts++
	if s.cancel != nil {
		s.cancel(nil)
		s.cancel = nil
	}
	s.unbound()
	base, values := s.call, context.Context(nil)
	if loop != nil {
		if loop.Done() == s.call.Done() {
			base = loop // it ends with the call: nothing to keep apart
		} else {
			values = loop
		}
	}
	actx := base
	timeout := s.i.cfg.attemptTimeout > 0 && !s.committed
	if timeout || values != nil {
		var cancel context.CancelCauseFunc
		actx, cancel = context.WithCancelCause(base)
		s.cancel = cancel
		if timeout {
			s.timer = time.AfterFunc(s.i.cfg.attemptTimeout, func() { cancel(errAttemptTimeout) })
		}
		if values != nil {
			s.unlink = context.AfterFunc(values, func() { cancel(context.Cause(values)) })
			actx = &attemptContext{Context: actx, values: values}
		}
	}
	if s.attempts > 1 {
		actx = metadata.AppendToOutgoingContext(actx, PreviousAttemptsKey, strconv.Itoa(s.attempts-1))
	}
	s.actx = actx
	s.peer, s.broken = peer.Peer{}, false
	s.cur, s.openErr = s.streamer(actx, s.desc, s.cc, s.method, s.opts...)
	if s.openErr != nil {
		s.cur = nil
	}
	ref := &s.first
	if s.attempts > 1 {
		ref = new(attemptRef)
	}
	ref.cs, ref.ctx = s.cur, actx
	s.live.Store(ref)
	s.cond.Broadcast() // a Header waiting on the attempt this one replaces reads this one
}

// openEarly opens a deferred stream before its loop runs, if the breaker
// lets it: the loop takes the breaker's leave, or its refusal, for its first
// attempt (retry.WithTicket), which it does not make again. Called with s.mu
// held.
func (s *retryStream) openEarly() {
	var err error
	s.ticket, err = s.i.cfg.breaker.Allow(s.i.cfg.scopeOf(s.cc, s.method))
	s.ticketed = true
	if err != nil {
		return
	}
	if s.ticket.Probe() {
		// A call ended before any receive runs its loop would hold the
		// probe's place until the breaker hands it out again.
		context.AfterFunc(s.call, s.abandon)
	}
	s.open(nil)
	if s.openErr == nil {
		s.replay()
	}
}

// abandon releases the probe's ticket of a stream opened early if its call
// ended before a receive ran the loop, which would have reported it.
func (s *retryStream) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loop == loopIdle {
		s.ticket.Release()
		s.ticket = retry.BreakerTicket{}
	}
}

// unbound lifts the bounds of the current attempt that hold only until its
// first response message, or its commit: the attempt timeout, and the end of
// the loop's context. Called with s.mu held.
func (s *retryStream) unbound() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.unlink != nil {
		s.unlink()
		s.unlink = nil
	}
}

// commit ends retrying: the buffer goes, and so do the attempt's bounds.
// Called with s.mu held.
func (s *retryStream) commit() {
	s.committed = true
	clear(s.buf)
	s.buf, s.size = nil, 0
	s.unbound()
}

// attemptContext is the context of an attempt the loop opened, when the
// loop's context may end before the call: it is done when its embedded
// context, the attempt's own, is, and reads its values from the loop's.
type attemptContext struct {
	context.Context // the attempt's, derived from retryStream.call
	values          context.Context
}

// Value returns the loop's value for key, except for the key under which
// package context finds a cancellation: that is the attempt's own (see
// callContext.Value).
func (c *attemptContext) Value(key any) any {
	if v := c.Context.Value(key); v == any(c.Context) {
		return v
	}
	return c.values.Value(key)
}

// outcome is what a failed attempt on cur (nil if it could not be opened)
// tells beyond its error. Its trailer is read only now, once it has failed:
// grpc copies it for every reader. Called with s.mu held.
func (s *retryStream) outcome(ctx context.Context, cur grpc.ClientStream) outcome {
	o := outcome{
		sent:       sent(s.peer.Addr),
		idempotent: s.idempotent,
		timedOut:   !expired(ctx) && context.Cause(s.actx) == errAttemptTimeout,
		callerDone: expired(ctx),
	}
	if cur != nil && o.sent {
		o.trailer = cur.Trailer()
	}
	return o
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
	if !s.committed {
		n := sizeOf(m)
		if n < 0 || s.size+n > s.i.cfg.bufferLimit {
			// The messages can wait no longer. A deferred stream not
			// opened yet is opened by its loop's first attempt, if the
			// loop runs, once the breaker let it through; before the
			// loop, it opens now, if the breaker lets it.
			for s.attempts == 0 && s.loop == loopRunning {
				s.cond.Wait()
			}
			if s.attempts == 0 && s.loop == loopIdle {
				s.openEarly()
			}
			s.commit()
		} else {
			s.buf = append(s.buf, m)
			s.size += n
		}
	}
	cur, broken, committed := s.cur, s.broken, s.committed
	s.mu.Unlock()
	if cur == nil || broken {
		if committed {
			return io.EOF // the attempt is over; RecvMsg reports how
		}
		return nil
	}
	// Sent without s.mu: flow control holds a send until the application
	// reads, which a receive in another goroutine (grpc.ClientStream allows
	// one) must be free to do. The loop only replaces an attempt that has
	// failed, and replays m on its retry if m was kept.
	err := cur.SendMsg(m)
	if err != io.EOF {
		if err != nil {
			s.sendFailed(err)
		}
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.cur != cur:
		// The loop retried meanwhile: m was kept, and the retry sent it
		// again, whether the call has committed since or not.
		return nil
	case s.committed:
		return io.EOF
	}
	s.broken = true // the receive that follows learns why, and retries
	return nil
}

// sendFailed ends the call after grpc refused a send with err (a message
// too large, one it could not encode), which ended the attempt's stream
// (see grpc.ClientStream's SendMsg): the caller has the error, and need not
// receive. A loop not run yet will not run, and RecvMsg returns err: the
// breaker's leave the loop held is handed back, lest a probe's place stay
// taken until OpenFor runs out; the client's own failure says nothing of
// the service. A loop running reads the failure on the attempt, and
// reports it.
func (s *retryStream) sendFailed(err error) {
	s.mu.Lock()
	running := s.loop == loopRunning
	if s.loop == loopIdle {
		s.ticket.Release()
		s.ticket = retry.BreakerTicket{}
		s.commit()
		s.final, s.loop = err, loopDone
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	if !running {
		s.end()
	}
}

// CloseSend closes the sending side of the current attempt, and of every
// retry.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	// Without s.mu, as SendMsg: closing waits for the sends queued before.
	return cur.CloseSend()
}

// Header returns the header metadata of the attempt the call goes on with,
// and commits the call: the headers the application saw must be those of
// the attempt it talks to. As in grpc's own retry (and gRFC A6, for which
// headers commit a call and a Trailers-Only response does not), an attempt
// that ends without headers is retried first if its status allows: Header
// then returns the headers of the attempt that sent some. If the call ends
// without headers (it failed for good, or ended OK with Trailers-Only),
// Header returns nil and no error, and RecvMsg returns the call's error, or
// io.EOF, as grpc.ClientStream documents.
//
// The first Header or RecvMsg runs the call's retry loop. A Header called
// while a RecvMsg runs it reads the headers of the loop's current attempt,
// and of its retries, without waiting for a message.
func (s *retryStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	for {
		switch s.loop {
		case loopIdle:
			s.loop = loopRunning
			s.mu.Unlock()
			md, _ := s.run(nil, true)
			return md, nil // the error, if any, is RecvMsg's to return
		case loopDone:
			cur := s.cur
			s.mu.Unlock()
			if cur == nil {
				return nil, nil
			}
			return cur.Header()
		}
		// A RecvMsg runs the loop.
		n, cur := s.attempts, s.cur
		s.mu.Unlock()
		if cur != nil {
			if md, _ := cur.Header(); md != nil {
				s.mu.Lock()
				if s.attempts == n && s.loop == loopRunning {
					s.commit() // the loop's vet sees it: the attempt is not retried
					s.mu.Unlock()
					return md, nil
				}
				continue // the loop moved on first: headers of a retry, or its end
			}
		}
		// The attempt ended without headers: the loop retries it, or ends.
		s.mu.Lock()
		for s.attempts == n && s.loop == loopRunning {
			s.cond.Wait()
		}
	}
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

// Context returns the call's context: the caller's context, done when the
// call is over (RecvMsg returned an error or io.EOF, SendMsg one other than
// io.EOF, or the retry loop gave up) or when the caller's context is, and
// never because an attempt was retried. Its values are the current
// attempt's, so that peer.FromContext gives the peer of the attempt the
// call talks to. It is the same context on every call.
//
// grpc's own retry commits a call on Context, and returns the attempt's
// context. This interceptor does not: a single read of Context, which
// logging and tracing wrappers do for every stream, would end retrying
// (gRFC A6 leaves it to the implementation), and an attempt's context ends
// when the attempt is retried, which a caller watching Done would take for
// the end of a stream that lives on. Its deadline is the caller's: the
// attempt timeout (WithAttemptTimeout) bounds attempts, not the call.
func (s *retryStream) Context() context.Context { return &s.callCtx }

// callContext is a stream's Context: it is done when the call is (its
// embedded context, retryStream.call), and reads values from the current
// attempt's context.
type callContext struct {
	context.Context // retryStream.call
	s               *retryStream
}

// Value returns the current attempt's value for key: the peer it talks to,
// the caller's values. The key under which package context finds a
// cancellation (for context.Cause, AfterFunc and the contexts derived from
// this one) is answered by the call's context, whose cancellation this
// context has, not by the attempt's.
func (c *callContext) Value(key any) any {
	v := c.Context.Value(key)
	if v == any(c.Context) {
		// Only package context's key for its own cancelCtx yields the
		// context itself: cancellation and cause are the call's.
		return v
	}
	a := c.s.live.Load()
	if a == nil {
		return v
	}
	if a.cs != nil {
		// grpc's stream context holds the peer. With grpc's retry off
		// (grpc.WithDisableRetry), reading it commits only grpc's
		// transparent retry of the attempt, which this loop makes itself.
		return a.cs.Context().Value(key)
	}
	return a.ctx.Value(key)
}

// RecvMsg receives the next message. The first call runs the call's retry
// loop, unless Header ran it; later ones read the committed attempt.
func (s *retryStream) RecvMsg(m any) error {
	s.mu.Lock()
	for s.loop == loopRunning {
		// Header runs the loop (a RecvMsg at once with another is not
		// allowed): it is over once an attempt sends headers.
		s.cond.Wait()
	}
	if s.loop == loopDone {
		cur, final := s.cur, s.final
		s.mu.Unlock()
		if final != nil {
			return final
		}
		err := cur.RecvMsg(m)
		if err != nil || !s.desc.ServerStreams {
			s.end() // the stream is over: it failed or ended, or its one response came
		}
		return err
	}
	s.loop = loopRunning
	s.mu.Unlock()
	_, err := s.run(m, false)
	return err
}

// run runs the call's retry loop, as the first receive (into m) or, if
// header, as the first Header, and records how it ended. It returns the
// headers of the attempt that succeeded (if header), and the call's error,
// io.EOF if it ended OK without a message.
func (s *retryStream) run(m any, header bool) (metadata.MD, error) {
	r := &s.r
	r.m, r.header = m, header
	ropts := s.i.streamOpts.Get().(*[]retry.Option)
	opts := append((*ropts)[:0], retry.Scope(s.i.cfg.scopeOf(s.cc, s.method)))
	opts = append(opts, s.i.cfg.retryOpts...)
	opts = append(opts, retry.BeforeRetry(vetStream))
	if s.ticketed {
		opts = append(opts, retry.WithTicket(s.ticket))
	}
	_, err := retry.DoValue(s.call, s.i.cfg.strategy, r.attempt, opts...)
	clear(opts)
	*ropts = opts[:0]
	s.i.streamOpts.Put(ropts)
	r.m = nil
	if err == nil && r.eof {
		err = io.EOF
	} else if err != nil {
		err = statusOf(err)
	}
	s.mu.Lock()
	s.commit()
	s.final, s.loop = err, loopDone
	s.cond.Broadcast()
	s.mu.Unlock()
	if err != nil || (!header && !s.desc.ServerStreams) {
		s.end() // the call is over: it failed or ended, or its one response came
	}
	return r.md, err
}

// recvLoop is the first receive, or Header, of a stream, as retry.Do's
// operation.
type recvLoop struct {
	s      *retryStream
	m      any
	header bool // the loop waits for headers, not a message
	n      int
	eof    bool        // the stream ended with an OK status and no message
	md     metadata.MD // header: the headers of the attempt that sent some
	last   *attemptError
}

func (r *recvLoop) attempt(ctx context.Context) (struct{}, error) {
	s := r.s
	r.n++
	// The loop's first attempt may be the stream opened before the loop
	// ran, outside its context: the instrumentation learns of the call
	// here, from the loop, for every attempt.
	tellRPC(ctx, s.method, s.cc, s.opts)
	s.mu.Lock()
	if r.n == 1 && s.attempts == 0 {
		// Deferred: the breaker has let this first attempt through.
		s.open(ctx)
		if s.openErr == nil {
			s.replay()
		}
	} else if r.n > 1 {
		if s.committed && r.last != nil {
			// Committed during the wait before this retry (a Header read
			// the failed attempt's headers, or sends outgrew the buffer,
			// which is gone): a new attempt could not replay the call.
			// The failure stands, and vet ends the loop with
			// ErrCommitted.
			s.mu.Unlock()
			return struct{}{}, r.last
		}
		s.open(ctx)
		if s.openErr == nil {
			s.replay()
		}
	}
	cur, openErr := s.cur, s.openErr
	s.mu.Unlock()
	var err error
	switch {
	case cur == nil:
		err = openErr
	case r.header:
		err = r.headers(cur)
	default:
		err = cur.RecvMsg(r.m)
	}
	switch err {
	case nil:
		// The first response, or the headers: the attempt is bounded no
		// longer, whatever the loop does before it returns (the strategy,
		// the breaker, hooks, a Trace).
		s.mu.Lock()
		s.unbound()
		s.mu.Unlock()
		return struct{}{}, nil
	case io.EOF:
		r.eof = true
		return struct{}{}, nil
	}
	s.mu.Lock()
	r.last = s.i.cfg.classify(err, s.outcome(ctx, cur))
	s.mu.Unlock()
	r.last.loop = r
	return struct{}{}, r.last
}

// headers waits for an attempt's headers. An attempt that ends without
// them (Trailers-Only) has no message either: its status is what RecvMsg
// returns, as grpc.ClientStream's Header documents, and nothing is
// received into the placeholder.
func (r *recvLoop) headers(cur grpc.ClientStream) error {
	if md, _ := cur.Header(); md != nil {
		r.md = md
		return nil
	}
	if err := cur.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	// gRPC sends headers before any message: a stream that breaks that
	// fails rather than lose the message.
	return status.Error(codes.Internal, "grpcretry: a message without headers")
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

// vetStream is the BeforeRetry of every stream's loop: the failure it is
// given is the *attemptError the attempt returned, which names its loop
// (retry.Do passes a failure on as it is unless it classifies as nothing,
// which these never do). A hook of each stream's own would cost each stream
// an allocation.
func vetStream(ctx context.Context, _ int, err error) error {
	if e, _ := err.(*attemptError); e != nil && e.loop != nil {
		return e.loop.vet(ctx)
	}
	if expired(ctx) {
		return context.DeadlineExceeded // as vetHints does
	}
	return nil
}

// vet runs before the strategy is asked for a retry.
func (r *recvLoop) vet(ctx context.Context) error {
	r.s.mu.Lock()
	committed := r.s.committed
	r.s.mu.Unlock()
	if committed && r.last != nil && r.last.info.Retryable() {
		return ErrCommitted
	}
	return r.s.i.cfg.vetHints(ctx, r.last, retry.CallerRetries(ctx))
}
