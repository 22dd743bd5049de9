package retry

import (
	"context"
	"time"

	"github.com/retrykit/retry/internal/errchain"
)

// firstAttempt makes the fast path's first attempt in a call that marks
// its attempts. It returns the block of the attempt's mark, for the
// attempts after it (see marker.began), and what an inner loop left to the
// attempt. It is a function of its own so that the mark ends when the
// attempt does, returned or panicked, not when the call does.
func firstAttempt(ctx context.Context, op func(context.Context) error) (error, *markBlock, *leftFailure) {
	b := &markBlock{Context: ctx}
	defer b.end(1)
	err := op((*mark1)(b))
	return err, b, b.leftTo(1)
}

// runAttempt runs attempt n, with the context the Trace gives it, marked for
// the attempt if the loop marks, and tells the Trace how it went. It reports
// whether the attempt timed out (see call) and what an inner loop left to it.
// Only a traced attempt has the defer that tells the Trace of an attempt that
// panicked (see tracedAttempt): an untraced one pays nothing for it.
func runAttempt(ctx context.Context, c *config, n int, op func(context.Context) error) (error, bool, *leftFailure) {
	if c.trace != nil {
		return tracedAttempt(ctx, c, n, op)
	}
	return call(ctx, c, op)
}

// call runs one attempt in ctx, marked for the attempt if the loop marks and
// bounded by AttemptTimeout if it is positive. It reports whether the attempt
// failed because that bound expired while ctx was alive, and what an inner
// loop left to the attempt. The mark ends when the attempt ends.
func call(ctx context.Context, c *config, op func(context.Context) error) (err error, timedOut bool, left *leftFailure) {
	if c.batch > 0 {
		b, n := c.mark(ctx)
		defer b.end(n) // when op returns, or panics
		err, timedOut = bounded(b.at(n), c.attemptTimeout, op)
		return err, timedOut, b.leftTo(n)
	}
	err, timedOut = bounded(ctx, c.attemptTimeout, op)
	return err, timedOut, nil
}

// bounded runs op, bounded by timeout if it is positive; see call.
func bounded(ctx context.Context, timeout time.Duration, op func(context.Context) error) (error, bool) {
	if timeout <= 0 {
		return op(ctx), false
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := op(actx)
	return err, err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
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
