package retry

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// A Trace is a set of hooks that follow one call of Do or DoValue, for
// instrumentation (traces, metrics), in the manner of net/http/httptrace's
// ClientTrace. Every field may be nil. Unlike the On options, each hook is
// told the call's scope, and AttemptStart can give each attempt a context of
// its own, such as one that carries the attempt's span. A Trace is read, not
// changed, by the loop, so one Trace can serve any number of calls at once;
// its hooks must be safe for concurrent use.
//
// Every attempt that starts also ends for the Trace, even one that does not
// return: if the operation panics, the loop tells AttemptDone and then Done
// of it with a *PanicError, GiveUp and Retry not at all, and then panics
// again with the operation's own value, so that the panic goes on as if no
// loop were there. An attempt whose goroutine exits through runtime.Goexit
// (a test's t.FailNow, say) ends for the hooks in the same way, with an
// error that is not a *PanicError, and its goroutine goes on exiting. A
// panic in a hook is not the attempt's: the hooks are not told of it.
type Trace struct {
	// CallStart is called once when the call begins. The loop runs with
	// the context it returns, which must be derived from ctx (nil keeps
	// ctx): every later hook and every attempt sees it, so that a Trace can
	// keep state for one call, such as a count of its retries of a kind.
	CallStart func(ctx context.Context, scope string) context.Context
	// AttemptStart is called before attempt n (1 for the first). The
	// operation runs with the context it returns, which must be derived
	// from ctx; nil keeps ctx.
	AttemptStart func(ctx context.Context, scope string, n int) context.Context
	// AttemptDone is called after attempt n with the context it ran with
	// and its error, nil if it succeeded, a *PanicError if it panicked.
	AttemptDone func(ctx context.Context, scope string, n int, err error)
	// Retry is called when a retry after attempt n has been granted and its
	// wait is about to begin (see OnRetry).
	Retry func(ctx context.Context, scope string, n int, delay time.Duration, err error)
	// GiveUp is called once when the loop returns an error (see OnGiveUp).
	GiveUp func(ctx context.Context, scope string, err *Error)
	// Done is called once when the call ends, after GiveUp if it failed,
	// with the attempts made, the time spent waiting between them, and the
	// call's error (nil, the *Error the loop returns, or the *PanicError of
	// an attempt that panicked): what a metric of whole calls needs, such
	// as gRPC's grpc.client.call.retry_delay.
	Done func(ctx context.Context, scope string, attempts int, waited time.Duration, err error)
}

// WithTrace has the loop call the hooks of t. Several traces all run, in the
// order given, each AttemptStart deriving from the context of the one
// before it.
func WithTrace(t *Trace) Option { return Option{kind: optTrace, trace: t} }

// TraceOf returns the hooks that Do and DoValue would call with opts, folded
// into one Trace, or nil if opts have none: every WithTrace's, and those of
// OnAttemptFailed (in AttemptDone, for a failed attempt that returned),
// OnRetry, OnGiveUp and Log, each called where and in the order Do calls
// it. Like ScopeOf and BreakerOf, it is for an integration whose attempts
// another loop makes, such as awsretry's Retryer, whose attempts are the AWS
// SDK's: calling the Trace's hooks at the moments Do would (CallStart once,
// AttemptStart and AttemptDone around every attempt, Retry when a retry is
// granted, GiveUp and Done when the call ends), it lets the options a caller
// passes see those attempts as they would Do's. BeforeRetry, which can
// refuse a retry, is no hook of a Trace: see BeforeRetryOf. TraceOf builds
// a new Trace at each call: build it once for a set of options, not once
// per call. WithTicket options are ignored.
func TraceOf(opts ...Option) *Trace {
	var c config
	for i := range opts {
		if opts[i].kind != optTicket { // apply would release a ticket it drops
			c.apply(opts[i : i+1])
		}
	}
	return c.hooks()
}

// BeforeRetryOf returns the check that Do and DoValue make with opts after
// a failed attempt, before they ask the strategy for a retry (see
// BeforeRetry): every BeforeRetry's in the order given, the first refusal
// ending it; nil if opts have none. An integration whose attempts another
// loop makes calls it where Do would, and makes no retry it refuses, giving
// up with the refusal as the Reason, as Do does.
func BeforeRetryOf(opts ...Option) func(ctx context.Context, attempt int, err error) error {
	var vet func(context.Context, int, error) error
	for i := range opts {
		if opts[i].kind == optBeforeRetry {
			vet = vetBoth(vet, opts[i].vet)
		}
	}
	return vet
}

// hooks folds c's hooks into one Trace, in the order the loop calls them:
// OnRetry and OnGiveUp before the Traces, OnAttemptFailed and Log after.
func (c *config) hooks() *Trace {
	var before, after *Trace
	if c.retrying != nil || c.gaveUp != nil {
		before = &Trace{}
		if f := c.retrying; f != nil {
			before.Retry = func(ctx context.Context, _ string, n int, delay time.Duration, err error) { f(ctx, n, delay, err) }
		}
		if f := c.gaveUp; f != nil {
			before.GiveUp = func(ctx context.Context, _ string, err *Error) { f(ctx, err) }
		}
	}
	if c.onAttemptFailed != nil || c.logger != nil {
		after = &Trace{}
		if f := c.onAttemptFailed; f != nil {
			after.AttemptDone = func(ctx context.Context, _ string, n int, err error) {
				// The loop tells OnAttemptFailed of no attempt that did not
				// return (see Trace).
				if _, panicked := err.(*PanicError); err != nil && err != errGoexit && !panicked {
					f(ctx, n, err)
				}
			}
		}
		if l := c.logger; l != nil {
			after.Retry = func(ctx context.Context, scope string, n int, delay time.Duration, err error) {
				logRetry(ctx, l, scope, n, delay, err)
			}
			// The loop logs its give-up after Done.
			after.Done = func(ctx context.Context, scope string, _ int, _ time.Duration, err error) {
				if e, ok := err.(*Error); ok {
					logGiveUp(ctx, l, scope, e)
				}
			}
		}
	}
	return before.then(c.trace).then(after)
}

