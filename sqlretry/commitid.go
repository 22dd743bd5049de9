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
	"github.com/jackc/pgx/v5/pgproto3"
)

// The id is read by a fast-path function call (the protocol's FunctionCall
// message, which libpq's PQfn sends): the server calls the function by its
// OID, with no statement to parse, plan and run, and answers with the
// result and a ReadyForQuery, after which it sends all it holds. A
// connection's first commit reads the id with a statement, xidLookup, which
// also reads the OID; then, the transaction committed and nothing at stake,
// it makes one fast-path call of its own, in an empty transaction
// (tryFastPath), which tells whether the way to the
// server takes the message: a proxy may refuse it (one that audits every
// statement cannot see into it), and one refusal inside a transaction would
// abort it. The connection keeps what it learned under idFuncKey of its
// CustomData: the OID once the call went through, and the later commits
// take the fast path; fastPathRefused if it did not, and they read the id
// with xidLookup.
const (
	// xidLookup reads the transaction's id, NULL if it wrote nothing
	// (PostgreSQL 13 and later), and the OID of the function that reads
	// it.
	xidLookup = "SELECT pg_catalog.pg_current_xact_id_if_assigned(), " +
		"'pg_catalog.pg_current_xact_id_if_assigned()'::pg_catalog.regprocedure::pg_catalog.oid"
	idFuncKey = "github.com/retrykit/retry/sqlretry.pg_current_xact_id_if_assigned"
)

// fastPathTryTimeout bounds the wait for the answer to tryFastPath's call.
const fastPathTryTimeout = time.Second

// fastPathRefused, under idFuncKey, says that the connection's fast-path
// call failed.
type fastPathRefused struct{}

