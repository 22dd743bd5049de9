package sqlretry

import (
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/errchain"
)

// stage is where in a run of a transaction an error happened.
type stage uint8

const (
	stageBegin stage = iota + 1
	stageFn
	stageCommit
	stageEnded // fn failed after ending the transaction itself (Commit, Rollback, a statement)
)

// txError is an error of one run of a transaction, with the stage it
// happened at: Classify needs it to tell a failed COMMIT from the rest.
type txError struct {
	stage   stage
	err     error
	foreign bool // WithForeignWrites: a remote part may have committed before COMMIT failed
	aborted bool // the COMMIT's answer was lost, and the transaction found not committed
}

func (e *txError) Error() string {
	switch e.stage {
	case stageBegin:
		return "sqlretry: begin: " + e.err.Error()
	case stageCommit:
		return "sqlretry: commit: " + e.err.Error()
	case stageEnded:
		return "sqlretry: fn ended the transaction itself, which may have committed, and failed (not run again): " + e.err.Error()
	}
	return e.err.Error() // fn's error, as fn wrote it
}

func (e *txError) Unwrap() error { return e.err }

// RetryInfo classifies the error for retry.Do and the loops around it.
func (e *txError) RetryInfo() retry.Info { return Classify(e) }

// sqlStater is the method by which drivers report the SQLSTATE of an error
// the server sent: *pgconn.PgError (pgx), *pq.Error (lib/pq) and others.
type sqlStater interface{ SQLState() string }

// SQLSTATE codes, from PostgreSQL's Appendix A, "PostgreSQL Error Codes"
// (https://www.postgresql.org/docs/current/errcodes-appendix.html), which
// follows the SQL standard's classes.
const (
	serializationFailure     = "40001" // serialization_failure
	deadlockDetected         = "40P01" // deadlock_detected
	statementCompletionUnkwn = "40003" // statement_completion_unknown
	noActiveSQLTransaction   = "25P01" // no_active_sql_transaction
	lockNotAvailable         = "55P03" // lock_not_available (NOWAIT, lock_timeout)
	queryCanceled            = "57014" // query_canceled (statement_timeout, a cancel request)
)

