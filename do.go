package retry

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry/internal/errchain"
)

// errNilStrategy is the reason a call with a nil Strategy made one attempt.
var errNilStrategy = &refusal{ErrMaxAttempts, "no strategy (nil), so one attempt"}

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
// by AttemptTimeout. A nil s means one attempt without retries. A nil op
// makes no attempt: the *Error's Reason is ErrNilOperation. Errors that op
// returns are classified with Classify: an error nobody marked as retryable
// (see Transient) is not retried.
//
// Unless told Unmarked, Do marks the context of each attempt it may retry to
// say so, so that a retrying client inside op (httpretry.Transport, the
// Forrst client, the gRPC interceptors) does not retry the same failures too:
// see CallerRetries for the rule. Each mark ends with its attempt.
func Do(ctx context.Context, s Strategy, op func(context.Context) error, opts ...Option) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if op == nil {
		return nilOperation(ctx, opts)
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
	if direct && ctx.Err() == nil {
		// The one shortcut: the first attempt of a call to the strategies
		// most calls use, on their own unscoped quota, through a closed
		// circuit if any, is made here with the strategy called directly
		// (an interface call costs a sixth of the success path), and a
		// failure joins the loop (again). Every other call, DoValue's too,
		// starts in doValue.
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
			std *Standard
			q   *TokenBucket
			ad  *Adaptive
			sc  *adaptiveScope
		)
		here := true // s on its own quota, or one without a quota
		switch s := s.(type) {
		case *Standard:
			std, q = s, s.local()
			here = q != nil
		case *Adaptive:
			ad, sc = s, s.local()
			here = sc != nil
		case *Simple, *No:
		default:
			here = false
		}
		if here && closed {
			var (
				err   error
				marks *markBlock
				left  *Info
			)
			if batch == 0 {
				err = op(ctx) // unmarked: op is called as it is
			} else {
				err, marks, left = once(ctx, op)
			}
			if err != nil {
				k := marker{batch: batch}
				if marks != nil {
					k.began(marks)
				}
				var bucket Quota
				switch {
				case q != nil:
					bucket = q
				case sc != nil:
					bucket = sc
				}
				return again(ctx, k, opts, s, op, bucket, err, left, p)
			}
			switch {
			case q != nil:
				std.firstSucceeded(q)
			case sc != nil:
				ad.firstSucceeded(sc)
				if sc.limiting.Load() {
					// The limiter started while the attempt ran: it hears
					// of the success, as succeed tells it.
					ad.tell(sc, ad.now(), false)
				}
			}
			brk.reportSuccess(p)
			return nil
		}
	}
	_, err := doValue(ctx, marker{batch: batch}, b, direct, s, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) }, opts)
	return err
}

// once is attempt for Do's op, without a wrapper, in a call that marks its
// attempts: the call's first. It returns the block of the attempt's mark, for
// the attempts after it (see marker.began).
func once(ctx context.Context, op func(context.Context) error) (error, *markBlock, *Info) {
	b := &markBlock{Context: ctx}
	defer b.end(1) // when op returns, or panics
	err := op((*mark1)(b))
	return err, b, b.leftTo(1)
}

// again continues Do's loop after a first attempt, paid from bucket (nil
// for none) and made with the breaker's pass p, failed with err, an inner
// loop having left it left (see judged). The loop's wrapper of op is made
// here, off the success path.
func again(ctx context.Context, k marker, opts []Option, s Strategy, op func(context.Context) error, bucket Quota, err error, left *Info, p pass) error {
	c := config{marker: k}
	c.apply(opts)
	wrapped := func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) }
	_, err = resume(ctx, s, wrapped, &c, &first[struct{}]{st: state{bucket: bucket}, err: err, left: left, p: p})
	return err
}

// DoValue is Do for an operation that returns a value. On success it returns
// the value of the successful attempt; on failure, the value the last attempt
// returned (often the zero value) with an *Error. It marks its attempts as Do
// does.
func DoValue[T any](ctx context.Context, s Strategy, op func(context.Context) (T, error), opts ...Option) (T, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if op == nil {
		var zero T
		return zero, nilOperation(ctx, opts)
	}
	batch, b, direct := begin(s, opts)
	return doValue(ctx, marker{batch: batch}, b, direct, s, op, opts)
}