// commitReadingID commits the transaction open on conn, and reads its id on
// the way: the id's request (the fast-path call, or xidLookup on the
// connection's first commit) and COMMIT go in one write, each a message of
// its own, so the id costs no round trip; the server answers the first with
// a ReadyForQuery, which makes it send the id before it runs COMMIT, which
// may commit and then wait (for a synchronous standby) before it answers.
// read reports whether the id was learned (xid 0: the transaction wrote
// nothing). Both messages run even if the first fails: COMMIT then finds
// the transaction failed, and rolls it back.
//
// pgx's QueryTracer of conn, if any, sees the COMMIT as one query, with its
// command tag and error, as it sees pgx's own Commit; it does not see the id's
// request that rides in the same write.
//
// commit is the driver's Commit of the same transaction. Where the id cannot
// be read in this way (no pgx connection, a transaction already ended or
// failed, a connection in use, a server that is not PostgreSQL 13 or
// later), it commits alone, and read is false. Otherwise it is not called:
// pgx's transaction needs no word that it ended, the connection's status
// says so (pgx's Commit would send COMMIT, or fail on the busy connection,
// which its tracer would see). ended, if not nil, is called while the
// connection is held busy: for database/sql's Tx, which must be ended
// through the driver, and which then finds the connection busy and marks
// its transaction ended without sending anything (pgx's Commit marks it
// closed whatever Exec returns); pgx's QueryTracer sees that "commit" fail
// with "conn busy". A connection whose answers were not all read (a lost
// connection, the context's end) is closed, as pgx's Commit closes one
// that its COMMIT left in a transaction (see abandon, for which call is the
// call's context, ctx the attempt's). Once ctx has ended COMMIT is not
// sent: the transaction is rolled back, and read is true with no id.
func commitReadingID(ctx, call context.Context, conn *pgx.Conn, commit, ended func() error) (xid uint64, read bool, err error) {
	var pc *pgconn.PgConn
	if conn != nil {
		pc = conn.PgConn()
	}
	if pc == nil || pc.TxStatus() != 'T' || pc.IsBusy() || !knowsXactStatus(pc) {
		return 0, false, commit()
	}
	if err := ctx.Err(); err != nil {
		// pgx's Flush does not look at ctx: COMMIT is not sent after the
		// attempt's end. The transaction is rolled back, as rollback does
		// once the context has ended, so that the connection is kept (a
		// *pgx.Conn's is the caller's only one); if that fails it ends with
		// its connection. Nothing committed.
		rctx, cancel := rollbackContext(ctx)
		defer cancel()
		if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
			_ = pc.Close(rctx)
		}
		endSQLTx(pc, ended)
		return 0, true, &commitNotSent{err}
	}
	learned := pc.CustomData()[idFuncKey]
	if off, ok := learned.(idReadOff); ok {
		if time.Now().Before(off.until) {
			return 0, false, commit()
		}
		// Try again: the refusal may have been a transaction's own (a
		// SET LOCAL ROLE), or lifted since.
		delete(pc.CustomData(), idFuncKey)
		learned = nil
	}
	tracer := queryTracerOf(conn)
	if tracer != nil {
		ctx = tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: "COMMIT"})
	}
	fn, _ := learned.(uint32)
	f := pc.Frontend()
	if fn != 0 {
		f.Send(&pgproto3.FunctionCall{Function: fn})
	} else {
		f.SendQuery(&pgproto3.Query{String: xidLookup})
	}
	f.SendQuery(&pgproto3.Query{String: "COMMIT"})
	var (
		tag pgconn.CommandTag
		try uint32 // the OID to try the fast path with, once COMMIT is done
	)
	if err = f.Flush(); err != nil {
		// Nothing of the write reached the server: COMMIT was not sent,
		// so the transaction did not commit, which read with no id says.
		if read = unsent(err); read {
			err = &commitNotSent{err}
		}
		_ = pc.Close(ctx)
	} else {
		a := commitAnswers{call: fn != 0}
		err = a.receive(ctx, pc)
		xid, read, tag = a.xid, a.read, a.tag
		if err != nil && !a.done {
			abandon(call, pc)
		}
		// The server refused the id's request, and COMMIT answered that it
		// rolled back: nothing committed, and fn's work was not at fault.
		refused := a.serverRefused && err != nil && a.done && a.tag.String() == "ROLLBACK"
		switch data := pc.CustomData(); {
		case data == nil:
		case fn != 0 && a.idFailed:
			// Refused after all (a proxy put in the way since?): the
			// next commits take the statement.
			data[idFuncKey] = fastPathRefused{}
		case refused:
			// The server cannot run the statement either: the next
			// commits, for a while, read no id.
			data[idFuncKey] = idReadOff{until: time.Now().Add(idReadOffFor)}
		case learned == nil && a.fn != 0 && err == nil && a.done:
			try = a.fn
		}
		if refused {
			err = &idRefused{err}
		}
	}
	endSQLTx(pc, ended)
	if tracer != nil {
		tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	}
	if try != 0 && pc.CustomData() != nil {
		pc.CustomData()[idFuncKey] = tryFastPath(ctx, pc, try)
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return xid, read, err
}

// commitNotSent is the error of a COMMIT that was never sent: the attempt's
// context had ended, or the write failed before any of it went out. Nothing
// committed, and there is nothing to resolve (see settle).
type commitNotSent struct{ err error }

func (e *commitNotSent) Error() string { return "sqlretry: COMMIT not sent: " + e.err.Error() }
func (e *commitNotSent) Unwrap() error { return e.err }

// endSQLTx calls ended, if not nil, while pc is held busy, so that it sends
// nothing: see commitReadingID.
func endSQLTx(pc *pgconn.PgConn, ended func() error) {
	if ended != nil {
		held := pc.StartPipeline(context.Background()) // holds the connection busy, sends nothing
		_ = ended()
		_ = held.Close()
	}
}

