package sqlretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
)

// pqError is a driver's error other than pgx's with the SQLState method, as
// lib/pq's *pq.Error has.
type pqError struct{ code string }

func (e *pqError) Error() string    { return "pq: " + e.code }
func (e *pqError) SQLState() string { return e.code }

// pqFields is lib/pq's *pq.Error as far as Classify sees it: the SQLSTATE,
// and the other fields of the server's error by their protocol codes (Get).
type pqFields struct{ code, routine string }

func (e *pqFields) Error() string    { return "pq: " + e.code }
func (e *pqFields) SQLState() string { return e.code }
func (e *pqFields) Get(field byte) string {
	switch field {
	case 'C':
		return e.code
	case 'R':
		return e.routine
	}
	return ""
}

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code} }
	// fdw is a remote's error as postgres_fdw relays it: the local server
	// reports it from pgfdw_report_error, the remote statement in the
	// context (Where), which lc_messages translates.
	fdw := func(code, where string) error {
		return &pgconn.PgError{Code: code, Routine: "pgfdw_report_error", File: "connection.c", Where: where}
	}
	// local is an error a local PL/pgSQL RAISE reports.
	local := func(code, where string) error {
		return &pgconn.PgError{Code: code, Routine: "exec_stmt_raise", File: "pl_exec.c", Where: where}
	}
	const remoteCommit = "PL/pgSQL function public.f() line 4 at RAISE\nremote SQL command: COMMIT TRANSACTION"
	sev := func(code, severity, unlocalized string) error {
		return &pgconn.PgError{Code: code, Severity: severity, SeverityUnlocalized: unlocalized}
	}
	safe := retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	unsafe := retry.Info{Safety: retry.Unsafe}
	client := retry.Info{Fault: retry.FaultClient}
	for _, c := range []struct {
		name string
		err  error
		want retry.Info
	}{
		{"nil", nil, retry.Info{}},
		{"40001", pg("40001"), safe},
		{"40P01", pg("40P01"), safe},
		{"40001 wrapped", fmt.Errorf("debit: %w", pg("40001")), safe},
		{"40001 at begin", &txError{stage: stageBegin, err: pg("40001")}, safe},
		{"40001 at commit", &txError{stage: stageCommit, err: pg("40001")}, safe},
		// WithForeignWrites: a remote part may have committed before the
		// local COMMIT failed (postgres_fdw commits it first).
		{"40001 at commit, foreign writes", &txError{stage: stageCommit, err: pg("40001"), foreign: true}, unsafe},
		{"40P01 at commit, foreign writes", &txError{stage: stageCommit, err: pg("40P01"), foreign: true}, unsafe},
		{"40001 of lib/pq", &pqError{"40001"}, safe},
		{"40P01 of lib/pq in fn", &txError{stage: stageFn, err: &pqError{"40P01"}}, safe},
		{"40003", pg("40003"), retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"23505", pg("23505"), client},
		{"23505 at commit (deferred)", &txError{stage: stageCommit, err: pg("23505")}, client},
		{"42601", &pqError{"42601"}, client},
		{"connection lost at commit", &txError{stage: stageCommit, err: io.ErrUnexpectedEOF}, unsafe},
		{"57P01 at commit", &txError{stage: stageCommit, err: pg("57P01")}, unsafe},
		{"08006 at commit", &txError{stage: stageCommit, err: pg("08006")}, unsafe},
		{"cancelled at commit", &txError{stage: stageCommit, err: context.Canceled}, unsafe},
		{"57P01 in fn", &txError{stage: stageFn, err: pg("57P01")}, safe},
		// After fn ended the transaction itself, a conflict may be a later
		// statement's, its work committed.
		{"40001 after fn ended the transaction", &txError{stage: stageEnded, err: pg("40001")}, unsafe},
		{"40P01 after fn ended the transaction", &txError{stage: stageEnded, err: fmt.Errorf("audit: %w", pg("40P01"))}, unsafe},
		{"transient after fn ended the transaction", &txError{stage: stageEnded, err: retry.Transient(errors.New("x"))}, unsafe},
		// Severity ERROR at COMMIT says the local transaction rolled back,
		// not that nothing committed: postgres_fdw commits its remote
		// transactions before the local one, and reports a remote's failure
		// after an earlier remote committed as an ERROR of the local COMMIT.
		{"57014 ERROR at commit", &txError{stage: stageCommit, err: sev("57014", "ERROR", "ERROR")}, unsafe},
		{"08006 ERROR at commit", &txError{stage: stageCommit, err: sev("08006", "ERROR", "ERROR")}, unsafe},
		// postgres_fdw commits the remote transactions one by one before
		// the local one, and relays a remote's failure at its COMMIT
		// TRANSACTION as the local COMMIT's, after a remote before it may
		// have committed: whatever the code, the outcome is unknown. The
		// routine says so, the context is not read.
		{"40001 relayed by postgres_fdw at commit", &txError{stage: stageCommit, err: fdw("40001", remoteCommit)}, unsafe},
		{"40P01 relayed by postgres_fdw at commit", &txError{stage: stageCommit, err: fdw("40P01", remoteCommit)}, unsafe},
		{"55P03 relayed by postgres_fdw at commit", &txError{stage: stageCommit, err: fdw("55P03", remoteCommit)}, unsafe},
		{"23505 relayed by postgres_fdw at commit", &txError{stage: stageCommit, err: fdw("23505", remoteCommit)}, unsafe},
		{"40001 relayed at commit, context translated", &txError{stage: stageCommit, err: fdw("40001", "…: COMMIT TRANSACTION")}, unsafe},
		{"40001 relayed at commit, no context", &txError{stage: stageCommit, err: fdw("40001", "")}, unsafe},
		{"40001 of lib/pq relayed at commit", &txError{stage: stageCommit, err: &pqFields{"40001", "pgfdw_report_error"}}, unsafe},
		// Before COMMIT, the server rolls the remote transactions back with
		// the local one.
		{"40001 relayed by postgres_fdw in fn", &txError{stage: stageFn, err: fdw("40001", "remote SQL command: UPDATE public.t SET k = 1")}, safe},
		// A conflict the local server raised at COMMIT (a deferred trigger,
		// SSI) rolled back everything, whatever its context says; dblink's
		// relay (dblink_res_error) commits nothing at COMMIT.
		{"40001 of a local trigger at commit", &txError{stage: stageCommit, err: local("40001", "PL/pgSQL function f() line 4 at RAISE")}, safe},
		{"40001 of a local trigger at commit, context naming a remote command", &txError{stage: stageCommit, err: local("40001", remoteCommit)}, safe},
		{"40001 of SSI at commit", &txError{stage: stageCommit, err: &pgconn.PgError{Code: "40001", Routine: "PreCommit_CheckForSerializationFailure"}}, safe},
		{"40001 relayed by dblink at commit", &txError{stage: stageCommit, err: &pgconn.PgError{Code: "40001", Routine: "dblink_res_error",
			Where: "while executing command on unnamed dblink connection"}}, safe},
		{"40001 of lib/pq at commit", &txError{stage: stageCommit, err: &pqFields{"40001", "exec_stmt_raise"}}, safe},
		// A COMMIT whose answer was lost, resolved by pg_xact_status: not
		// committed, as a connection lost before COMMIT; unresolved, in
		// doubt whatever it wraps.
		{"lost commit resolved aborted", &txError{stage: stageCommit, err: pg("57P01"), aborted: true}, safe},
		{"lost commit resolved aborted, cut by a deadline", &txError{stage: stageCommit, err: context.DeadlineExceeded, aborted: true}, safe},
		{"in doubt", &txError{stage: stageCommit, err: &InDoubtError{XID: 7, Err: io.ErrUnexpectedEOF}}, unsafe},
		{"in doubt over a conflict", &txError{stage: stageCommit, err: &InDoubtError{Err: pg("40001")}, foreign: true}, unsafe},
		{"in doubt, bare", &InDoubtError{Err: pg("40001")}, unsafe},
		{"53300 at begin", &txError{stage: stageBegin, err: pg("53300")}, safe},
		{"57014", pg("57014"), retry.Info{Timeout: true, Fault: retry.FaultServer}},
		{"fn's transient", &txError{stage: stageFn, err: retry.Transient(errors.New("x"))}, retry.Classify(retry.Transient(errors.New("x")))},
		{"permanent over a conflict", retry.Permanent(pg("40001")), retry.Classify(retry.Permanent(errors.New("x")))},
		{"a give-up of a conflict", &retry.Error{Attempts: 10, Err: &txError{stage: stageFn, err: pg("40001")}, Reason: retry.ErrMaxAttempts},
			retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"left to the caller", &retry.Error{Attempts: 1, Err: &txError{stage: stageBegin, err: pg("53300")}, Reason: retry.ErrOuterLoop}, safe},
		{"cancelled", context.Canceled, retry.Classify(context.Canceled)},
		{"plain", errors.New("x"), retry.Info{}},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		// retry.Do sees the same through txError.RetryInfo.
		if te, ok := c.err.(*txError); ok {
			if got := retry.Classify(te); got != c.want {
				t.Errorf("%s: retry.Classify %+v, want %+v", c.name, got, c.want)
			}
		}
	}
}

func TestClassifyCycle(t *testing.T) {
	e := &cyclic{}
	e.next = e
	_ = Classify(e) // terminates
}

type cyclic struct{ next error }

func (c *cyclic) Error() string { return "cyclic" }
func (c *cyclic) Unwrap() error { return c.next }

// TestInDoubtErrorReads: an *InDoubtError says its id and cause, is
// ErrInDoubt, and one made without a cause still has a message rather than
// a panic.
func TestInDoubtErrorReads(t *testing.T) {
	for _, tc := range []struct {
		err  *InDoubtError
		want string
	}{
		{&InDoubtError{XID: 7, Err: io.ErrUnexpectedEOF}, "sqlretry: transaction 7 outcome unknown: unexpected EOF"},
		{&InDoubtError{Err: io.ErrUnexpectedEOF}, "sqlretry: transaction outcome unknown: unexpected EOF"},
		{&InDoubtError{}, "sqlretry: transaction outcome unknown: no cause given"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, ErrInDoubt) {
			t.Errorf("%v is not ErrInDoubt", tc.err)
		}
	}
}
