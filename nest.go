package retry

import (
	"context"
	"errors"
	"sync/atomic"
)

// Retry at one layer only. Retries that nest multiply: a caller that makes
// three attempts, each of which goes through a client that makes three, sends
// nine requests to a service that is down. So a loop that may retry marks
// the context of each attempt it hands its operation (Do and DoValue do so
// unless told Unmarked; other code uses WithCallerRetries), and an
// integration that finds the mark (CallerRetries) keeps its own retries for
// the failures its caller cannot see or judge, such as a connection refused
// or reset before any answer, and makes one attempt for a failure its caller
// will judge anyway, such as an answer that says the service is failing. It
// then gives up with ErrOuterLoop, and the caller's loop classifies that
// *Error as the failure itself, so it retries it with its own backoff and
// quota.
//
// An integration that gives up with ErrOuterLoop also tells the attempt whose
// mark it found, so that the failure is not lost when the operation turns it
// into an error of its own: when the attempt fails with an error that says
// nothing about retrying (Classify gives the zero Info, as for an
// errors.New("status 503")), the loop judges it as the failure it was left,
// with that failure's classification and hints. An error that classifies
// itself (Permanent, a cancelled context) keeps its own. The hooks, the Trace
// and the *Error of the loop then get the operation's error classified as
// the failure it was left (its text; errors.Is and errors.As reach it), so
// that they agree with what the loop did. So an operation that
// falls back to a second call after a first one was left to it, and fails
// there with an error it did not classify, is retried as the first call's
// failure would be: mark such errors Permanent.
//
// A loop that cannot retry, or does not mark (one attempt, No, Unmarked), is
// transparent to the rule: the client inside it found the caller's mark, not
// this loop's, so when that client leaves a failure to the caller, this loop
// gives up with ErrOuterLoop too, and the failure reaches the caller that
// retries it rather than ending as an outcome nobody may retry.
//
// Each attempt has a mark of its own, which ends with the attempt (returned or
// panicked): from then on, work the attempt leaves running (a background task
// on a derived context) sees neither it nor the marks of the loops around it,
// and what that work leaves reaches no loop. The loop's own hooks, which run between attempts, see the
// marks of the loops around it.
//
// The server side of package httpretry and package forrst mark a request that
// says it is a retry (the Retry-Attempt header), so that the service's own
// outgoing calls leave to the caller what it retries.

// ErrOuterLoop is the reason an integration gave up after one attempt because
// its caller retries the failure (see CallerRetries): the failure is left to
// the caller's loop, which retries it or not as its own rules say.
var ErrOuterLoop = errors.New("retry: left to the caller's retries")

// CallerRetries reports whether the nearest mark on ctx, put there by a loop
// (Do, DoValue) on an attempt's context or by WithCallerRetries, has not
// ended: the caller will retry a failure of the work, so the work should not
// retry it too.
func CallerRetries(ctx context.Context) bool {
	m, ok := ctx.Value(callerKey{}).(*callerMark)
	return ok && !m.ended.Load()
}

// WithCallerRetries returns a copy of ctx marked to say that the caller will
// retry the work done with it if it fails (see CallerRetries), and the
// function that ends the mark, to be called when that work is done. Until
// then, contexts derived from the copy carry the mark too; after, none does,
// whatever marks the contexts around it carry. Do and DoValue mark their
// attempts themselves: this is for a loop of one's own, or a server that
// learns its caller retries.
func WithCallerRetries(ctx context.Context) (context.Context, func()) {
	m := &callerMark{Context: ctx}
	return m, m.stop
}

// Unmarked makes Do and DoValue pass ctx to the operation as it is, without
// the mark that tells the integrations inside it that this loop retries their
// failures (see CallerRetries). It is for an operation that calls no retrying
// client, on a path where the mark's one small allocation per attempt
// matters. An operation that does call one then retries at both layers.
func Unmarked() Option { return Option{kind: optUnmarked} }

type callerKey struct{}

// callerMark is a marked context.
type callerMark struct {
	context.Context
	ended atomic.Bool
	left  atomic.Pointer[Info] // a failure an inner loop left to this attempt
}