// abandon closes pc, whose answers were not all read, as pgconn closes a
// connection whose exchange failed: first, while call, the call's context,
// is live (the resolution that follows has its time to wait), it asks the
// server to cancel what the backend runs, so that a COMMIT still in flight
// ends and pg_xact_status can tell how. A COMMIT waiting for a synchronous
// standby then ends committed locally (PostgreSQL warns that the standby
// may not have it yet); one in a deferred trigger ends aborted. Without
// it, such a backend goes on after its client is gone, waiting for the
// standby as long as it takes: pg_xact_status says "in progress" until it
// ends. A connection pgconn has closed needs no cancel: a FATAL error ended
// the backend, or pgconn sent one itself (a connection lost).
func abandon(call context.Context, pc *pgconn.PgConn) {
	if !pc.IsClosed() && call.Err() == nil {
		cctx, cancel := context.WithTimeout(call, rollbackTimeout)
		_ = pc.CancelRequest(cctx)
		cancel()
	}
	_ = pc.Close(call)
}

// tryFastPath calls the function fn by the fast path, on pc, idle after its
// commit, and returns what the connection is to keep: fn if the call went
// through, fastPathRefused if it was refused, nil if no answer came within
// fastPathTryTimeout (the connection, closed then, is not to be used
// again; a context that had ended leaves it to the next commit to try).
// The call goes in a transaction of its own, BEGIN, the call and ROLLBACK
// in one write, with nothing in it: a proxy that drops the call without a
// word (pgcat does) passes ROLLBACK on, whose answer, where the call's was
// awaited, says so at once, and the connection is kept; and no answer
// comes while no transaction is open but the last, so that a proxy that
// hands its server connection back at the first idle ReadyForQuery
// (transaction pooling) keeps it for them all.
func tryFastPath(ctx context.Context, pc *pgconn.PgConn, fn uint32) any {
	if ctx.Err() != nil || pc.TxStatus() != 'I' {
		return nil // its ROLLBACK must roll back nothing but its own
	}
	// A proxy that drops every message without a word must not hold the
	// call, whose transaction has committed, for longer.
	ctx, cancel := context.WithTimeout(ctx, fastPathTryTimeout)
	defer cancel()
	f := pc.Frontend()
	f.SendQuery(&pgproto3.Query{String: "BEGIN"})
	f.Send(&pgproto3.FunctionCall{Function: fn})
	f.SendQuery(&pgproto3.Query{String: "ROLLBACK"})
	if err := f.Flush(); err != nil {
		_ = pc.Close(ctx)
		return nil
	}
	var learned any
	for ready, want := 0, 3; ready < want; {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			// Refused by closing, perhaps. The transaction is empty:
			// there is nothing to cancel, as abandon does.
			_ = pc.Close(ctx)
			return nil
		}
		switch msg.(type) {
		case *pgproto3.FunctionCallResponse:
			if ready == 1 && learned == nil {
				learned = fn
			}
		case *pgproto3.ErrorResponse:
			if ready == 1 && learned == nil {
				learned = fastPathRefused{}
			}
		case *pgproto3.CommandComplete:
			if ready == 1 && learned == nil {
				learned, want = fastPathRefused{}, 2 // ROLLBACK's: the call was dropped
			}
		case *pgproto3.ReadyForQuery:
			ready++
		}
	}
	if learned == nil || pc.TxStatus() != 'I' {
		_ = pc.Close(ctx) // the answers were not as they must be
		return nil
	}
	return learned
}

// commitAnswers is what the server answered to the id's request and COMMIT.
type commitAnswers struct {
	xid  uint64
	read bool   // the id's answer came, or its failure, which left nothing to commit
	fn   uint32 // the OID xidLookup read
	tag  pgconn.CommandTag
	done bool // both ReadyForQuery read: nothing of the exchange is left
	// idFailed: the id's request was answered with an error (the fast
	// path refused, if it was a call), both answers read.
	idFailed bool
	// idAborted: the backend answered the id's request with an error and a
	// ReadyForQuery that says the transaction failed: COMMIT cannot commit.
	idAborted bool
	// call: the id's request was the fast-path call, whose answer is a
	// FunctionCallResponse or an error, never a command tag.
	call bool
	// serverRefused: the backend cannot run the id's request (see
	// cannotRun), which aborted the transaction, fn's work no part of it.
	serverRefused bool
}

