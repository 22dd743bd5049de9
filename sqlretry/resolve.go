package sqlretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/retrykit/retry"
)

// ErrInDoubt is what errors.Is finds in the error of a call whose
// transaction may or may not have committed, and whose outcome could not be
// learned: it is not run again. The caller must find out whether its effect
// took place (read it back) before doing the work again, or make the work
// idempotent (a key that a second run finds already used).
var ErrInDoubt = errors.New("sqlretry: the transaction's outcome is unknown")

// An InDoubtError is the error of a transaction that may have committed:
// its COMMIT's answer was lost (the connection failed or was closed after
// COMMIT was sent, the attempt was cut short during COMMIT) and
// pg_xact_status could not say how it ended (no connection to ask on, the
// call's context ended while the transaction was still in progress, an id
// too old for the server to know), or the failure is one that the id cannot
// resolve (CockroachDB's 40003 statement_completion_unknown, an error
// postgres_fdw relayed from a remote server, a call given
// WithForeignWrites whose local transaction aborted). errors.Is(err,
// ErrInDoubt) reports it; the transaction is never run again.
type InDoubtError struct {
	XID uint64 // the transaction's id (pg_current_xact_id), 0 if it was not learned
	Err error  // why the outcome is unknown: the COMMIT's failure, and the resolution's
}

// Error reads "sqlretry: transaction 1234 outcome unknown: " and the cause.
func (e *InDoubtError) Error() string {
	cause := "no cause given"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	if e.XID == 0 {
		return "sqlretry: transaction outcome unknown: " + cause
	}
	return "sqlretry: transaction " + strconv.FormatUint(e.XID, 10) + " outcome unknown: " + cause
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *InDoubtError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInDoubt.
func (e *InDoubtError) Is(target error) bool { return target == ErrInDoubt }

// OnResolved sets f, called when a COMMIT whose answer was lost has been
// resolved by pg_xact_status on another connection: committed, and the call
// succeeds without running fn again, or aborted (or it wrote nothing, xid
// 0), and the run failed safe to run again, as the strategy allows. cause
// is the failure that lost the answer. ctx is the attempt's, as a
// retry.Trace's AttemptStart made it, so that a Trace can tell the attempt
// it belongs to (its AttemptDone then sees nil for a committed one).
// Several OnResolved all run, in the order given.
func OnResolved(f func(ctx context.Context, xid uint64, committed bool, cause error)) Option {
	return Option{func(c *config) {
		if prev := c.resolved; prev != nil && f != nil {
			c.resolved = func(ctx context.Context, xid uint64, committed bool, cause error) {
				prev(ctx, xid, committed, cause)
				f(ctx, xid, committed, cause)
			}
		} else if f != nil {
			c.resolved = f
		}
	}}
}

// statusQuery asks how the transaction with id $1 ended (PostgreSQL 13 and
// later): "committed", "aborted", "in progress", or NULL for an id too old to
// know. It reads the commit log, so the first two are final even while the
// backend that ran it still exists (a COMMIT waiting for a synchronous
// standby is already committed).
const statusQuery = "SELECT pg_xact_status($1::text::xid8)"

// xactStatus asks how the transaction xid ended, on a connection other than
// the one whose COMMIT failed: status "" means NULL, an id too old to know.
type xactStatus func(ctx context.Context, xid uint64) (status string, err error)

// Resolution's waits while the transaction is still in progress: from
// resolveFirst doubling to resolveMax.
const (
	resolveFirst = 5 * time.Millisecond
	resolveMax   = 200 * time.Millisecond
)

// settle turns te, a failed COMMIT, into the run's result. A failure that
// says how the COMMIT ended (the server answered it) is te. One that leaves
// the outcome unknown is resolved when the id was read: no id (the
// transaction wrote nothing) and "aborted" are safe to run again, so te
// marked aborted; "committed" is nil, the run succeeded; "in progress" waits,
// bounded by ctx, the call's context. Anything else is an *InDoubtError.
// actx is the attempt's context, given to the OnResolved hook.
func (c *config) settle(ctx, actx context.Context, te *txError, xid uint64, read bool, status xactStatus) error {
	if errors.As(te.err, new(*commitNotSent)) {
		return &txError{stage: stageCommit, err: te.err, aborted: true}
	}
	w := inspect(te)
	if Classify(te).Safety != retry.Unsafe {
		return te
	}
	if !read || status == nil || w.relayed || w.code == statementCompletionUnkwn {
		return c.doubt(te, xid, nil)
	}
	if xid == 0 {
		return c.aborted(actx, te, 0)
	}
	for wait := resolveFirst; ; wait = min(2*wait, resolveMax) {
		if err := ctx.Err(); err != nil {
			return c.doubt(te, xid, err)
		}
		s, err := status(ctx, xid)
		switch {
		case err != nil:
			return c.doubt(te, xid, err)
		case s == "committed":
			if c.resolved != nil {
				c.resolved(actx, xid, true, te.err)
			}
			return nil
		case s == "aborted":
			return c.aborted(actx, te, xid)
		case s != "in progress":
			return c.doubt(te, xid, fmt.Errorf("pg_xact_status(%d) = %q", xid, s))
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return c.doubt(te, xid, err)
		}
	}
}

// aborted is te, resolved: the transaction did not commit. With
// WithForeignWrites its remote parts may have, so it stays in doubt.
func (c *config) aborted(actx context.Context, te *txError, xid uint64) error {
	if te.foreign {
		return c.doubt(te, xid, errors.New("the local transaction aborted, its remote parts may have committed"))
	}
	if c.resolved != nil {
		c.resolved(actx, xid, false, te.err)
	}
	return &txError{stage: stageCommit, err: te.err, aborted: true}
}

// doubt is te's failure as an *InDoubtError, with why it was not resolved.
func (c *config) doubt(te *txError, xid uint64, why error) error {
	err := te.err
	if why != nil {
		err = fmt.Errorf("%w (not resolved: %w)", err, why)
	}
	return &txError{stage: te.stage, err: &InDoubtError{XID: xid, Err: err}, foreign: te.foreign}
}
