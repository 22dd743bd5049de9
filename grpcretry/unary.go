package grpcretry

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// UnaryClientInterceptor returns an interceptor that retries failed unary
// calls through a retry.Strategy, and hedges them if WithHedging is given.
// Install it with grpc.WithUnaryInterceptor, and dial with
// grpc.WithDisableRetry() so that grpc's own retry (configured by a service
// config) does not multiply the attempts. The attempts are made by
// retry.Do, the loop every integration of this module shares. See the package
// documentation for what is retried.
//
// A call that fails for good returns a *retry.Error that wraps the last
// attempt's status error: status.Code(err) and status.FromError(err) give its
// code, and errors.Is(err, retry.ErrMaxAttempts) and the like the reason. A
// call given up before its first attempt returns an error that wraps the
// *retry.Error (errors.As finds it) with the status grpc gives such a call:
// UNAVAILABLE if the circuit breaker refused it (WithBreaker), CANCELLED or
// DEADLINE_EXCEEDED if its context was done.
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	i := newInterceptor(opts)
	return i.unary
}

// interceptor is the state both interceptors share.
type interceptor struct {
	cfg        *config
	calls      sync.Pool // of *unaryCall, each with its retry options bound to it
	streamOpts sync.Pool // of *[]retry.Option, for a stream's retry loop
	hedge      *hedger
}

func newInterceptor(opts []Option) *interceptor {
	i := &interceptor{cfg: newConfig(opts)}
	i.calls.New = func() any { return i.newUnaryCall() }
	i.streamOpts.New = func() any { return new([]retry.Option) }
	if i.cfg.hedging != nil {
		i.hedge = newHedger(i.cfg)
	}
	return i
}

// unaryCall is one unary call's way through its attempts: the operation
// retry.Do calls for each attempt and the check it makes before a retry.
type unaryCall struct {
	i          *interceptor
	ctx        context.Context // the caller's
	method     string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	idempotent bool
	attempts   int
	last       *attemptError
	timeFirst  bool // record the first attempt's latency for hedging

	// An attempt's trailer (grpc-retry-pushback-ms, and whether it was
	// Trailers-Only) and peer (whether it left the client) are all a
	// failure's classification needs: not its headers, whose copy would
	// cost every successful call (see outcome.answered). Each is read
	// where the caller's own grpc.Trailer or grpc.Peer option puts it, if
	// it gave one, so that grpc copies it once.
	trailer  metadata.MD
	peer     peer.Peer
	trailerp *metadata.MD       // &trailer, or the caller's
	peerp    *peer.Peer         // &peer, or the caller's
	capture  [2]grpc.CallOption // grpc.Trailer(&trailer), grpc.Peer(&peer)
	callOpts []grpc.CallOption  // the caller's options, then what capture adds

	op   func(context.Context) (struct{}, error) // attempt, bound once: DoValue takes it without a wrapper
	opts []retry.Option                          // scope, attempt timeout, the caller's, BeforeRetry
}

func (i *interceptor) newUnaryCall() *unaryCall {
	c := &unaryCall{i: i}
	c.capture = [2]grpc.CallOption{grpc.Trailer(&c.trailer), grpc.Peer(&c.peer)}
	c.op = func(ctx context.Context) (struct{}, error) { return struct{}{}, c.attempt(ctx) }
	c.opts = append(c.opts, retry.Option{})
	if d := i.cfg.attemptTimeout; d > 0 {
		c.opts = append(c.opts, retry.AttemptTimeout(d))
	}
	c.opts = append(c.opts, i.cfg.retryOpts...)
	c.opts = append(c.opts, retry.BeforeRetry(c.vet))
	return c
}

func (i *interceptor) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	idem, noRetry, opts := callOptions(opts)
	if noRetry {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	idem = idem || i.cfg.isIdempotent(method)
	if i.hedge != nil && idem {
		if err, ok := i.hedge.call(ctx, method, req, reply, cc, invoker, opts); ok {
			return statusOf(err)
		}
	}
	c := i.calls.Get().(*unaryCall)
	c.ctx, c.method, c.req, c.reply, c.cc, c.invoker, c.idempotent = ctx, method, req, reply, cc, invoker, idem
	c.timeFirst = i.hedge != nil && idem && i.hedge.delay <= 0
	c.callOpts = append(c.callOpts[:0], opts...)
	c.trailerp, c.peerp = nil, nil
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.TrailerCallOption:
			if o.TrailerAddr != nil {
				c.trailerp = o.TrailerAddr
			}
		case grpc.PeerCallOption:
			if o.PeerAddr != nil {
				c.peerp = o.PeerAddr
			}
		}
	}
	if c.trailerp == nil {
		c.trailerp = &c.trailer
		c.callOpts = append(c.callOpts, c.capture[0])
	}
	if c.peerp == nil {
		c.peerp = &c.peer
		c.callOpts = append(c.callOpts, c.capture[1])
	}
	c.opts[0] = retry.Scope(i.cfg.scopeOf(cc, method))
	_, err := retry.DoValue(ctx, i.cfg.strategy, c.op, c.opts...)
	c.reset()
	i.calls.Put(c)
	return statusOf(err)
}

// reset lets go of the call c served.
func (c *unaryCall) reset() {
	clear(c.callOpts)
	c.ctx, c.req, c.reply, c.cc, c.invoker, c.last = nil, nil, nil, nil, nil, nil
	c.method, c.attempts, c.trailer, c.peer, c.timeFirst = "", 0, nil, peer.Peer{}, false
	c.trailerp, c.peerp = nil, nil
}

// attempt makes one attempt and classifies its failure.
func (c *unaryCall) attempt(ctx context.Context) error {
	c.attempts++
	actx := ctx
	if c.attempts > 1 {
		actx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(c.attempts-1))
	}
	// grpc writes the peer only for an attempt that left the client: what
	// an earlier attempt left there must not count for this one. (So the
	// caller's own grpc.Peer ends up with the last attempt's, if it left.)
	*c.peerp = peer.Peer{}
	tellRPC(ctx, c.method, c.cc, c.callOpts)
	var start time.Time
	if c.timeFirst && c.attempts == 1 {
		start = time.Now()
	}
	err := c.invoker(actx, c.method, c.req, c.reply, c.cc, c.callOpts...)
	if err == nil {
		if !start.IsZero() {
			c.i.hedge.lat.add(time.Since(start)) // until hedging knows its delay
		}
		return nil
	}
	trailer := *c.trailerp
	sent := sent(c.peerp.Addr)
	if !sent {
		trailer = nil // grpc wrote no trailer for this attempt: what is there is an earlier one's
	}
	c.last = c.i.cfg.classify(err, outcome{
		trailer:    trailer,
		sent:       sent,
		idempotent: c.idempotent,
		timedOut:   attemptTimedOut(c.ctx, ctx),
		callerDone: expired(c.ctx),
	})
	return c.last
}

// vet runs before the strategy is asked for a retry.
func (c *unaryCall) vet(ctx context.Context, _ int, _ error) error {
	return c.i.cfg.vetHints(ctx, c.last, retry.CallerRetries(ctx))
}