// A PanicError is what a Trace's AttemptDone and Done are told when an
// attempt panicked: the value it panicked with, and the stack of its
// goroutine where the panic was recovered, which still holds the frames
// where the panic began. No caller of Do sees one: the loop panics again
// with Value once the hooks have returned.
type PanicError struct {
	Value any    // what the operation panicked with
	Stack []byte // runtime/debug.Stack() while the panic was under way
}

// Error says that the attempt panicked, and with what.
func (e *PanicError) Error() string { return fmt.Sprintf("retry: the attempt panicked: %v", e.Value) }

// Unwrap returns Value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errGoexit is what the hooks are told of an attempt whose goroutine exited
// through runtime.Goexit.
var errGoexit = errors.New("retry: the attempt's goroutine exited (runtime.Goexit) before it returned")

// tracedAttempt is runAttempt with a Trace. Its deferred call sees an
// attempt that did not return (see Trace); an attempt that returns costs it
// one flag. attemptStart and attemptDone run outside the flag's span, so a
// hook's own panic is not taken for the attempt's.
func tracedAttempt(ctx context.Context, c *config, n int, op func(context.Context) error) (err error, timedOut bool, left *leftFailure) {
	actx := c.trace.attemptStart(ctx, c.scope, n)
	if c.trace.AttemptStart != nil {
		c.alone = true // the attempt's context is the Trace's: its mark cannot share a block
	}
	returned := false
	defer func() {
		if !returned {
			c.attemptPanicked(ctx, actx, n, recover())
		}
	}()
	err, timedOut, left = call(actx, c, op)
	returned = true
	c.trace.attemptDone(actx, c.scope, n, judged(err, left))
	return err, timedOut, left
}

// attemptPanicked tells the Trace that attempt n, run in actx, did not
// return: it panicked with p or, p nil, its goroutine is exiting through
// runtime.Goexit (panic(nil) recovers as a *runtime.PanicNilError since Go
// 1.21, so nil is Goexit alone). The panic goes on with p from this deferred
// call, whose goroutine's stack still holds the frames where it began, so
// that its traceback still shows them (marked "[recovered, repanicked]").
func (c *config) attemptPanicked(ctx, actx context.Context, n int, p any) {
	err := errGoexit
	if p != nil {
		err = &PanicError{Value: p, Stack: debug.Stack()}
	}
	c.trace.attemptDone(actx, c.scope, n, err)
	c.trace.done(ctx, c.scope, n, c.waited, err)
	if p != nil {
		panic(p)
	}
}

func (t *Trace) callStart(ctx context.Context, scope string) context.Context {
	if t.CallStart != nil {
		if cctx := t.CallStart(ctx, scope); cctx != nil {
			return cctx
		}
	}
	return ctx
}

func (t *Trace) attemptStart(ctx context.Context, scope string, n int) context.Context {
	if t.AttemptStart != nil {
		if actx := t.AttemptStart(ctx, scope, n); actx != nil {
			return actx
		}
	}
	return ctx
}

func (t *Trace) attemptDone(ctx context.Context, scope string, n int, err error) {
	if t.AttemptDone != nil {
		t.AttemptDone(ctx, scope, n, err)
	}
}

func (t *Trace) retry(ctx context.Context, scope string, n int, delay time.Duration, err error) {
	if t.Retry != nil {
		t.Retry(ctx, scope, n, delay, err)
	}
}

func (t *Trace) giveUp(ctx context.Context, scope string, err *Error) {
	if t.GiveUp != nil {
		t.GiveUp(ctx, scope, err)
	}
}

func (t *Trace) done(ctx context.Context, scope string, attempts int, waited time.Duration, err error) {
	if t.Done != nil {
		t.Done(ctx, scope, attempts, waited, err)
	}
}

// then returns a Trace that runs the hooks of t, then those of u; either
// may be nil.
func (t *Trace) then(u *Trace) *Trace {
	if t == nil {
		return u
	}
	if u == nil {
		return t
	}
	v := &Trace{
		CallStart: func(ctx context.Context, scope string) context.Context {
			return u.callStart(t.callStart(ctx, scope), scope)
		},
		AttemptDone: func(ctx context.Context, scope string, n int, err error) {
			t.attemptDone(ctx, scope, n, err)
			u.attemptDone(ctx, scope, n, err)
		},
		Retry: func(ctx context.Context, scope string, n int, delay time.Duration, err error) {
			t.retry(ctx, scope, n, delay, err)
			u.retry(ctx, scope, n, delay, err)
		},
		GiveUp: func(ctx context.Context, scope string, err *Error) {
			t.giveUp(ctx, scope, err)
			u.giveUp(ctx, scope, err)
		},
		Done: func(ctx context.Context, scope string, attempts int, waited time.Duration, err error) {
			t.done(ctx, scope, attempts, waited, err)
			u.done(ctx, scope, attempts, waited, err)
		},
	}
	if t.AttemptStart != nil || u.AttemptStart != nil {
		// Only then does each attempt have a context of its own, and a
		// mark of its own (see tracedAttempt).
		v.AttemptStart = func(ctx context.Context, scope string, n int) context.Context {
			return u.attemptStart(t.attemptStart(ctx, scope, n), scope, n)
		}
	}
	return v
}
