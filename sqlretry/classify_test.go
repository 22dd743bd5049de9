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

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code} }
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
		{"40001 at begin", &txError{stageBegin, pg("40001")}, safe},
		{"40001 at commit", &txError{stageCommit, pg("40001")}, safe},
		{"40001 of lib/pq", &pqError{"40001"}, safe},
		{"40P01 of lib/pq in fn", &txError{stageFn, &pqError{"40P01"}}, safe},
		{"40003", pg("40003"), retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"23505", pg("23505"), client},
		{"23505 at commit (deferred)", &txError{stageCommit, pg("23505")}, client},
		{"42601", &pqError{"42601"}, client},
		{"connection lost at commit", &txError{stageCommit, io.ErrUnexpectedEOF}, unsafe},
		{"57P01 at commit", &txError{stageCommit, pg("57P01")}, unsafe},
		{"08006 at commit", &txError{stageCommit, pg("08006")}, unsafe},
		{"cancelled at commit", &txError{stageCommit, context.Canceled}, unsafe},
		{"57P01 in fn", &txError{stageFn, pg("57P01")}, safe},
		// After fn ended the transaction itself, a conflict may be a later
		// statement's, its work committed.
		{"40001 after fn ended the transaction", &txError{stageEnded, pg("40001")}, unsafe},
		{"40P01 after fn ended the transaction", &txError{stageEnded, fmt.Errorf("audit: %w", pg("40P01"))}, unsafe},
		{"transient after fn ended the transaction", &txError{stageEnded, retry.Transient(errors.New("x"))}, unsafe},
		// Severity ERROR at COMMIT says the local transaction rolled back,
		// not that nothing committed: postgres_fdw commits its remote
		// transactions before the local one, and reports a remote's failure
		// after an earlier remote committed as an ERROR of the local COMMIT.
		{"57014 ERROR at commit", &txError{stageCommit, sev("57014", "ERROR", "ERROR")}, unsafe},
		{"08006 ERROR at commit", &txError{stageCommit, sev("08006", "ERROR", "ERROR")}, unsafe},
		{"53300 at begin", &txError{stageBegin, pg("53300")}, safe},
		{"57014", pg("57014"), retry.Info{Timeout: true, Fault: retry.FaultServer}},
		{"fn's transient", &txError{stageFn, retry.Transient(errors.New("x"))}, retry.Classify(retry.Transient(errors.New("x")))},
		{"permanent over a conflict", retry.Permanent(pg("40001")), retry.Classify(retry.Permanent(errors.New("x")))},
		{"a give-up of a conflict", &retry.Error{Attempts: 10, Err: &txError{stageFn, pg("40001")}, Reason: retry.ErrMaxAttempts},
			retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"left to the caller", &retry.Error{Attempts: 1, Err: &txError{stageBegin, pg("53300")}, Reason: retry.ErrOuterLoop}, safe},
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
