package retry

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry/internal/errchain"
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
	if op == nil {
		_, err := do[struct{}](ctx, s, nil, opts)
		return err
	}
	_, err := do(ctx, s, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) }, opts)
	return err
}

// DoValue is Do for an operation that returns a value. On success it returns
// the value of the successful attempt; on failure, the value the last attempt
// returned (often the zero value) with an *Error. It marks its attempts as Do
// does.
func DoValue[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), opts ...Option) (T, error) {
	return do(ctx, s, op, opts)
}

// do is the one way into the loop, Do's and DoValue's: the first attempt on
// the fast path when it applies (see fastFirst), the loop otherwise, and
// after a first attempt that failed.
func do[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), opts []Option) (T, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if op == nil || s == nil {
		var zero T
		return zero, refuseCall(ctx, op == nil, opts)
	}
	batch, b, direct := begin(s, opts)
	if direct && ctx.Err() == nil {
		if v, err, done := fastFirst(ctx, batch, b, s, op, opts); done {
			return v, err
		}
	}
	return loop(ctx, marker{batch: batch}, s, op, opts)
}

// fastFirst is the fast path: the first attempt of a call to one of this
// package's strategies that lets it go at once (engine.quick), with no
// option that needs per-call state before a failure (see begin), through a
// closed circuit if any. The strategy is called directly (see direct): an
// interface call costs a sixth of the success path. It reports done unless
// the path does not apply, when nothing was done; a failure continues in the
// loop, which takes the attempt as its first. The loop's config is made
// only then, off the success path.
func fastFirst[T any](ctx context.Context, batch int, b *Breaker, s Strategy, op func(context.Context) (T, error), opts []Option) (v T, err error, done bool) {
	brk := b.at("")
	p, closed := brk.closed()
	if !closed {
		return v, nil, false
	}
	q, now := quickFirst(s)
	if !now {
		return v, nil, false
	}
	k := marker{batch: batch}
	v, err, left := attempt(ctx, &k, op)
	if err == nil {
		succeedFirst(s, q)
		brk.reportSuccess(p)
		return v, nil, true
	}
	c := config{marker: k}
	c.apply(opts)
	v, err = resume(ctx, s, op, &c, &first[T]{state{bucket: q}, v, err, left, p})
	return v, err, true
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
func loop[T any](ctx context.Context, k marker, s Strategy, op func(context.Context) (T, error), opts []Option) (T, error) {
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
func resume[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), c *config, pre *first[T]) (T, error) {
	v, timer, err := run(ctx, s, op, c, pre)
	if timer != nil {
		timer.Stop()
	}
	return v, err
}

// first is a first attempt made before the loop started: the loop takes it
// as its own first attempt.
type first[T any] struct {
	st   state
	v    T
	err  error
	left *Info // what an inner loop left to the attempt
	p    pass  // the breaker's pass it was made with
}

// run is the loop itself. It has no defers, which keeps its many returns
// cheap; it returns the timer its waits used, for the caller to stop.
func run[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), c *config, pre *first[T]) (v T, _ *time.Timer, _ error) {
	d := driver{s: s, e: builtin(s)}
	brk := c.breaker.at(c.scope) // the zero breakerAt without WithBreaker
	if pre != nil {
		d.st = pre.st
	} else if err := ctx.Err(); err != nil && (!c.ticketed || c.ticket.p == refused) {
		// No attempt made. A ticketed one has begun: its outcome is
		// collected, and the loop gives up after it.
		return v, nil, c.giveUp(ctx, 0, nil, err)
	} else if at, open := c.refusesFirst(brk); open {
		// The circuit is open: the strategy is not even asked.
		return v, d.timer, c.circuitOpen(ctx, at, 0, nil)
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
				return v, d.timer, c.giveUp(ctx, attempt-1, lastErr, err)
			}
			c.waited += delay
		}
		var (
			opErr    error
			timedOut bool
			left     *Info
		)
		var p pass
		at := brk // the circuit the attempt went through
		if attempt == 1 && pre != nil {
			// Made before the loop, through a closed circuit.
			v, opErr, left, p = pre.v, pre.err, pre.left, pre.p
		} else {
			if attempt == 1 && c.ticketed {
				// Let through before the loop (WithTicket).
				at, p = c.ticket.at, c.ticket.p
			} else if p = brk.allow(); p == refused {
				// The breaker, if any, is consulted as the attempt starts:
				// after the wait, so that it judges by the latest verdicts.
				d.release()
				return v, d.timer, c.circuitOpen(ctx, brk, attempt-1, lastErr)
			}
			v, opErr, timedOut, left = runAttempt(ctx, c, attempt, op)
		}
		if opErr == nil {
			at.reportSuccess(p)
			d.success()
			c.traceSuccess(ctx, attempt)
			return v, d.timer, nil
		}
		// The failure as the loop judges it, for the strategy, the hooks,
		// the breaker and the *Error alike: what an inner loop left to the
		// attempt, if the operation's own error says nothing about retrying.
		opErr = judged(opErr, left)
		lastErr = opErr
		classified := timing(ctx, opErr, timedOut)
		at.reportFailure(ctx, p, classified)
		c.attemptFailed(ctx, attempt, opErr)
		if err := ctx.Err(); err != nil {
			// The caller gave up. The token is abandoned rather than refreshed:
			// refreshing could charge the quota for a retry that will not happen.
			return v, d.timer, c.giveUp(ctx, attempt, opErr, err)
		}
		if d.noToken != nil {
			return v, d.timer, c.giveUp(ctx, attempt, opErr, c.passOn(ctx, opErr, d.noToken))
		}
		if c.vet != nil {
			if reason := c.vet(ctx, attempt, opErr); reason != nil {
				d.refuse(classified)
				return v, d.timer, c.giveUp(ctx, attempt, opErr, reason)
			}
		}
		if refused := d.retry(classified); refused != nil {
			if c.longPoll {
				var qe *QuotaError
				if errors.As(refused, &qe) && qe.Delay > 0 {
					// Up to the deadline, never past it: a poller must not spin.
					wait := qe.Delay
					if deadline, ok := ctx.Deadline(); ok {
						wait = min(wait, time.Until(deadline)-1)
					}
					_ = d.sleep(ctx, wait)
				}
			}
			return v, d.timer, c.giveUp(ctx, attempt, opErr, c.passOn(ctx, opErr, refused))
		}
		delay := d.delay()
		if !fits(ctx, delay) {
			d.release()
			return v, d.timer, c.giveUp(ctx, attempt, opErr, ErrDeadline)
		}
		if brk.refuses(delay) {
			// The circuit is open past the wait: the retry would be refused
			// after it, so it is refused now.
			d.release()
			return v, d.timer, c.circuitOpen(ctx, brk, attempt, opErr)
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

// firstPass is the breaker's leave for the first attempt, and the circuit
// to report it to: the ticket's with WithTicket, otherwise brk's.
func (c *config) firstPass(brk breakerAt) (breakerAt, pass) {
	if c.ticketed {
		return c.ticket.at, c.ticket.p
	}
	return brk, brk.allow()
}

// timing returns err as the strategy and the breaker judge it: classified
// as a timeout if the attempt was cut short by AttemptTimeout, or if it
// ended with a deadline of its own (an http.Client's Timeout, a
// context.WithTimeout inside op) while ctx, the caller's, was alive. Such
// a deadline is the service not answering in time, however op marked it;
// only the caller's own deadline says nothing about the service.
func timing(ctx context.Context, err error, timedOut bool) error {
	switch {
	case timedOut:
		return &attemptTimeoutError{err: err}
	case ctx.Err() == nil && isDeadline(err):
		return &attemptTimeoutError{err: err, own: true}
	}
	return err
}

// circuitOpen gives up because the breaker refused the next attempt, after
// attempts made, the last with last. With LongPoll it first waits until the
// circuit may let it through (the open spell's end; half-open with its
// probes out, the time their places are handed out again), never past the
// deadline, so that a poller cannot spin against the circuit.
func (c *config) circuitOpen(ctx context.Context, brk breakerAt, attempts int, last error) *Error {
	if c.longPoll {
		if wait := brk.refusedFor(); wait > 0 {
			if deadline, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(deadline)-1)
			}
			_ = Sleep(ctx, wait)
		}
	}
	return c.giveUp(ctx, attempts, last, ErrCircuitOpen)
}