// cannotRun reports whether code, the SQLSTATE of the backend's error in
// the id's request, says the server cannot run it, whatever the
// transaction: the function is missing or not allowed (class 42, such as
// 42883 undefined_function and 42501 insufficient_privilege, where
// EXECUTE on it was revoked), or the server does not do it (0A000).
func cannotRun(code string) bool {
	return strings.HasPrefix(code, "42") || code == "0A000"
}

// idReadOff, under idFuncKey, says that the server could not run the id's
// request: the connection's commits read no id until then, and a lost
// COMMIT's outcome stays in doubt. Then they try again, so that a refusal
// of a transaction's own (fn's SET LOCAL ROLE to a role that may not run
// the function), or one lifted since, does not cost the connection its
// resolution for good; a refusal that holds costs one run every
// idReadOffFor.
type idReadOff struct{ until time.Time }

// idReadOffFor is how long a connection reads no id after the server
// refused the request.
const idReadOffFor = 5 * time.Minute

// idRefused is the failure of a transaction that the id's request, which
// the server cannot run, aborted (COMMIT answered that it rolled back):
// nothing committed, and fn's work was not at fault, so the run is run
// again as a conflict is (see Classify), the call's later runs, and the
// connection's commits for a while, without the id.
type idRefused struct{ err error }

func (e *idRefused) Error() string {
	return "sqlretry: the server refused the transaction's id, which aborted it (run again without): " + e.err.Error()
}
func (e *idRefused) Unwrap() error { return e.err }

// receive reads the answers, up to COMMIT's ReadyForQuery. An error of the
// backend's in the id's request, with a ReadyForQuery that says the
// transaction failed (COMMIT then rolls it back), or FATAL (the backend
// ended before it read COMMIT), is returned with read true and no id,
// which says that nothing committed; one in COMMIT is COMMIT's failure, as
// pgx returns it; one of a proxy's in the id's request proves nothing (the
// proxy may have passed COMMIT on). A COMMIT answered COMMIT is a success.
func (a *commitAnswers) receive(ctx context.Context, pc *pgconn.PgConn) error {
	var idErr, commitErr *pgconn.PgError
	for ready := 0; ready < 2; {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			if a.idAborted {
				return idErr // COMMIT cannot commit
			}
			// A FATAL error (pgconn closes the connection and returns it)
			// before the id's ReadyForQuery: the backend ended before it
			// took COMMIT, so nothing committed.
			var pe *pgconn.PgError
			if ready == 0 && errors.As(err, &pe) && fromBackend(pe) {
				a.read = true
				return pe
			}
			// pgconn says that a failed receive may be retried, which is
			// true of the receive, not of the COMMIT sent before it.
			if cause := errors.Unwrap(err); cause != nil {
				err = cause
			}
			return fmt.Errorf("sqlretry: reading COMMIT's answer: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.ReadyForQuery:
			ready++
			if ready == 1 && a.call && !a.read && a.dropped(idErr, msg.TxStatus) {
				// The call got no answer: a proxy dropped it (pgcat does),
				// and these were COMMIT's answers. The fast path is refused
				// from now on.
				if idErr != nil {
					commitErr, idErr = idErr, nil
				}
				ready++
				a.idFailed = true
				break
			}
			if ready == 1 && idErr != nil && fromBackend(idErr) && msg.TxStatus == 'E' {
				// The backend says so: the transaction failed, and COMMIT
				// will roll it back.
				a.idAborted, a.read = true, true
				a.serverRefused = cannotRun(idErr.Code)
			}
			if ready == 1 && !a.read && idErr == nil {
				return errors.New("sqlretry: reading the transaction's id: no answer")
			}
		case *pgproto3.ErrorResponse:
			if ready == 0 {
				idErr = pgconn.ErrorResponseToPgError(msg)
			} else {
				commitErr = pgconn.ErrorResponseToPgError(msg)
			}
		case *pgproto3.FunctionCallResponse:
			if ready == 0 {
				if err := a.parseID(msg.Result); err != nil {
					return err
				}
			}
		case *pgproto3.DataRow:
			if ready != 0 {
				break
			}
			if len(msg.Values) != 2 {
				return fmt.Errorf("sqlretry: reading the transaction's id: %d values", len(msg.Values))
			}
			if err := a.parseID(msg.Values[0]); err != nil {
				return err
			}
			if oid, err := strconv.ParseUint(string(msg.Values[1]), 10, 32); err == nil {
				a.fn = uint32(oid)
			}
		case *pgproto3.CommandComplete:
			if ready == 1 || a.call {
				// Before the first ReadyForQuery, a tag cannot answer the
				// call: it is COMMIT's (see dropped).
				a.tag = pgconn.NewCommandTag(string(msg.CommandTag))
			}
		}
	}
	a.done = true
	a.idFailed = a.idFailed || idErr != nil
	switch {
	case commitErr == nil && a.tag.String() == "COMMIT":
		// Committed, whatever the id's request met: an error there that
		// was not the backend's (a proxy's) did not abort the transaction.
		return nil
	case a.idAborted:
		return idErr // and COMMIT answered ROLLBACK
	case commitErr != nil:
		return commitErr
	case idErr != nil:
		return idErr // a proxy's, and COMMIT answered ROLLBACK: nothing committed
	case a.tag.String() == "":
		return errors.New("sqlretry: COMMIT answered nothing")
	}
	return nil
}

