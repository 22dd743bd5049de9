package awsretry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/retrykit/retry"
)

// Options configure a Retryer. The zero value is ready: each zero field
// takes its default.
type Options struct {
	// Strategy decides every retry. nil = a new retry.NewAdaptive with
	// its defaults, owned by this Retryer (the default of every
	// integration of retrykit). Share one strategy between Retryers to
	// share what it learns of a service's health, or give one backed by
	// redisquota to share it with a fleet.
	Strategy retry.Strategy
	// Breaker, if set, is consulted before every attempt, in the call's
	// scope, and told how each went by this package's classification: an
	// open circuit fails the SDK call at once, with an error that wraps
	// retry.ErrCircuitOpen, and sends nothing. nil = the last
	// retry.WithBreaker among RetryOptions, if any, else none.
	Breaker *retry.Breaker
	// Scope names the quota and circuit a call draws on. nil = the last
	// retry.Scope among RetryOptions, if any, else the call's service and
	// region ("DynamoDB us-east-1"), so that one Retryer shared by several
	// clients keeps their health apart.
	Scope func(ctx context.Context) string
	// RetryOptions are options of retry.Do that apply to the SDK's
	// attempts: retry.Scope and retry.WithBreaker (see Scope and Breaker),
	// and the hooks (OnAttemptFailed, BeforeRetry, OnRetry, OnGiveUp, Log,
	// and every retry.WithTrace, such as otelretry's), which see each SDK
	// attempt as they would an attempt of retry.Do (see the package
	// documentation for what differs). Other options (AttemptTimeout,
	// MaxElapsed, LongPoll) are retry.Do's own: use the call's context,
	// the client's options, and Options.LongPoll.
	RetryOptions []retry.Option
	// RetryableCodes are error codes of a service's own failures, beyond
	// those Classify knows, that are retried as transient (MaybeSafe, a
	// server fault): the place for what sdkretry.AddWithErrorCodes would
	// add to the SDK's retryer.
	RetryableCodes []string
	// Independent makes the Retryer retry as if alone even when the
	// caller retries the call itself (retry.CallerRetries). By default it
	// then makes one attempt for an answered failure and leaves it to the
	// caller, keeping its retries for failures that came with no answer (a
	// refused or reset connection, a timeout): retries at two layers
	// multiply.
	Independent bool
	// LongPoll reports whether the call whose attempt has ctx polls (a
	// queue receive, which a consumer calls again as soon as it returns),
	// as retry.LongPoll says of a call of retry.Do: when the strategy's
	// quota refuses such a call a retry, the Retryer waits the backoff the
	// retry would have had before the SDK returns the failure; when the
	// breaker refuses an attempt, until it may let one through (see
	// retry.Breaker's RefusedFor); and when a wait would end past the
	// context's deadline, until the deadline; never past it, so that the
	// consumer cannot spin against a failing service. nil = LongPolling,
	// the operations AWS's SDKs treat as long polling.
	LongPoll func(ctx context.Context) bool
}