// runAttempt runs attempt n, with the context the Trace gives it, marked for
// the attempt if the loop marks, and tells the Trace how it went. It reports
// whether the attempt timed out (see call) and what an inner loop left to it.
// Only a traced attempt has the defer that tells the Trace of an attempt that
// panicked (see tracedAttempt): an untraced one pays nothing for it.
func runAttempt[T any](ctx context.Context, c *config, n int, op func(context.Context) (T, error)) (T, error, bool, *Info) {
	if c.trace != nil {
		return tracedAttempt(ctx, c, n, op)
	}
	return call(ctx, c, op)
}

// call runs one attempt in ctx, marked for the attempt if the loop marks and
// bounded by AttemptTimeout if it is positive. It reports whether the attempt
// failed because that bound expired while ctx was alive, and what an inner
// loop left to the attempt. The mark ends when the attempt ends.
func call[T any](ctx context.Context, c *config, op func(context.Context) (T, error)) (v T, err error, timedOut bool, left *Info) {
	if c.batch > 0 {
		b, n := c.mark(ctx)
		defer b.end(n) // when op returns, or panics
		v, err, timedOut = bounded(b.at(n), c.attemptTimeout, op)
		return v, err, timedOut, b.leftTo(n)
	}
	v, err, timedOut = bounded(ctx, c.attemptTimeout, op)
	return v, err, timedOut, nil
}

