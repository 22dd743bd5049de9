package retry

import (
	"context"
	"errors"
	"time"
)

// Do calls op until it succeeds or s stops retrying, and returns nil or an
// *Error. It is the request loop of the Smithy retry guide (the AWS SDKs'
// retry behaviour):
//
//   - It acquires the initial token; if that fails, op is called exactly once.
//   - Before every attempt it waits the token's Delay (even the first token may
//     carry one). A wait that could not end before ctx's deadline is not
//     started: Do returns at once with ErrDeadline as the reason.
//   - After a failure it asks s to refresh the token; a refusal ends the loop.
//     After a success it records the success with s.
//   - It stops as soon as ctx is done, and never retries when the caller's own
//     context was cancelled or its deadline passed. An attempt that ends with
//     a deadline of its own (AttemptTimeout, an http.Client's Timeout) while
//     ctx is alive is a timeout to s and to a Breaker, however op marked it.
//
// The returned *Error wraps op's last error and the reason retrying stopped,
// so errors.Is and errors.As reach both, and reports the attempts made. The
// reasons are listed at Error; with the default strategy, Adaptive, the usual
// one is ErrBudgetExhausted.
//
// op receives ctx (context.Background if ctx is nil), or a context bounded
// by AttemptTimeout. A nil s makes no attempt: the *Error's Reason is
// ErrNilStrategy, whose text says what to pass (an Adaptive shared by the
// calls to a service, or &No{} for one attempt). A nil op makes no attempt
// either: the Reason is ErrNilOperation. Errors that op returns are
// classified with Classify: an error nobody marked as retryable (see
// Transient) is not retried.
//
// Unless told Unmarked, Do marks the context of each attempt it may retry to
// say so, so that a retrying client inside op (httpretry.Transport, the
// Forrst client, the gRPC interceptors) does not retry the same failures too:
// see CallerRetries for the rule. Each mark ends with its attempt.
func Do(ctx context.Context, s Strategy, op func(context.Context) error, opts ...Option) error {
	return fastPath(ctx, s, op, opts)
}

// DoValue is Do for an operation that returns a value. On success it returns
// the value of the successful attempt; on failure, the value the last attempt
// returned (often the zero value) with an *Error. It marks its attempts as Do
// does.
func DoValue[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), opts ...Option) (T, error) {
	var v T
	if op == nil {
		return v, fastPath(ctx, s, nil, opts)
	}
	// The loop keeps what op returns here: the value of the last attempt.
	err := fastPath(ctx, s, func(ctx context.Context) (err error) {
		v, err = op(ctx)
		return err
	}, opts)
	return v, err
}

// fastPath is the one way into the loop, Do's and DoValue's, and the fast
// path: the first attempt of a call to one of this package's strategies
// that lets it go at once (engine.quick), with no option that needs
// per-call state before a failure (see begin), through a closed circuit if
// any, is made here, the strategy's engine called without an interface call
// (which would cost a sixth of the success path), and a success ends the
// call here. Any other call starts in the loop; a first attempt that failed
// goes on there (see again).
func fastPath(ctx context.Context, s Strategy, op func(context.Context) error, opts []Option) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if op == nil || s == nil {
		return refuseCall(ctx, op == nil, opts)
	}
	var (
		batch  int
		b      *Breaker
		direct = true
	)
	switch {
	case len(opts) == 0:
		batch = marks(s)
	case len(opts) == 1 && opts[0].kind == optUnmarked:
		// batch 0, and direct: the option for speed costs no call
	default:
		batch, b, direct = begin(s, opts)
	}
	if !direct || ctx.Err() != nil {
		return loop(ctx, marker{batch: batch}, s, op, opts)
	}
	var (
		brk    breakerAt
		p      pass
		closed = true
	)
	if b != nil {
		brk = b.at("")
		p, closed = brk.closed()
	}
	var (
		q   Quota
		now bool
	)
	switch s := s.(type) {
	case *Standard:
		q, now = s.quick()
	case *Adaptive:
		q, now = s.quick()
	case *Simple:
		q, now = s.quick()
	case *No:
		q, now = s.quick()
	}
	if !now || !closed {
		return loop(ctx, marker{batch: batch}, s, op, opts)
	}
	var (
		err   error
		marks *markBlock
		left  *leftFailure
	)
	if batch == 0 {
		err = op(ctx) // unmarked: op is called as it is
	} else {
		err, marks, left = firstAttempt(ctx, op)
	}
	if err != nil {
		return again(ctx, batch, marks, s, op, opts, &first{state{bucket: q}, err, left, p})
	}
	switch s := s.(type) {
	case *Standard:
		if !s.quiet(q) {
			s.succeed(q, 0, 0, 0)
		}
	case *Adaptive:
		s.succeed(q, 0, 0, 0)
	case *Simple:
		s.succeed(q, 0, 0, 0)
	case *No:
		s.succeed(q, 0, 0, 0)
	}
	brk.reportSuccess(p)
	return nil
}