// Value answers the nearest mark, ended or not, so that an ended mark hides
// the marks around it.
func (m *callerMark) Value(key any) any {
	if key == (callerKey{}) {
		return m
	}
	return m.Context.Value(key)
}

// stop ends the mark. What an inner loop left to it stays there: a mark is
// never reused.
func (m *callerMark) stop() { m.ended.Store(true) }

// marks returns how many attempts a loop with strategy s foresees marking
// (see marker), 0 if it cannot retry (no strategy, No, one attempt), for
// then a client inside it retrying alone is the only retry. For this package's
// strategies it is every attempt the call may make; a Strategy of another
// type is foreseen the default MaxAttempts.
func marks(s Strategy) int {
	n := defaultMaxAttempts
	switch s := s.(type) {
	case nil, *No:
		return 0
	case *Simple:
		n = s.MaxAttempts
	case *Standard:
		n = s.opts.MaxAttempts
	case *Adaptive:
		n = s.opts.MaxAttempts
	}
	switch {
	case single(n):
		return 0
	case n == 0:
		return defaultMaxAttempts
	case n > maxMarkBatch:
		return maxMarkBatch // a rare call that retries this much allocates again
	}
	return n
}

// maxMarkBatch bounds the marks allocated at once for a strategy that allows
// many attempts: most calls end after their first.
const maxMarkBatch = 8

// single reports whether a MaxAttempts setting allows one attempt only.
func single(maxAttempts int) bool { return maxAttempts == 1 || maxAttempts < 0 }

// marker hands out the marks of one call's attempts. The first attempt's
// mark is allocated alone, for most calls end with it; the first retry
// allocates the marks of every attempt left together, so that a call costs
// at most two allocations whatever its attempts. A mark is never reused: the
// marks a call has not yet handed out are the only ones it may.
type marker struct {
	batch int          // the call's attempts (see marks); 0 if the loop does not mark
	began bool         // the first attempt's mark was handed out
	spare []callerMark // allocated for later attempts, not yet handed out
}

// mark returns the mark for an attempt made in ctx.
func (k *marker) mark(ctx context.Context) *callerMark {
	if !k.began {
		k.began = true
		return &callerMark{Context: ctx}
	}
	if len(k.spare) == 0 {
		// A strategy that outlives the attempts foreseen gets twice as
		// many each time, so that its allocations grow with the log of
		// its attempts.
		k.spare = make([]callerMark, max(k.batch-1, 1))
		k.batch *= 2
	}
	m := &k.spare[0]
	k.spare = k.spare[1:]
	m.Context = ctx
	return m
}

// attempt runs op once, with ctx marked for the attempt if k marks, and
// returns what an inner loop left to the attempt.
func attempt[T any](ctx context.Context, k *marker, op func(context.Context) (T, error)) (T, error, *Info) {
	if k.batch == 0 {
		v, err := op(ctx)
		return v, err, nil
	}
	m := k.mark(ctx)
	defer m.stop() // when op returns, or panics
	v, err := op(m)
	return v, err, m.left.Load()
}

// leave tells the attempt whose mark is nearest on ctx, if it has not ended,
// that a failure with info was left to it (a give-up with ErrOuterLoop).
func leave(ctx context.Context, info Info) {
	if m, ok := ctx.Value(callerKey{}).(*callerMark); ok && !m.ended.Load() {
		m.left.Store(&info)
	}
}

// judged returns the failure of an attempt that failed with err as its loop
// judges it, reports it to its hooks and returns it in its *Error: err
// itself, unless an inner loop left the attempt a failure and err says
// nothing about retrying, when it is err classified as that failure (err's
// text, and errors.Is and errors.As reach err).
func judged(err error, left *Info) error {
	if left == nil || Classify(err) != (Info{}) {
		return err
	}
	return &leftError{err, *left}
}

// leftError is an operation's error that stands for a failure an inner loop
// left to the caller's: it classifies as that failure.
type leftError struct {
	err  error
	info Info
}

func (e *leftError) Error() string   { return e.err.Error() }
func (e *leftError) Unwrap() error   { return e.err }
func (e *leftError) RetryInfo() Info { return e.info }