// Retryer is an aws.RetryerV2 whose decisions are those of a
// retry.Strategy, a retry.Breaker and this package's classification: the
// SDK's own loop makes the attempts and waits; the Retryer only decides.
// Give each client its own, as the SDK asks:
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer {
//		return awsretry.New(awsretry.Options{})
//	}))
//
// A Retryer is safe for concurrent use, by any number of calls and clients.
type Retryer struct {
	strategy    retry.Strategy
	breaker     *retry.Breaker
	scope       func(context.Context) string
	fixedScope  string
	hasScope    bool
	extra       map[string]bool
	independent bool
	longPoll    func(context.Context) bool
	trace       *retry.Trace // RetryOptions' hooks, folded (retry.TraceOf); nil if none
	vet         func(ctx context.Context, attempt int, err error) error

	mu     sync.Mutex
	parked map[error]*call // calls whose last attempt failed with the key, awaiting GetRetryToken
	queue  []parking       // the parkings, oldest first from head (see park)
	head   int
	oldest atomic.Int64            // when the queue's first was parked (now); 0 if none
	epoch  time.Time               // now's origin
	delays map[error]time.Duration // waits granted after a failure, awaiting RetryDelay

	scopes sync.Map // scopeKey -> string: the default scopes, built once each
	calls  sync.Pool
}

var _ aws.RetryerV2 = (*Retryer)(nil)

// New returns a Retryer configured by o.
func New(o Options) *Retryer {
	r := &Retryer{
		strategy:    o.Strategy,
		breaker:     o.Breaker,
		scope:       o.Scope,
		independent: o.Independent,
		longPoll:    o.LongPoll,
		epoch:       time.Now(),
		parked:      make(map[error]*call),
		delays:      make(map[error]time.Duration),
	}
	if r.strategy == nil {
		r.strategy = retry.NewAdaptive(retry.AdaptiveOptions{})
	}
	if r.breaker == nil {
		r.breaker = retry.BreakerOf(o.RetryOptions...)
	}
	r.fixedScope, r.hasScope = retry.ScopeOf(o.RetryOptions...)
	r.trace = retry.TraceOf(o.RetryOptions...)
	r.vet = retry.BeforeRetryOf(o.RetryOptions...)
	if len(o.RetryableCodes) > 0 {
		r.extra = make(map[string]bool, len(o.RetryableCodes))
		for _, c := range o.RetryableCodes {
			r.extra[c] = true
		}
	}
	r.calls.New = func() any {
		c := &call{r: r}
		c.done = c.attemptDone // bound once: a pooled call hands it out without allocating
		return c
	}
	return r
}

// call is one SDK call's retry state, from its first attempt to its end.
type call struct {
	r        *Retryer
	ctx      context.Context // the latest attempt's, for the breaker and the caller's mark
	scope    string
	tok      retry.Token
	acquired error // why the strategy gave no initial token; the call then makes one attempt
	ticket   retry.BreakerTicket
	attempts int
	done     func(error) error

	// For the hooks, if any: the call's context (the first attempt's, as
	// the Trace's CallStart made it), the attempt's (AttemptStart's), and
	// the waits granted so far.
	hctx   context.Context
	actx   context.Context
	waited time.Duration

	// For a granted retry: its failure, and the stop of the watch that
	// ends the call if the caller gives up before the retry is made (the
	// SDK then tells the retryer nothing more).
	last *classified
	wait time.Duration
	stop func() bool

	// For a parked call (see park): the failure it is parked with, and
	// the count of its parkings, kept when it goes back to the pool.
	failed *classified
	gen    uint64
}

// unmade ends c before an attempt it was granted: the attempt will not be
// made, so its token and breaker ticket are handed back.
func (c *call) unmade() {
	c.r.release(c.tok)
	c.ticket.Release()
	c.free()
}

// free returns c to the pool.
func (c *call) free() {
	r := c.r
	*c = call{r: r, done: c.done, gen: c.gen}
	r.calls.Put(c)
}

// IsErrorRetryable reports whether err may be retried. For an attempt of a
// call this Retryer follows it reports true, so that GetRetryToken decides,
// and the reason it refuses reaches the caller wrapped in the call's error;
// for any other error, whether Classify calls it retryable.
func (r *Retryer) IsErrorRetryable(err error) bool {
	if err == nil {
		return false
	}
	r.mu.Lock()
	_, _, ok := find(r.parked, err)
	r.mu.Unlock()
	return ok || classify(err, r.extra).Retryable()
}

// MaxAttempts returns 0: the strategy bounds the attempts (three with the
// defaults), and refuses a retry beyond them with retry.ErrMaxAttempts.
// Set them in the strategy's options, not with the client's
// RetryMaxAttempts, whose wrapper ends a call without asking the Retryer:
// the Retryer learns of that end only a second later (see the package
// documentation).
func (r *Retryer) MaxAttempts() int { return 0 }

// RetryDelay returns the wait that GetRetryToken granted after err.
func (r *Retryer) RetryDelay(_ int, err error) (time.Duration, error) {
	r.mu.Lock()
	key, d, ok := find(r.delays, err)
	if ok {
		delete(r.delays, key)
	}
	r.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("awsretry: no retry was granted after this error: %w", retry.ErrInvalidToken)
	}
	return d, nil
}

// GetInitialToken is the SDK's deprecated form of GetAttemptToken, which
// the SDK calls instead: it does nothing.
func (r *Retryer) GetInitialToken() func(error) error { return nopRelease }

func nopRelease(error) error { return nil }