// doValue is DoValue, marking its attempts with k's marks, given what begin
// found in opts.
func doValue[T any](ctx context.Context, k marker, b *Breaker, direct bool, s Strategy, op func(context.Context) (T, error), opts []Option) (T, error) {
	if direct && ctx.Err() == nil {
		// The common case, a built-in strategy without options, gets a path
		// of its own for the first attempt; a failure joins the loop.
		e, brk := builtin(s), b.at("")
		if p, closed := brk.closed(); e != nil && closed {
			if q, now := e.quick(""); now {
				st := state{bucket: q}
				v, err, left := attempt(ctx, &k, op)
				if err == nil {
					e.succeed(st.bucket, 0, 0, 0)
					brk.reportSuccess(p)
					return v, nil
				}
				c := config{marker: k}
				c.apply(opts)
				return resume(ctx, s, op, &c, &first[T]{st, v, err, left, p})
			}
		}
	}
	return loop(ctx, k, s, op, opts)
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

// nilOperation is the give-up for a nil op: an *Error like any other, hooks
// told, rather than a nil dereference inside the loop.
func nilOperation(ctx context.Context, opts []Option) error {
	var c config
	c.apply(opts)
	if c.ticketed {
		c.ticket.Release()
	}
	if c.trace != nil {
		ctx = c.trace.callStart(ctx, c.scope) // the call begins for the Trace, as it ends
	}
	return c.giveUp(ctx, 0, nil, ErrNilOperation)
}

// loop runs the general loop with opts, marking its attempts with k's marks.
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

// builtin returns s as an engine if it is exactly one of this package's
// strategies: a caller's type that embeds one of them has the engine's
// methods too, but may override the Strategy methods.
func builtin(s Strategy) engine {
	switch e := s.(type) {
	case *Standard:
		return e
	case *Simple:
		return e
	case *No:
		return e
	case *Adaptive:
		return e
	}
	return nil
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
	} else if err := d.begin(c.scope); err != nil {
		c.batch = 0 // one attempt, which a client inside it may retry
		at, p := c.firstPass(brk)
		if p == refused {
			return v, d.timer, c.circuitOpen(ctx, at, 0, nil)
		}
		v, opErr, timedOut, _ := runAttempt(ctx, c, 1, op)
		if opErr == nil {
			at.reportSuccess(p)
			c.traceSuccess(ctx, 1)
			return v, d.timer, nil
		}
		at.reportFailure(ctx, p, timing(ctx, opErr, timedOut))
		c.attemptFailed(ctx, 1, opErr)
		if cerr := ctx.Err(); cerr != nil {
			return v, d.timer, c.giveUp(ctx, 1, opErr, cerr) // the caller gave up, as in the loop
		}
		return v, d.timer, c.giveUp(ctx, 1, opErr, c.passOn(ctx, opErr, err))
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

// driver runs a request through a strategy: directly for this package's
// strategies (e non-nil), through single-use tokens for any other.
type driver struct {
	e     engine
	st    state
	s     Strategy
	tok   Token
	timer *time.Timer // created by the first wait, reused by later ones
}

func (d *driver) begin(scope string) error {
	switch {
	case d.e != nil:
		d.st = d.e.begin(scope)
		return nil
	case d.s == nil:
		return errNilStrategy
	}
	var err error
	d.tok, err = d.s.AcquireInitialToken(scope)
	return err
}

func (d *driver) delay() time.Duration {
	if d.e != nil {
		return d.st.delay
	}
	return d.tok.Delay()
}

func (d *driver) retry(err error) error {
	if d.e != nil {
		st, refused := d.e.next(d.st, err)
		if refused == nil {
			d.st = st
		}
		return refused
	}
	next, refused := d.s.RefreshToken(d.tok, err)
	if refused == nil {
		d.tok = next
	}
	return refused
}

func (d *driver) success() {
	if d.e != nil {
		d.e.succeed(d.st.bucket, d.st.retries, d.st.cost, d.st.started)
		return
	}
	_ = d.s.RecordSuccess(d.tok) // the call succeeded whatever the strategy thinks of its token
}

// refuse tells the strategy of a failure that a BeforeRetry check refused to
// retry, so that what it learns of the service's health (an Adaptive's
// failure counts and throttling) misses no failure. The failure comes to it
// marked Unsafe, which no strategy retries or charges for; a strategy that
// grants a retry anyway gets it back.
func (d *driver) refuse(err error) {
	if d.retry(refusedError{err}) == nil {
		d.release()
	}
}

// refusedError is a failure the loop will not retry, whatever the strategy
// says: it classifies as err does, but Unsafe.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }
func (e refusedError) RetryInfo() Info {
	info := Classify(e.err)
	info.Safety = Unsafe
	return info
}

// release hands back a granted retry the loop will not make.
func (d *driver) release() {
	switch {
	case d.e != nil:
		d.e.release(d.st)
		d.st.cost, d.st.limited = 0, false
	case d.s != nil:
		if r, ok := d.s.(Releaser); ok {
			_ = r.ReleaseToken(d.tok)
		}
	}
}

// sleep waits d, reusing the driver's timer.
func (d *driver) sleep(ctx context.Context, delay time.Duration) error {
	return sleep(ctx, delay, &d.timer)
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
