package sqlretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// xidQuery reads the id of the transaction, NULL if it wrote nothing, in the
// same write as its COMMIT (PostgreSQL 13 and later).
const xidQuery = "SELECT pg_current_xact_id_if_assigned()"

// statusQuery asks how the transaction with id $1 ended (PostgreSQL 13 and
// later): "committed", "aborted", "in progress", or NULL for an id too old to
// know. It reads the commit log, so the first two are final even while the
// backend that ran it still exists (a COMMIT waiting for a synchronous
// standby is already committed).
const statusQuery = "SELECT pg_xact_status($1::text::xid8)"

// commitReadingID commits the transaction open on conn, pipelining the read
// of its id with the COMMIT: the id query, a Flush, COMMIT and a Sync go in
// one write, so the id costs no round trip, and the Flush sends it back
// before COMMIT runs, which may commit and then wait (for a synchronous
// standby) before it answers. read reports whether the id was learned (xid
// 0: the transaction wrote nothing).
//
// pgx's QueryTracer of conn, if any, sees the COMMIT as one query, with its
// command tag and error, as it sees pgx's own Commit; it does not see the id
// query that rides in the same write.
//
// commit is the driver's Commit of the same transaction. Where the id cannot
// be read in this way (no pgx connection, a transaction already ended or
// failed, a connection in use, a server that is not PostgreSQL 13 or
// later), it commits alone, and read is false. Otherwise it is not called:
// pgx's transaction needs no word that it ended, the connection's status
// says so (pgx's Commit would send COMMIT, or fail on the busy connection,
// which its tracer would see). ended, if not nil, is called while the
// pipeline still holds the connection: for database/sql's Tx, which must be
// ended through the driver, and which then finds the connection busy and
// marks its transaction ended without sending anything (pgx's Commit marks
// it closed whatever Exec returns); pgx's QueryTracer sees that "commit"
// fail with "conn busy". Without ended, a connection left in a transaction
// by a failed pipeline is closed, as pgx's Commit does.
func commitReadingID(ctx context.Context, conn *pgx.Conn, commit, ended func() error) (xid uint64, read bool, err error) {
	var pc *pgconn.PgConn
	if conn != nil {
		pc = conn.PgConn()
	}
	if pc == nil || pc.TxStatus() != 'T' || pc.IsBusy() || !knowsXactStatus(pc) {
		return 0, false, commit()
	}
	tracer := queryTracerOf(conn)
	if tracer != nil {
		ctx = tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: "COMMIT"})
	}
	var tag pgconn.CommandTag
	p := pc.StartPipeline(ctx)
	p.SendQueryParams(xidQuery, nil, nil, nil, nil)
	p.SendFlushRequest()
	p.SendQueryParams("COMMIT", nil, nil, nil, nil)
	p.SendPipelineSync()
	err = p.Flush()
	if err != nil {
		// Nothing of the write reached the server (a connection it had
		// closed): COMMIT was not sent, so the transaction did not commit,
		// which read with no id says.
		read = unsent(err)
	} else {
		xid, read, err = readID(p)
	}
	if err == nil {
		tag, err = readCommit(p)
	}
	if err == nil {
		_, err = p.GetResults() // the Sync's ReadyForQuery
	}
	if ended != nil {
		_ = ended() // finds the connection busy: see above
	}
	if cerr := p.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if ended == nil && err != nil && pc.TxStatus() != 'I' {
		_ = conn.Close(ctx)
	}
	if tracer != nil {
		tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return xid, read, err
}

// tracerKey is where queryTracerOf keeps a connection's QueryTracer in its
// CustomData.
const tracerKey = "github.com/retrykit/retry/sqlretry.QueryTracer"

// queryTracerOf returns conn's QueryTracer, nil if it has none. pgx shows it
// only in a copy of the connection's config, which clones its TLS settings:
// the first lookup keeps it in the connection's CustomData, for the next.
func queryTracerOf(conn *pgx.Conn) pgx.QueryTracer {
	data := conn.PgConn().CustomData()
	if t, ok := data[tracerKey]; ok {
		qt, _ := t.(pgx.QueryTracer)
		return qt
	}
	qt, _ := conn.Config().Tracer.(pgx.QueryTracer)
	if data != nil {
		data[tracerKey] = qt
	}
	return qt
}

// knowsXactStatus reports whether the server has pg_current_xact_id_if_assigned
// and pg_xact_status: PostgreSQL 13 or later, and not CockroachDB, which
// reports a server_version of PostgreSQL's and a crdb_version of its own.
func knowsXactStatus(pc *pgconn.PgConn) bool {
	if pc.ParameterStatus("crdb_version") != "" {
		return false
	}
	v := pc.ParameterStatus("server_version")
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(strings.TrimSpace(major))
	return err == nil && n >= 13
}

// readID reads the result of xidQuery. A server's error there means that
// COMMIT was not run (PostgreSQL skips to the Sync after an error): the
// transaction did not commit, and read is true with no id, which says so.
func readID(p *pgconn.Pipeline) (xid uint64, read bool, err error) {
	res, err := p.GetResults()
	if err != nil {
		return 0, isPgError(err), err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return 0, false, fmt.Errorf("sqlretry: reading the transaction's id: unexpected %T", res)
	}
	r := rr.Read()
	if r.Err != nil {
		return 0, isPgError(r.Err), r.Err
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		return 0, false, errors.New("sqlretry: reading the transaction's id: no row")
	}
	if r.Rows[0][0] == nil {
		return 0, true, nil // it wrote nothing
	}
	xid, err = strconv.ParseUint(string(r.Rows[0][0]), 10, 64)
	return xid, err == nil, err
}

// unsent reports whether pgconn says that nothing of the request that failed
// with err was sent.
func unsent(err error) bool {
	var u interface{ SafeToRetry() bool }
	return errors.As(err, &u) && u.SafeToRetry()
}

func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// readCommit reads COMMIT's answer, its command tag: ROLLBACK if the
// transaction had failed.
func readCommit(p *pgconn.Pipeline) (pgconn.CommandTag, error) {
	res, err := p.GetResults()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return pgconn.CommandTag{}, fmt.Errorf("sqlretry: reading COMMIT's answer: unexpected %T", res)
	}
	return rr.Close()
}

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