// again continues a call in the loop after the fast path's first attempt,
// pre, failed, its mark in the block marks (nil if unmarked). The loop's
// settings are made here, off the success path.
func again(ctx context.Context, batch int, marks *markBlock, s Strategy, op func(context.Context) error, opts []Option, pre *first) error {
	c := config{marker: marker{batch: batch}}
	if marks != nil {
		c.began(marks)
	}
	c.apply(opts)
	return resume(ctx, s, op, &c, pre)
}

// begin reads what a call's strategy and options decide before its first
// attempt: the marks of its attempts (see marks), the breaker of
// WithBreaker if any, and whether the first attempt may be made before the
// loop starts (direct): no option needs per-call state until an attempt
// fails. Such are the zero Option (an integration's "nothing to add"),
// Unmarked (applied here), LongPoll (read only after a failure), options
// that set nothing (Scope(""), AttemptTimeout(0), a nil hook), which, with
// no option to override, leave the loop as no option does, and a breaker,
// whose closed circuit needs nothing of the call either.
func begin(s Strategy, opts []Option) (batch int, b *Breaker, direct bool) {
	if len(opts) == 0 {
		return marks(s), nil, true
	}
	direct = true
	unmarked := false
	for i := range opts {
		switch o := &opts[i]; {
		case o.kind == optBreaker:
			b = o.breaker
		case o.kind == optUnmarked:
			unmarked = true
		case !o.inert():
			direct = false
		}
	}
	if !unmarked {
		batch = marks(s)
	}
	return batch, b, direct
}

// loop runs the loop with opts, marking its attempts with k's marks.
func loop(ctx context.Context, k marker, s Strategy, op func(context.Context) error, opts []Option) error {
	c := config{marker: k}
	c.apply(opts)
	if c.maxElapsed > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.maxElapsed)
		defer cancel()
	}
	if c.trace != nil {
		ctx = c.trace.callStart(ctx, c.scope)
	}
	return resume(ctx, s, op, &c, nil)
}

// resume runs the loop, after pre if a first attempt was made before it, and
// stops the timer its waits used.
func resume(ctx context.Context, s Strategy, op func(context.Context) error, c *config, pre *first) error {
	timer, err := run(ctx, s, op, c, pre)
	if timer != nil {
		timer.Stop()
	}
	return err
}

// first is a first attempt made before the loop started: the loop takes it
// as its own first attempt.
type first struct {
	st   state
	err  error
	left *leftFailure // what inner loops told the attempt
	p    pass         // the breaker's pass it was made with
}