// bounded runs op, bounded by timeout if it is positive; see call.
func bounded[T any](ctx context.Context, timeout time.Duration, op func(context.Context) (T, error)) (T, error, bool) {
	if timeout <= 0 {
		v, err := op(ctx)
		return v, err, false
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := op(actx)
	return v, err, err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
}

// fits reports whether a wait of d can end before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || d < time.Until(deadline)
}

// Sleep waits d, for loops of one's own that wait the way Do does. It does
// not start a wait that could not end before ctx's deadline: it returns
// ErrDeadline at once. It returns ctx's error if ctx is done first or already
// (a zero or negative d waits nothing and reports only that), and nil after a
// full wait. Its timer is stopped before it returns. A nil ctx is
// context.Background.
func Sleep(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if d <= 0 {
		return ctx.Err()
	}
	var t *time.Timer
	err := sleep(ctx, d, &t)
	if t != nil {
		t.Stop()
	}
	return err
}

// sleep waits d, reusing *t across waits. It returns ErrDeadline without
// waiting if the wait could not end before ctx's deadline, and ctx's error if
// ctx is done first.
func sleep(ctx context.Context, d time.Duration, t **time.Timer) error {
	if !fits(ctx, d) {
		return ErrDeadline
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-(*t).C:
		return nil
	}
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

// attemptTimeoutError classifies an attempt that timed out while its
// caller waited: cut short by AttemptTimeout or, own, ended by a deadline
// of the operation's own (see timing).
type attemptTimeoutError struct {
	err error
	own bool
}

func (e *attemptTimeoutError) Error() string { return "retry: attempt timed out: " + e.err.Error() }

func (e *attemptTimeoutError) Unwrap() error { return e.err }

// RetryInfo keeps the operation's own classification, if it has one, and
// otherwise calls an attempt AttemptTimeout cut short a server timeout: the
// service did not answer in the time the caller allowed. Either way it is a
// timeout. An operation's own deadline keeps what Classify says of it, so
// that only the counting changes, not what may be retried: unmarked, a
// context's error is not retried (whether the request took effect is
// unknown).
func (e *attemptTimeoutError) RetryInfo() Info {
	var w errchain.Walk
	info, ok := find(e.err, &w)
	switch {
	case w.CutShort():
		info.Safety = Unsafe // as Classify: what the walk did not see may be Permanent
	case !ok && e.own:
		info = Classify(e.err)
	case !ok:
		info = Info{Fault: FaultServer}
	}
	info.Timeout = true
	return info
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
