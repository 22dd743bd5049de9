package grpcretry

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/callinfo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Hedging configures hedged unary calls, after gRPC A6's hedgingPolicy: the
// first attempt goes out, and if no answer has come after a hedging delay,
// another copy of the call, and so on up to MaxAttempts copies in flight; the
// first success wins and the others are cancelled. A failure retryable by the
// classification (UNAVAILABLE, say) sends the next hedge at once, or after
// the server's pushback; any other failure (and a throttling error) ends the
// call with it, cancelling the rest. Only idempotent calls are hedged
// (WithIdempotentMethods, Idempotent): every copy may run.
//
// Hedges are extra load, and are paid for. Each takes Cost tokens from Quota
// and, if set, one retry from Budget; a hedge that wins gets its tokens back.
// When the quota cannot pay, the budget refuses, or the strategy's send-rate
// limiter is limiting (retry.Adaptive under throttling), no hedge is sent:
// hedging switches itself off while the service is struggling.
//
// A hedged call is one attempt of the call's retry loop (retry.Do): the
// strategy records its success or failure, and the hedges are its retries,
// so it is not retried after them. It is the one place in this module that
// runs attempts at once, because a hedge exists only to overlap the attempt
// before it, which a sequential loop cannot do.
type Hedging struct {
	// MaxAttempts is the most copies of a call, the first included.
	// 0 = 2; at most 5, as in gRPC A6.
	MaxAttempts int
	// Delay is the wait before each hedge. 0 = the Quantile of the latencies
	// the interceptor observed.
	Delay time.Duration
	// Quantile, used when Delay is 0, is the quantile of recent first-attempt
	// latencies after which a hedge goes out. 0 = 0.95. Until 64 latencies
	// have been observed, no hedge is sent.
	Quantile float64
	// Quota pays for hedges: the strategy's quota, where it has one
	// (StandardOptions.Bucket). nil = a retry.TokenBucket of 500 tokens
	// owned by the interceptor, to which every successful call adds one.
	Quota retry.Quota
	// Cost is the tokens a hedge takes. 0 = retry.DefaultRetryCost (14):
	// with an owned quota, hedges settle at about one call in 14.
	Cost int
	// Budget, if set, must allow every hedge as a retry (TryWithdraw). Give
	// the Budget of the strategy's options, which counts the calls.
	Budget *retry.Budget
}

// Hedging limits.
const (
	maxHedges      = 5 // gRPC A6 caps maxAttempts at 5
	minSamples     = 64
	latencySamples = 512
	ownedQuota     = retry.DefaultBucketCapacity
)

// hedger sends hedged calls.
type hedger struct {
	cfg      *config
	max      int
	delay    time.Duration
	quantile float64
	quota    retry.Quota
	owned    bool
	cost     int
	budget   *retry.Budget
	lat      latencies
}

func newHedger(cfg *config) *hedger {
	h := cfg.hedging
	hd := &hedger{cfg: cfg, max: h.MaxAttempts, delay: h.Delay, quantile: h.Quantile, quota: h.Quota, cost: h.Cost, budget: h.Budget}
	if hd.max <= 0 {
		hd.max = 2
	}
	hd.max = min(hd.max, maxHedges)
	if hd.quantile <= 0 || hd.quantile >= 1 {
		hd.quantile = 0.95
	}
	if hd.quota == nil {
		hd.quota, hd.owned = retry.NewTokenBucket(ownedQuota), true
	}
	if hd.cost <= 0 {
		hd.cost = retry.DefaultRetryCost
	}
	return hd
}

// limiter is what retry.Adaptive tells of its send-rate limiter.
type limiter interface {
	Rate(scope string) (float64, bool)
}

// hedgeDelay returns the wait before a hedge, or false if no hedge may go.
func (h *hedger) hedgeDelay() (time.Duration, bool) {
	if h.delay > 0 {
		return h.delay, true
	}
	return h.lat.quantile(h.quantile)
}

// allow reports whether a hedge may be sent now, and charges it.
func (h *hedger) allow(scope string) bool {
	if l, ok := h.cfg.strategy.(limiter); ok {
		if _, limiting := l.Rate(scope); limiting {
			return false
		}
	}
	if !h.quota.Take(h.cost) {
		return false
	}
	if h.budget != nil && !h.budget.TryWithdraw() {
		h.quota.Refund(h.cost)
		return false
	}
	return true
}