// GetAttemptToken is called by the SDK before every attempt. Before a
// call's first attempt it consults the breaker (an open circuit fails the
// call: nothing is sent) and takes the strategy's initial token, waiting
// the send-rate limiter's delay if retry.Adaptive imposes one after
// throttling, the one wait a Retryer makes, where the SDK's own adaptive
// mode makes it too. A retry's leave was taken when it was granted.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if !firstAttempt(ctx) {
		return nopRelease, nil
	}
	r.sweepUnasked()
	scope := r.scopeOf(ctx)
	hctx := ctx
	if r.trace != nil && r.trace.CallStart != nil {
		if cctx := r.trace.CallStart(ctx, scope); cctx != nil {
			hctx = cctx
		}
	}
	var ticket retry.BreakerTicket
	if b := r.breaker; b != nil {
		refused := b.Delay(scope) > 0
		if !refused {
			t, err := b.Allow(scope)
			refused, ticket = err != nil, t
		}
		if refused {
			if r.polls(ctx) {
				pollWait(ctx, b.RefusedFor(scope))
			}
			e := &retry.Error{Reason: retry.ErrCircuitOpen}
			r.ended(hctx, scope, 0, 0, e)
			return nil, e
		}
	}
	c := r.calls.Get().(*call)
	c.ctx, c.scope, c.ticket, c.hctx = ctx, scope, ticket, hctx
	c.tok, c.acquired = r.strategy.AcquireInitialToken(scope)
	if c.acquired == nil {
		if d := c.tok.Delay(); d > 0 {
			if err := retry.Sleep(ctx, d); err != nil {
				if errors.Is(err, retry.ErrDeadline) && r.polls(ctx) {
					pollWait(ctx, d) // until the deadline: a poller must not spin
				}
				c.unmade()
				e := &retry.Error{Reason: err}
				r.ended(hctx, scope, 0, 0, e)
				return nil, e
			}
		}
	}
	c.attemptStart(1)
	return c.done, nil
}

// attemptStart tells the Trace that attempt n of c is about to be made. If
// the hook panics, the attempt will not be made: c ends, holding nothing.
func (c *call) attemptStart(n int) {
	c.actx = c.hctx
	t := c.r.trace
	if t == nil || t.AttemptStart == nil {
		return
	}
	returned := false
	defer func() {
		if !returned {
			c.unmade()
		}
	}()
	if actx := t.AttemptStart(c.hctx, c.scope, n); actx != nil {
		c.actx = actx
	}
	returned = true
}

// attemptDone is the release the SDK calls after each attempt of c with
// its error: the first attempt's from GetAttemptToken, a retry's from
// GetRetryToken.
func (c *call) attemptDone(err error) error {
	if c.stop != nil && !c.stop() {
		return nil // the caller gave up during the wait, which ended c (see abandoned)
	}
	r := c.r
	c.attempts++
	ticket := c.ticket
	c.ticket = retry.BreakerTicket{}
	if err == nil {
		ticket.Done(c.ctx, nil)
		if c.acquired == nil {
			_ = r.strategy.RecordSuccess(c.tok)
		}
		actx, hctx, scope, n, waited := c.actx, c.hctx, c.scope, c.attempts, c.waited
		c.free()
		if t := r.trace; t != nil {
			if t.AttemptDone != nil {
				t.AttemptDone(actx, scope, n, nil)
			}
			if t.Done != nil {
				t.Done(hctx, scope, n, waited, nil)
			}
		}
		return nil
	}
	ce := &classified{err, classify(err, r.extra)}
	ticket.Done(c.ctx, ce)
	if t := r.trace; t != nil && t.AttemptDone != nil {
		c.attemptFailed(t, ce)
	}
	if !comparable(err) {
		// No key to find the call by: it ends here, and the strategy hears
		// of the failure as of one it may not retry.
		r.refuse(c, ce)
		_ = c.giveUp(ce, errUnkeyed)
		return nil
	}
	r.park(c, ce)
	return nil
}

// attemptFailed tells t that c's attempt failed with ce. If the hook
// panics, c ends, holding nothing, the strategy told of the failure as of
// one it will not retry.
func (c *call) attemptFailed(t *retry.Trace, ce *classified) {
	returned := false
	defer func() {
		if !returned {
			c.r.refuse(c, ce)
			c.free()
		}
	}()
	t.AttemptDone(c.actx, c.scope, c.attempts, ce.err)
	returned = true
}

// errUnkeyed is the reason a call ends whose attempt failed with an error
// the Retryer cannot find again when the SDK asks for a retry.
var errUnkeyed = fmt.Errorf("%w: the attempt's error cannot be a map key (its type is not comparable)", retry.ErrNotRetryable)