// Classify reports what err, an error of a transaction, says about running
// the transaction again. It is the classification Tx and PgxTx use, and what
// a loop around them sees of a failure they leave to it.
//
//   - SQLSTATE 40001 (serialization_failure) and 40P01 (deadlock_detected),
//     at BEGIN, in fn or at COMMIT (not after fn ended the transaction, see
//     below): Safe, a server fault. The server rolled the transaction back
//     and asks for it to be run again: PostgreSQL's
//     "Serialization Failure Handling"
//     (https://www.postgresql.org/docs/current/mvcc-serialization-failure-handling.html).
//   - An error of COMMIT without a SQLSTATE (a lost connection, a cancelled
//     context), or with one of class 08 (connection exception), 57
//     (operator intervention: a server shutting down), 58 (system error) or
//     XX (internal error), and 40003 (statement_completion_unknown)
//     anywhere: Unsafe. The transaction may have committed; running it
//     again could apply it twice. So even when the server sent the error
//     with severity ERROR, which says the local transaction rolled back:
//     postgres_fdw commits a transaction's remote parts before the local
//     one, and reports a later remote's failure as an ERROR of the local
//     COMMIT after an earlier remote committed.
//   - Before COMMIT, class 08, class 53 (insufficient resources: too many
//     connections, out of memory) and 57P01 to 57P03 (the server shutting
//     down or starting): Safe, a server fault, for a strategy made for
//     outages, as the caller's loop is. 55P03 (lock_not_available): Safe, a
//     server fault. 57014 (query_canceled, a statement_timeout): a server
//     timeout.
//   - Any other SQLSTATE (23505 unique_violation, 42601 syntax_error, …): a
//     client fault, never retried.
//   - A COMMIT that pgx reports answered with ROLLBACK
//     (pgx.ErrTxCommitRollback: fn hid the error that aborted the
//     transaction): nothing committed; a client fault, never retried.
//   - At BEGIN, an error whose SafeToRetry method reports that nothing of
//     the request reached the server (pgconn's, for a pooled connection the
//     server had closed): Safe, a server fault.
//   - An error of COMMIT that postgres_fdw relays from a remote server (its
//     routine is postgres_fdw's, pgfdw_report_error), a conflict included,
//     and any error of COMMIT of a call given WithForeignWrites: Unsafe.
//     postgres_fdw commits the remote transactions one by one as COMMIT
//     begins, before the local one and its SERIALIZABLE check, so a remote
//     part may have committed. The routine is a field lc_messages does not
//     translate; drivers whose errors show none (pgx's and lib/pq's do)
//     cannot tell a relayed error from a local one.
//   - An error fn returns after it ended the transaction itself (its own
//     Commit or Rollback, or a COMMIT, END or ROLLBACK statement), whatever
//     it says, marks and conflicts included: Unsafe, as at a failed COMMIT,
//     unless it is a COMMIT answered with ROLLBACK. A conflict then may be a
//     later statement's, after a COMMIT that committed.
//   - An *InDoubtError, whatever it wraps: Unsafe. A COMMIT whose answer
//     was lost and that pg_xact_status found not committed (aborted, or
//     the transaction wrote nothing): Safe, a server fault, as a connection
//     lost before COMMIT (see "A COMMIT whose answer was lost" in the
//     package documentation).
//   - An error without a SQLSTATE: retry.Classify's answer (an error of fn's
//     own marked retry.Transient, a cancelled context, a refused dial).
//
// Any driver whose errors have a method SQLState() string (pgx's
// *pgconn.PgError, lib/pq's *pq.Error) is classified the same way. A mark
// wrapped around the driver's error (retry.Permanent) overrides it, as in
// retry.Classify, and the give-up of another retry loop (a *retry.Error,
// such as a Tx run inside fn) is Unsafe whatever it wraps, so that retries
// never nest.
func Classify(err error) retry.Info {
	if err == nil {
		return retry.Info{}
	}
	w := inspect(err)
	switch {
	case w.ended && !w.rolledBack:
		// fn ended the transaction itself, perhaps with a COMMIT: whatever
		// it returned after, marks and conflicts included (a conflict of a
		// statement after the COMMIT, or of fn's own failed Commit, which
		// cannot be told apart), the outcome is unknown.
		return retry.Info{Safety: retry.Unsafe}
	case w.inDoubt:
		return retry.Info{Safety: retry.Unsafe}
	case w.aborted || w.idRefused && !w.foreign:
		// The COMMIT's answer was lost, and pg_xact_status said the
		// transaction aborted (or it wrote nothing): as a connection lost
		// before COMMIT. Or sqlretry's request for the id, which the
		// server cannot run, aborted it before COMMIT.
		return retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case w.mark != nil:
		return *w.mark
	case w.commit && (w.relayed || w.foreign):
		// postgres_fdw commits the remote transactions one by one before
		// the local one, and relays a remote's failure as the local
		// COMMIT's: a remote before it may have committed.
		return retry.Info{Safety: retry.Unsafe}
	case w.code == serializationFailure || w.code == deadlockDetected:
		return retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case w.code == "" && w.rolledBack:
		// The server answered COMMIT with ROLLBACK: nothing committed, and
		// fn hid the error that aborted the transaction.
		return retry.Info{Fault: retry.FaultClient}
	case w.code == "" && w.unsent && w.begin:
		// Nothing of it reached the server (a pooled connection the server
		// had closed): the transaction had not begun, or dies with its
		// connection.
		return retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case w.code == statementCompletionUnkwn:
		return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}
	case w.commit && ambiguous(w.code):
		return retry.Info{Safety: retry.Unsafe}
	case w.code != "":
		return classifyCode(w.code)
	}
	// No SQLSTATE: what the standard library and retry's marks say, of the
	// error under the run's stage (whose RetryInfo would come back here).
	if te, ok := err.(*txError); ok {
		err = te.err
	}
	return retry.Classify(err)
}

// ambiguous reports whether a COMMIT that failed with code may have
// committed: the server did not answer that it rolled back.
func ambiguous(code string) bool {
	if code == "" {
		return true
	}
	switch code[:min(len(code), 2)] {
	case "08", "57", "58", "XX":
		return true
	}
	return false
}

// classifyCode classifies a SQLSTATE other than a conflict, before COMMIT or
// one that says the transaction did not commit.
func classifyCode(code string) retry.Info {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"),
		code == "57P01", code == "57P02", code == "57P03", code == lockNotAvailable:
		return retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case code == queryCanceled:
		return retry.Info{Timeout: true, Fault: retry.FaultServer}
	}
	return retry.Info{Fault: retry.FaultClient}
}

