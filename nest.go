package retry

import (
	"context"
	"errors"
	"sync/atomic"
)

// Retry at one layer only. Retries that nest multiply: a caller that makes
// three attempts, each of which goes through a client that makes three, sends
// nine requests to a service that is down. So a layer that knows its caller
// will retry a failure marks the context of the work it hands on
// (WithCallerRetries), and an integration that finds the mark (CallerRetries)
// keeps its own retries for the failures its caller cannot see or judge, such
// as a connection refused or reset before any answer, and makes one attempt
// for a failure its caller will judge anyway, such as an answer that says the
// service is failing. It then gives up with ErrOuterLoop, and the caller's
// loop classifies that *Error as the failure itself, so it retries it with its
// own backoff and quota. The mark holds only until the marked work is done:
// work it leaves running afterwards (a background task on a derived context)
// does not see it.
//
// The server side of package httpretry and package forrst mark a request that
// says it is a retry (the Retry-Attempt header), so that the service's own
// outgoing calls leave to the caller what it retries.

// ErrOuterLoop is the reason an integration gave up after one attempt because
// its caller retries the failure (see CallerRetries): the failure is left to
// the caller's loop, which retries it or not as its own rules say.
var ErrOuterLoop = errors.New("retry: left to the caller's retries")

// CallerRetries reports whether ctx is, or derives from, a context that
// WithCallerRetries marked and whose work is not done: the caller will retry
// a failure of the work, so the work should not retry it too.
func CallerRetries(ctx context.Context) bool {
	return ctx.Value(callerKey{}) != nil
}

// WithCallerRetries returns a copy of ctx marked to say that the caller will
// retry the work done with it if it fails (see CallerRetries), and the
// function that ends the mark, to be called when that work is done. Until
// then, contexts derived from the copy carry the mark too; after, none does.
func WithCallerRetries(ctx context.Context) (context.Context, func()) {
	m := &callerMark{Context: ctx}
	return m, m.end
}

type callerKey struct{}

// callerMark is a context marked by WithCallerRetries.
type callerMark struct {
	context.Context
	ended atomic.Bool
}

func (m *callerMark) Value(key any) any {
	if key == (callerKey{}) && !m.ended.Load() {
		return m
	}
	return m.Context.Value(key)
}

func (m *callerMark) end() { m.ended.Store(true) }