// run is the loop itself. It has no defers, which keeps its many returns
// cheap; it returns the timer its waits used, for the caller to stop.
func run(ctx context.Context, s Strategy, op func(context.Context) error, c *config, pre *first) (*time.Timer, error) {
	d := driver{s: s, e: builtin(s)}
	brk := c.breaker.at(c.scope) // the zero breakerAt without WithBreaker
	if pre != nil {
		d.st = pre.st
	} else if err := ctx.Err(); err != nil && (!c.ticketed || c.ticket.p == refused) {
		// No attempt made. A ticketed one has begun: its outcome is
		// collected, and the loop gives up after it.
		return nil, c.giveUp(ctx, 0, nil, err)
	} else if at, open := c.refusesFirst(brk); open {
		// The circuit is open: the strategy is not even asked.
		return d.timer, c.circuitOpen(ctx, at, 0, nil)
	} else if d.begin(c.scope); d.noToken != nil {
		// No first token: one attempt, which a client inside it may
		// retry, and the loop gives up after it with the refusal.
		c.batch = 0
	}

	var lastErr error
	for attempt := 1; ; attempt++ {
		// A ticketed first attempt began before the loop: no wait.
		if delay := d.delay(); delay > 0 && (attempt > 1 || !c.ticketed) {
			if err := d.sleep(ctx, delay); err != nil {
				d.release()
				if c.longPoll && errors.Is(err, ErrDeadline) {
					// The wait does not fit before the deadline (the send-rate
					// limiter's before a first attempt, or a retry's the
					// hooks ran into): the poller waits until it.
					pollWait(ctx, delay, &d.timer)
				}
				return d.timer, c.giveUp(ctx, attempt-1, lastErr, err)
			}
			c.waited += delay
		}
		var (
			opErr    error
			timedOut bool
			left     *leftFailure
		)
		var p pass
		at := brk // the circuit the attempt went through
		if attempt == 1 && pre != nil {
			// Made before the loop, through a closed circuit.
			opErr, left, p = pre.err, pre.left, pre.p
		} else {
			if attempt == 1 && c.ticketed {
				// Let through before the loop (WithTicket).
				at, p = c.ticket.at, c.ticket.p
			} else if p = brk.allow(); p == refused {
				// The breaker, if any, is consulted as the attempt starts:
				// after the wait, so that it judges by the latest verdicts.
				d.release()
				return d.timer, c.circuitOpen(ctx, brk, attempt-1, lastErr)
			}
			opErr, timedOut, left = runAttempt(ctx, c, attempt, op)
		}
		if opErr == nil {
			at.reportSuccess(p)
			d.success()
			c.traceSuccess(ctx, attempt)
			return d.timer, nil
		}
		// The failure as the loop judges it, for the strategy, the hooks,
		// the breaker and the *Error alike: what an inner loop left to the
		// attempt, if the operation's own error says nothing about retrying.
		opErr = judged(opErr, left)
		lastErr = opErr
		classified := timing(ctx, opErr, timedOut)
		if left.countedBy(at.b) && !p.probe() {
			// A loop inside the attempt counted this request's failure
			// with the same breaker: counted once, and the loops around
			// are told so.
			counted(ctx, at.b)
		} else {
			at.reportFailure(ctx, p, classified)
		}
		c.attemptFailed(ctx, attempt, opErr)
		if err := ctx.Err(); err != nil {
			// The caller gave up. The token is abandoned rather than refreshed:
			// refreshing could charge the quota for a retry that will not happen.
			return d.timer, c.giveUp(ctx, attempt, opErr, err)
		}
		if d.noToken != nil {
			return d.timer, c.giveUp(ctx, attempt, opErr, c.passOn(ctx, opErr, d.noToken))
		}
		if c.vet != nil {
			if reason := c.vet(ctx, attempt, opErr); reason != nil {
				d.refuse(classified)
				return d.timer, c.giveUp(ctx, attempt, opErr, reason)
			}
		}
		if refused := d.retry(classified); refused != nil {
			if c.longPoll {
				var qe *QuotaError
				if errors.As(refused, &qe) && qe.Delay > 0 {
					// Up to the deadline, never past it: a poller must not spin.
					pollWait(ctx, qe.Delay, &d.timer)
				}
			}
			return d.timer, c.giveUp(ctx, attempt, opErr, c.passOn(ctx, opErr, refused))
		}
		delay := d.delay()
		if !fits(ctx, delay) {
			d.release()
			if c.longPoll {
				// The retry does not fit before the deadline: the poller
				// waits until it, rather than polling again at once.
				pollWait(ctx, delay, &d.timer)
			}
			return d.timer, c.giveUp(ctx, attempt, opErr, ErrDeadline)
		}
		if brk.refuses(delay) {
			// The circuit is open past the wait: the retry would be refused
			// after it, so it is refused now.
			d.release()
			return d.timer, c.circuitOpen(ctx, brk, attempt, opErr)
		}
		if c.retrying != nil {
			c.retrying(ctx, attempt, delay, opErr)
		}
		if c.trace != nil {
			c.trace.retry(ctx, c.scope, attempt, delay, opErr)
		}
		if c.logger != nil {
			c.logRetry(ctx, attempt, delay, opErr)
		}
	}
}