// found is what a walk over an error's chain found.
type found struct {
	code       string      // the first SQLSTATE, "" if none
	relayed    bool        // postgres_fdw relayed code from a remote server
	foreign    bool        // the failed COMMIT's call said fn may write through postgres_fdw
	commit     bool        // the SQLSTATE, or the chain's end, is under a failed COMMIT
	mark       *retry.Info // a RetryInfo method above the SQLSTATE, or a give-up
	rolledBack bool        // pgx: the server answered COMMIT with ROLLBACK
	unsent     bool        // the driver says nothing of the request reached the server
	ended      bool        // fn ended the transaction itself
	begin      bool        // the failure is BEGIN's
	aborted    bool        // a lost COMMIT resolved: the transaction did not commit
	inDoubt    bool        // an *InDoubtError: the outcome is unknown
	idRefused  bool        // the server refused the id's request, which aborted the transaction
}

// conflict reports whether the walk found a serialization failure or a
// deadlock that no mark overrides, before fn ended the transaction.
func (f found) conflict() bool {
	return f.mark == nil && !f.ended && !f.inDoubt && !(f.commit && (f.relayed || f.foreign)) &&
		(f.code == serializationFailure || f.code == deadlockDetected)
}

// rerun reports whether the failure is one this loop runs again whatever
// the strategy's rule for others: a conflict, or a transaction that
// sqlretry's own request for its id aborted (nothing committed, and the
// next run commits without it).
func (f found) rerun() bool {
	return f.conflict() || f.idRefused && !f.foreign
}

// inspect walks err's chain, depth first, for a SQLSTATE, noting a failed
// COMMIT on the way, and stopping at a mark (a RetryInfo method other than
// this package's own) or a loop's give-up.
func inspect(err error) found {
	var (
		f found
		w errchain.Walk // bounded: a cyclic chain cannot hang it
	)
	walk(err, &f, &w)
	return f
}

// walk visits err and its chain within what is left of w; it reports
// whether it found what ends the walk.
func walk(err error, f *found, w *errchain.Walk) bool {
	var visit func(error) errchain.Step
	visit = func(err error) errchain.Step {
		if err == pgx.ErrTxCommitRollback {
			f.rolledBack = true
		}
		if u, ok := err.(interface{ SafeToRetry() bool }); ok && u.SafeToRetry() {
			f.unsent = true // pgconn's errors say so
		}
		switch e := err.(type) {
		case *txError:
			if e.stage == stageCommit || e.stage == stageEnded {
				f.commit = true
			}
			f.ended = f.ended || e.stage == stageEnded
			f.foreign = f.foreign || e.foreign
			f.begin = f.begin || e.stage == stageBegin
			f.aborted = f.aborted || e.aborted
		case *InDoubtError:
			f.inDoubt = true
		case *idRefused:
			f.idRefused = true
		case *retry.Error:
			if e.Reason == retry.ErrOuterLoop {
				// One attempt, its failure left to this loop: its Err
				// alone, not its Reason.
				if w.Each(e.Err, visit) {
					return errchain.Stop
				}
				return errchain.Skip
			}
			// The give-up of a loop: Unsafe, whatever it wraps.
			info := retry.Classify(e)
			f.mark = &info
			return errchain.Stop
		case sqlStater:
			f.code = e.SQLState()
			f.relayed = relayed(e)
			return errchain.Stop
		case interface{ RetryInfo() retry.Info }:
			info := e.RetryInfo()
			f.mark = &info
			return errchain.Stop
		}
		return errchain.Descend // *txError and *InDoubtError wrap what they say
	}
	return w.Each(err, visit)
}

// relayed reports whether the server reported e on behalf of a remote server
// of postgres_fdw: the routine that reported it is postgres_fdw's
// (pgfdw_report_error in PostgreSQL 9.3 to 18). The routine is a field of
// the protocol's error that is never translated, unlike the context (Where,
// "remote SQL command: COMMIT TRANSACTION"), which lc_messages changes; it
// names the function that relayed the error, not the one that raised it, so
// a local RAISE (exec_stmt_raise) or a remote error relayed by dblink
// (dblink_res_error) is not taken for one. pgx's *pgconn.PgError has it, and
// lib/pq's *pq.Error by its Get method; other drivers' errors show none.
func relayed(e sqlStater) bool {
	var routine string
	switch e := e.(type) {
	case *pgconn.PgError:
		routine = e.Routine
	case interface{ Get(field byte) string }: // lib/pq
		routine = e.Get('R')
	}
	return strings.HasPrefix(routine, "pgfdw_")
}