// dropped reports whether the answers read up to the first ReadyForQuery,
// whose status is status, are COMMIT's, the fast-path call having got no
// answer of its own: a command tag came (the call's answer has none), or
// an error naming its routine followed by a ReadyForQuery that says no
// transaction is open (the call, inside the transaction, cannot end it; a
// failed call leaves it failed, 'E'). Any routine: a backend's error
// raised by an extension written in Rust (pgrx) names a Rust one; the
// proxies that send errors of their own with a ReadyForQuery 'I'
// (PgBouncer) name none.
func (a *commitAnswers) dropped(idErr *pgconn.PgError, status byte) bool {
	return a.tag.String() != "" || idErr != nil && idErr.Routine != "" && status == 'I'
}

// fromBackend reports whether e is an error of PostgreSQL's backend, which
// names the C function that raised it, and not of a proxy on the way:
// PgBouncer, pgpool-II, Odyssey, pgcat and Supavisor send errors of their
// own with no routine (PgBouncer's FATAL "server conn crashed?"); PgDog
// names its own Rust routines, "client::QueryEngine::route_query", which no
// C function's name looks like (an error of a pgrx extension's, which
// names a Rust routine too, is then not believed either: the outcome stays
// in doubt, which is safe). Only the backend's error in the id's
// request proves that COMMIT did not commit: the backend aborted the
// transaction, or ended, before it read COMMIT; a proxy's may come after the
// server committed. A proxy that sent a C-like routine of its own would be
// believed.
func fromBackend(e *pgconn.PgError) bool {
	return e.Routine != "" && !strings.Contains(e.Routine, "::")
}

// parseID reads the id's value: nil (NULL) is a transaction that wrote
// nothing.
func (a *commitAnswers) parseID(v []byte) error {
	if v == nil {
		a.read = true
		return nil
	}
	xid, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return fmt.Errorf("sqlretry: reading the transaction's id: %w", err)
	}
	a.xid, a.read = xid, true
	return nil
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

// unsent reports whether pgconn says that nothing of the request that failed
// with err was sent.
func unsent(err error) bool {
	var u interface{ SafeToRetry() bool }
	return errors.As(err, &u) && u.SafeToRetry()
}