// GetRetryToken decides whether the attempt that failed with err is
// retried, through the strategy and the breaker. If not, it returns a
// *retry.Error whose Reason says why, which the SDK joins to err in the
// call's error. If so, it returns the release the SDK calls after the
// retry, and RetryDelay returns the retry's wait.
func (r *Retryer) GetRetryToken(ctx context.Context, err error) (func(error) error, error) {
	r.mu.Lock()
	key, c, ok := find(r.parked, err)
	if ok {
		delete(r.parked, key)
	}
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("awsretry: no attempt of this Retryer failed with this error: %w", retry.ErrInvalidToken)
	}
	c.ctx = ctx
	ce := &classified{err, classify(err, r.extra)}
	info := ce.info
	switch {
	case c.acquired != nil:
		return nil, c.giveUp(ce, c.acquired)
	case ctx.Err() != nil:
		// The caller gave up: the token is abandoned, not refreshed,
		// which could charge the quota for a retry that will not happen.
		return nil, c.giveUp(ce, ctx.Err())
	}
	if r.vet != nil {
		if reason := c.vetted(ce); reason != nil {
			// Refused before the quota is asked: it costs nothing, and the
			// strategy still hears of the failure.
			r.refuse(c, ce)
			return nil, c.giveUp(ce, reason)
		}
	}
	switch {
	case answered(err) && info.Retryable() && !r.independent && retry.CallerRetries(ctx):
		// One layer: the caller retries this answer itself. The strategy
		// still hears of the failure, marked so that it grants nothing.
		r.refuse(c, ce)
		e := c.giveUp(ce, retry.ErrOuterLoop)
		leave(ctx, e)
		return nil, e
	case info.Fault == retry.FaultClient && !info.Throttle && !info.Timeout && c.tok.RetryCount() > 0 && answered(err):
		// A retry the service answered, with a fault of the caller's: the
		// service is at work, so the retry's cost goes back to the quota
		// as a success's does (aws/aws-sdk-go-v2#3186).
		_ = r.strategy.RecordSuccess(c.tok)
		return nil, c.giveUp(ce, errClientFault)
	}
	next, refused := r.strategy.RefreshToken(c.tok, ce)
	if refused != nil {
		var qe *retry.QuotaError
		if errors.As(refused, &qe) && qe.Delay > 0 && r.polls(ctx) {
			pollWait(ctx, qe.Delay)
		}
		return nil, c.giveUp(ce, refused)
	}
	delay := next.Delay()
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= delay {
		r.release(next)
		if r.polls(ctx) {
			// The retry does not fit before the deadline: the poller
			// waits until it, rather than polling again at once.
			pollWait(ctx, delay)
		}
		return nil, c.giveUp(ce, retry.ErrDeadline)
	}
	if b := r.breaker; b != nil {
		// The SDK gives a retryer no place between the wait and the
		// attempt where a refusal could hand the token back, so the
		// retry's leave is taken now, before the wait.
		t, err := retry.BreakerTicket{}, error(nil)
		if b.Delay(c.scope) > delay {
			err = retry.ErrCircuitOpen
		} else {
			t, err = b.Allow(c.scope)
		}
		if err != nil {
			r.release(next)
			if r.polls(ctx) {
				pollWait(ctx, b.RefusedFor(c.scope))
			}
			return nil, c.giveUp(ce, retry.ErrCircuitOpen)
		}
		c.ticket = t
	}
	c.tok = next
	if t := r.trace; t != nil {
		c.retrying(t, ce, delay)
	}
	c.waited += delay
	r.mu.Lock()
	r.delays[err] = delay
	r.mu.Unlock()
	if ctx.Done() != nil {
		c.last, c.wait = ce, delay
		c.stop = context.AfterFunc(ctx, c.abandoned) // last: it may run at once
	}
	return c.done, nil
}

// abandoned ends c when the caller gives up between the grant of a retry
// and the retry's end: in the SDK's wait, the SDK makes no attempt and
// tells the retryer nothing more, so the retry's token and breaker ticket
// are handed back here, and the hooks told that the attempt they saw start
// ended with the caller's error, and the call with it, its waited without
// the wait cut short (as retry.Do counts it). c does not go back
// to the pool: the SDK may yet call its release, which then does nothing.
func (c *call) abandoned() {
	r, reason := c.r, c.ctx.Err()
	r.release(c.tok)
	c.ticket.Release()
	if t := r.trace; t != nil && t.AttemptDone != nil {
		t.AttemptDone(c.actx, c.scope, c.attempts+1, reason)
	}
	r.ended(c.hctx, c.scope, c.attempts, c.waited-c.wait, &retry.Error{Attempts: c.attempts, Err: c.last, Reason: reason})
}

// vetted returns the refusal of the RetryOptions' BeforeRetry checks, if
// any. If a check panics, c ends, holding nothing.
func (c *call) vetted(ce *classified) error {
	returned := false
	defer func() {
		if !returned {
			c.r.refuse(c, ce)
			c.free()
		}
	}()
	reason := c.r.vet(c.hctx, c.attempts, ce.err)
	returned = true
	return reason
}