// refusesFirst reports whether the circuit refuses the first attempt (with
// WithTicket, whether the ticket is a refusal's), and that circuit.
func (c *config) refusesFirst(brk breakerAt) (breakerAt, bool) {
	if c.ticketed {
		return c.ticket.at, c.ticket.p == refused
	}
	return brk, brk.refuses(0)
}

// circuitOpen gives up because the breaker refused the next attempt, after
// attempts made, the last with last. With LongPoll it first waits until the
// circuit may let it through (the open spell's end; half-open with its
// probes out, the time their places are handed out again), never past the
// deadline, so that a poller cannot spin against the circuit.
func (c *config) circuitOpen(ctx context.Context, brk breakerAt, attempts int, last error) *Error {
	if c.longPoll {
		var t *time.Timer
		pollWait(ctx, brk.refusedFor(), &t)
	}
	return c.giveUp(ctx, attempts, last, ErrCircuitOpen)
}

// traceSuccess tells the Trace that the call succeeded on attempt n.
func (c *config) traceSuccess(ctx context.Context, n int) {
	if c.trace != nil {
		c.trace.done(ctx, c.scope, n, c.waited, nil)
	}
}

func (c *config) attemptFailed(ctx context.Context, attempt int, err error) {
	if c.onAttemptFailed != nil {
		c.onAttemptFailed(ctx, attempt, err)
	}
}

// passOn returns the reason a loop that does not mark its attempts gives up
// on err: ErrOuterLoop if err is a failure an inner loop left to a caller
// that retries (CallerRetries), reason otherwise. Such a loop (one attempt,
// retry.No, Unmarked) is transparent to the rule of retries at one layer:
// the client inside it saw the caller's mark, not this loop's, and left the
// failure to the caller, so this loop's give-up must leave it there too.
// Given up with its refusal instead, it would be an outcome the caller
// cannot retry, and the failure no one's.
func (c *config) passOn(ctx context.Context, err, reason error) error {
	if c.batch == 0 && CallerRetries(ctx) && errors.Is(err, ErrOuterLoop) {
		return ErrOuterLoop
	}
	return reason
}

// giveUp builds the loop's error and reports it to the hooks.
func (c *config) giveUp(ctx context.Context, attempts int, last, reason error) *Error {
	e := &Error{Attempts: attempts, Err: last, Reason: reason}
	if reason == ErrOuterLoop {
		leave(ctx, Classify(last))
	}
	if c.gaveUp != nil {
		c.gaveUp(ctx, e)
	}
	if c.trace != nil {
		c.trace.giveUp(ctx, c.scope, e)
		c.trace.done(ctx, c.scope, attempts, c.waited, e)
	}
	if c.logger != nil {
		c.logGiveUp(ctx, e)
	}
	return e
}

// refuseCall is the give-up of a call without an operation (nilOp) or
// without a strategy: no attempt, and an *Error like any other, hooks
// told, rather than a nil dereference inside the loop or a call that
// silently makes one attempt.
func refuseCall(ctx context.Context, nilOp bool, opts []Option) error {
	var c config
	c.apply(opts)
	if c.ticketed {
		c.ticket.Release()
	}
	if c.trace != nil {
		ctx = c.trace.callStart(ctx, c.scope) // the call begins for the Trace, as it ends
	}
	if nilOp {
		return c.giveUp(ctx, 0, nil, ErrNilOperation)
	}
	return c.giveUp(ctx, 0, nil, ErrNilStrategy)
}
