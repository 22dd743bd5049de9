package retry

import (
	"context"
	"errors"
	"sync/atomic"
)

// Retry at one layer only. Retries that nest multiply: a caller that makes
// three attempts, each of which goes through a client that makes three, sends
// nine requests to a service that is down. So a loop marks the context it
// hands its operation (Do and DoValue do so unless told Unmarked; other code
// uses WithCallerRetries), and an integration that finds the mark
// (CallerRetries) keeps its own retries for the failures its caller cannot
// see or judge, such as a connection refused or reset before any answer, and
// makes one attempt for a failure its caller will judge anyway, such as an
// answer that says the service is failing. It then gives up with
// ErrOuterLoop, and the caller's loop classifies that *Error as the failure
// itself, so it retries it with its own backoff and quota.
//
// An integration that gives up with ErrOuterLoop also tells the loop that
// marked the context, so that the failure is not lost when the operation
// turns it into an error of its own: when an attempt fails with an error that
// says nothing about retrying (Classify gives the zero Info, as for an
// errors.New("status 503")), the loop takes it as the failure left to it,
// with that failure's classification and hints. An error that classifies
// itself (Permanent, say) keeps its own.
//
// The mark holds only until the marked work is done: work it leaves running
// afterwards (a background task on a derived context) does not see it.
//
// The server side of package httpretry and package forrst mark a request that
// says it is a retry (the Retry-Attempt header), so that the service's own
// outgoing calls leave to the caller what it retries.

// ErrOuterLoop is the reason an integration gave up after one attempt because
// its caller retries the failure (see CallerRetries): the failure is left to
// the caller's loop, which retries it or not as its own rules say.
var ErrOuterLoop = errors.New("retry: left to the caller's retries")

// CallerRetries reports whether ctx is, or derives from, a context that a
// loop (Do, DoValue) or WithCallerRetries marked and whose work is not done:
// the caller will retry a failure of the work, so the work should not retry
// it too.
func CallerRetries(ctx context.Context) bool {
	return ctx.Value(callerKey{}) != nil
}

// WithCallerRetries returns a copy of ctx marked to say that the caller will
// retry the work done with it if it fails (see CallerRetries), and the
// function that ends the mark, to be called when that work is done. Until
// then, contexts derived from the copy carry the mark too; after, none does.
// Do and DoValue mark their operation's context themselves: this is for a
// loop of one's own, or a server that learns its caller retries.
func WithCallerRetries(ctx context.Context) (context.Context, func()) {
	m := &callerMark{Context: ctx}
	return m, m.end
}

// Unmarked makes Do and DoValue pass ctx to the operation as it is, without
// the mark that tells the integrations inside it that this loop retries their
// failures (see CallerRetries). It is for an operation that calls no retrying
// client, on a path where the mark's one small allocation per call matters,
// and for integrations that hand the context to nothing that reads it.
func Unmarked() Option { return Option{kind: optUnmarked} }

type callerKey struct{}

// callerMark is a marked context. A loop's mark holds only while an attempt
// runs: the loop's own hooks, run between attempts, see the marks of the
// loops around it and not their own.
type callerMark struct {
	context.Context
	idle atomic.Bool          // the work is not running: the mark is off
	left atomic.Pointer[Info] // a failure an inner loop left to this one
}

func (m *callerMark) Value(key any) any {
	if key == (callerKey{}) && !m.idle.Load() {
		return m
	}
	return m.Context.Value(key)
}

func (m *callerMark) end() { m.idle.Store(true) }

// rest turns the mark off after an attempt; m may be nil.
func (m *callerMark) rest() {
	if m != nil {
		m.idle.Store(true)
	}
}

// mark returns the mark a loop with strategy s and opts puts on its
// operation's context, or nil for none: a loop that cannot retry (no
// strategy, or No) does not claim to.
func mark(ctx context.Context, s Strategy, opts []Option) *callerMark {
	switch s.(type) {
	case nil, *No:
		return nil
	}
	for i := range opts {
		if opts[i].kind == optUnmarked {
			return nil
		}
	}
	return &callerMark{Context: ctx}
}

// leave tells the loop whose mark ctx carries, if any, that a failure with
// info was left to it (a give-up with ErrOuterLoop). from is the loop's own
// mark, skipped: the failure goes to the loop around it.
func leave(ctx context.Context, from *callerMark, info Info) {
	if from != nil {
		ctx = from.Context
	}
	if m, ok := ctx.Value(callerKey{}).(*callerMark); ok {
		m.left.Store(&info)
	}
}

// adopt returns the failure err of an attempt as this loop must judge it: if
// an inner loop left it a failure during the attempt and err says nothing
// about retrying, err with that failure's classification.
func (m *callerMark) adopt(err error) error {
	info := m.left.Swap(nil)
	if info == nil || Classify(err) != (Info{}) {
		return err
	}
	return &leftError{err, *info}
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