// call sends a hedged call through the call's retry loop. ok is false when
// the call cannot be hedged (its reply is not a protocol buffer, or no delay
// is known yet): the caller then makes it the ordinary way.
func (h *hedger) call(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (error, bool) {
	pm, isProto := reply.(proto.Message)
	delay, known := h.hedgeDelay()
	if !isProto || !known {
		return nil, false
	}
	g := &hedgeGroup{h: h, method: method, req: req, reply: pm, cc: cc, invoker: invoker, opts: opts, delay: delay}
	g.scope = h.cfg.scopeOf(cc, method)
	g.callerRetries = retry.CallerRetries(ctx)
	ropts := make([]retry.Option, 0, len(h.cfg.retryOpts)+3)
	// Unmarked: the loop never retries (its hedges are its retries), so
	// the copies are not told it will.
	ropts = append(ropts, retry.Scope(g.scope), retry.Unmarked())
	ropts = append(ropts, h.cfg.retryOpts...)
	ropts = append(ropts, retry.BeforeRetry(func(ctx context.Context, _ int, _ error) error {
		switch {
		case expired(ctx):
			return context.DeadlineExceeded
		case g.leftToCaller:
			return retry.ErrOuterLoop // the caller retries the answered failure
		}
		return errHedged
	}))
	return retry.Do(ctx, h.cfg.strategy, g.run, ropts...), true
}

// hedgeGroup is one hedged call.
type hedgeGroup struct {
	h          *hedger
	method     string
	req        any
	reply      proto.Message
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption
	delay      time.Duration
	scope      string
	sink       callinfo.Sink // the instrumentation's, told of each hedge; nil without one
	sent, done int
	// callerRetries is read from the call's context, once: the caller
	// retries, so an answered failure is left to it (leftToCaller) rather
	// than hedged again.
	callerRetries, leftToCaller bool
}

// hedgeResult is one copy's outcome.
type hedgeResult struct {
	n        int
	reply    proto.Message
	err      error
	trailer  metadata.MD
	header   metadata.MD
	peer     peer.Peer
	timedOut bool
	took     time.Duration
}

// run sends the copies and waits for the first success, or for the failures
// that end the call. It returns only when every copy it sent has returned.
func (g *hedgeGroup) run(ctx context.Context) error {
	h := g.h
	g.sink = tellRPC(ctx, g.method, g.cc, g.opts)
	gctx, cancel := context.WithCancel(ctx)
	results := make(chan hedgeResult, h.max)
	start := time.Now()
	g.launch(gctx, results)
	timer := time.NewTimer(g.delay)
	defer timer.Stop()
	stopped := false // no more hedges: a pushback said so, or none may be paid for
	var last *attemptError
	var lastCopy hedgeResult // the copy whose failure is last
	var firstTook time.Duration
	finish := func() {
		cancel()
		for g.done < g.sent {
			r := <-results
			g.done++
			if r.n == 1 {
				firstTook = r.took
			}
		}
		if firstTook == 0 {
			firstTook = time.Since(start)
		}
		h.lat.add(firstTook) // the first copy's latency, or a lower bound if it lost
	}
	for {
		select {
		case r := <-results:
			g.done++
			if r.n == 1 {
				firstTook = r.took
			}
			if r.err == nil {
				finish()
				if r.n > 1 {
					h.quota.Refund(h.cost) // a hedge that won earned its cost
				}
				if h.owned {
					h.quota.Refund(1)
				}
				g.deliver(r)
				return nil
			}
			e := h.cfg.classify(r.err, outcome{trailer: r.trailer, sent: sent(r.peer.Addr), idempotent: true, timedOut: r.timedOut, callerDone: expired(ctx)})
			last, lastCopy = e, r
			if !e.info.Retryable() || e.info.Throttle {
				finish()
				g.deliverMetadata(r)
				return e // fatal: A6 ends the call with it
			}
			if err := h.cfg.vetHints(ctx, e, g.callerRetries); err != nil {
				stopped = true
				g.leftToCaller = g.leftToCaller || err == retry.ErrOuterLoop
			} else if e.info.RetryAfter > 0 {
				timer.Reset(e.info.RetryAfter) // the server's pushback paces the next hedge
			} else if !stopped && g.sent < h.max {
				g.hedge(gctx, results, &stopped)
				timer.Reset(g.delay)
			}
			if g.done == g.sent && (stopped || g.sent >= h.max) {
				finish()
				g.deliverMetadata(lastCopy)
				return last
			}
		case <-timer.C:
			if !stopped && g.sent < h.max {
				g.hedge(gctx, results, &stopped)
				timer.Reset(g.delay)
			}
			if g.done == g.sent && last != nil && (stopped || g.sent >= h.max) {
				finish()
				g.deliverMetadata(lastCopy)
				return last
			}
		case <-ctx.Done():
			finish()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// hedge sends one more copy if it may be paid for.
func (g *hedgeGroup) hedge(ctx context.Context, results chan<- hedgeResult, stopped *bool) {
	if !g.h.allow(g.scope) {
		*stopped = true
		return
	}
	g.launch(ctx, results)
}

// launch sends copy number g.sent+1 on its own goroutine, with its own reply
// and metadata so that copies never share memory.
func (g *hedgeGroup) launch(ctx context.Context, results chan<- hedgeResult) {
	g.sent++
	n := g.sent
	if n > 1 && g.sink != nil {
		callinfo.TellHedge(g.sink)
	}
	r := hedgeResult{n: n, reply: g.reply.ProtoReflect().New().Interface()}
	opts := make([]grpc.CallOption, 0, len(g.opts)+3)
	header := false // the caller wants headers
	for _, o := range g.opts {
		switch o.(type) {
		case grpc.HeaderCallOption:
			header = true
			continue // filled from one copy (see deliverMetadata); copies must not write them at once
		case grpc.TrailerCallOption, grpc.PeerCallOption:
			continue
		}
		opts = append(opts, o)
	}
	opts = append(opts, grpc.Trailer(&r.trailer), grpc.Peer(&r.peer))
	if header {
		opts = append(opts, grpc.Header(&r.header))
	}
	go func() {
		actx := ctx
		if n > 1 {
			actx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(n-1))
		}
		if d := g.h.cfg.attemptTimeout; d > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(actx, d)
			defer cancel()
		}
		start := time.Now()
		r.err = g.invoker(actx, g.method, g.req, r.reply, g.cc, opts...)
		r.took = time.Since(start)
		r.timedOut = r.err != nil && attemptTimedOut(ctx, actx)
		results <- r
	}()
}

// deliver gives the caller the winner's reply and metadata.
func (g *hedgeGroup) deliver(r hedgeResult) {
	proto.Reset(g.reply)
	proto.Merge(g.reply, r.reply)
	g.deliverMetadata(r)
}

// deliverMetadata fills the caller's grpc.Header, grpc.Trailer and grpc.Peer
// options with those of copy r: the winner's, or the one whose failure the
// call returns, as grpc fills them on failure too.
func (g *hedgeGroup) deliverMetadata(r hedgeResult) {
	for _, o := range g.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = r.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = r.trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = r.peer
		}
	}
}

// latencies keeps recent first-attempt latencies and their quantile.
type latencies struct {
	mu      sync.Mutex
	ring    [latencySamples]time.Duration
	n       int // samples recorded, up to len(ring)
	next    int
	since   int // samples since the quantile was computed
	sorted  []time.Duration
	cachedQ float64
	cached  time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ring[l.next] = d
	l.next = (l.next + 1) % len(l.ring)
	l.n = min(l.n+1, len(l.ring))
	l.since++
	l.mu.Unlock()
}

// quantile returns the q-quantile of the recent latencies, recomputed every
// 64 samples, or false while there are too few.
func (l *latencies) quantile(q float64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n < minSamples {
		return 0, false
	}
	if l.cached == 0 || l.since >= minSamples || l.cachedQ != q {
		l.sorted = append(l.sorted[:0], l.ring[:l.n]...)
		slices.Sort(l.sorted)
		l.cached = max(l.sorted[min(int(q*float64(l.n)), l.n-1)], time.Microsecond)
		l.cachedQ, l.since = q, 0
	}
	return l.cached, true
}