// retrying tells t that a retry of c after ce was granted, with delay,
// and that its attempt starts: the SDK tells a retryer of no moment after
// the wait that it could tell from another call's. If a hook panics, the
// retry will not be made: c ends, holding nothing.
func (c *call) retrying(t *retry.Trace, ce *classified, delay time.Duration) {
	if t.Retry != nil {
		returned := false
		defer func() {
			if !returned {
				c.unmade()
			}
		}()
		t.Retry(c.hctx, c.scope, c.attempts, delay, ce.err)
		returned = true
	}
	c.attemptStart(c.attempts + 1)
}

// giveUp ends c after its last attempt failed with ce, for reason, and
// returns the error that says so. c is back in the pool before the hooks
// are told: a hook that panics leaves nothing held.
func (c *call) giveUp(ce *classified, reason error) *retry.Error {
	e := &retry.Error{Attempts: c.attempts, Err: ce, Reason: reason}
	r, hctx, scope, waited := c.r, c.hctx, c.scope, c.waited
	c.free()
	r.ended(hctx, scope, e.Attempts, waited, e)
	return e
}

// ended tells the Trace, if any, that a call in scope gave up with e after
// attempts, having waited waited.
func (r *Retryer) ended(ctx context.Context, scope string, attempts int, waited time.Duration, e *retry.Error) {
	t := r.trace
	if t == nil {
		return
	}
	if t.GiveUp != nil {
		t.GiveUp(ctx, scope, e)
	}
	if t.Done != nil {
		t.Done(ctx, scope, attempts, waited, e)
	}
}

// refuse tells the strategy of a failure the Retryer will not retry, so
// that what it learns of the service's health misses none: the failure
// comes marked Unsafe, which no strategy retries or charges for, and a
// retry granted anyway is handed back.
func (r *Retryer) refuse(c *call, ce *classified) {
	info := ce.info
	info.Safety = retry.Unsafe
	if next, err := r.strategy.RefreshToken(c.tok, &classified{ce, info}); err == nil {
		r.release(next)
	}
}

// release hands back a token whose attempt will not be made.
func (r *Retryer) release(t retry.Token) {
	if rel, ok := r.strategy.(retry.Releaser); ok {
		_ = rel.ReleaseToken(t)
	}
}

// errClientFault is the reason a retry answered with a client fault ends
// the call.
var errClientFault = fmt.Errorf("%w: the service answered that the request was at fault", retry.ErrNotRetryable)

// leaver is the loop leave runs: one attempt, which it never retries.
var leaver retry.No

// leave tells the attempt of the caller's loop whose mark ctx carries that
// its failure, e, was left to it (retry.ErrOuterLoop), so that the caller's
// loop judges it as e even when the caller turns the SDK's error into one
// of its own. It goes through retry.Do, whose give-up with ErrOuterLoop is
// the public way to leave a failure.
func leave(ctx context.Context, e *retry.Error) {
	_ = retry.Do(ctx, &leaver, func(context.Context) error { return e })
}

// answered reports whether the service answered the attempt that failed
// with err.
func answered(err error) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() != 0
}

// find finds err in m, or the error it wraps: the SDK may wrap an
// attempt's error (as a clock-skew error) before it asks for a retry. It
// returns the key it found.
func find[V any](m map[error]V, err error) (error, V, bool) {
	for range 2 {
		if err == nil || !comparable(err) {
			break
		}
		if v, ok := m[err]; ok {
			return err, v, true
		}
		err = errors.Unwrap(err)
	}
	var zero V
	return nil, zero, false
}

// comparable reports whether err can be a map key: hashing an interface
// whose dynamic type is not comparable panics.
func comparable(err error) bool { return reflect.TypeOf(err).Comparable() }

// scopeKey is the part of a call's context its default scope is made of.
type scopeKey struct{ service, region string }

// scopeOf returns the scope of the call whose attempt has ctx.
func (r *Retryer) scopeOf(ctx context.Context) string {
	switch {
	case r.scope != nil:
		return r.scope(ctx)
	case r.hasScope:
		return r.fixedScope
	}
	k := scopeKey{awsmiddle.GetServiceID(ctx), awsmiddle.GetRegion(ctx)}
	if s, ok := r.scopes.Load(k); ok {
		return s.(string)
	}
	s := k.service
	if k.region != "" {
		s += " " + k.region
	}
	r.scopes.Store(k, s)
	return s
}
