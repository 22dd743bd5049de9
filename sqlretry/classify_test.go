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
	safe := retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	unsafe := retry.Info{Safety: retry.Unsafe}
	client := retry.Info{Fault: retry.FaultClient}
	safeTimeout := retry.Info{Safety: retry.Safe, Timeout: true, Fault: retry.FaultServer}
	timeout := retry.Info{Timeout: true, Fault: retry.FaultServer}
	sev := func(code, severity, unlocalized string) error {
		return &pgconn.PgError{Code: code, Severity: severity, SeverityUnlocalized: unlocalized}
	}
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
		// Severity ERROR at COMMIT says the local transaction rolled back,
		// not that nothing committed: postgres_fdw commits its remote
		// transactions before the local one, and reports a remote's failure
		// after an earlier remote committed as an ERROR of the local COMMIT.
		{"57014 ERROR at commit", &txError{stage: stageCommit, err: sev("57014", "ERROR", "ERROR")}, unsafe},
		{"08006 ERROR at commit", &txError{stage: stageCommit, err: sev("08006", "ERROR", "ERROR")}, unsafe},
		{"53300 at begin", &txError{stage: stageBegin, err: pg("53300")}, safe},
		{"57014", pg("57014"), timeout},
		{"fn's transient", &txError{stage: stageFn, err: retry.Transient(errors.New("x"))}, retry.Classify(retry.Transient(errors.New("x")))},
		{"permanent over a conflict", retry.Permanent(pg("40001")), retry.Classify(retry.Permanent(errors.New("x")))},
		{"a give-up of a conflict", &retry.Error{Attempts: 10, Err: &txError{stage: stageFn, err: pg("40001")}, Reason: retry.ErrMaxAttempts},
			retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}},
		{"left to the caller", &retry.Error{Attempts: 1, Err: &txError{stage: stageBegin, err: pg("53300")}, Reason: retry.ErrOuterLoop}, safe},
		// PgxTx's run cut short in fn by retry.AttemptTimeout (cut) committed
		// nothing; without cut (Tx, or the caller's context) it is the
		// context's, or a 57014's, as anywhere.
		{"deadline in a cut run", &txError{stage: stageFn, err: fmt.Errorf("query: %w", context.DeadlineExceeded), cut: true}, safeTimeout},
		{"cancelled in a cut run", &txError{stage: stageFn, err: context.Canceled, cut: true}, safeTimeout},
		{"57014 in a cut run", &txError{stage: stageFn, err: pg("57014"), cut: true}, safeTimeout},
		{"deadline in a cut run, left to the caller", &retry.Error{Attempts: 1, Err: &txError{stage: stageFn, err: context.DeadlineExceeded, cut: true}, Reason: retry.ErrOuterLoop}, safeTimeout},
		{"deadline in fn, not cut", &txError{stage: stageFn, err: context.DeadlineExceeded}, retry.Classify(context.DeadlineExceeded)},
		{"57014 in fn, not cut", &txError{stage: stageFn, err: pg("57014")}, timeout},
		{"fn's own error in a cut run", &txError{stage: stageFn, err: errors.New("x"), cut: true}, retry.Info{}},
		{"23505 in a cut run", &txError{stage: stageFn, err: pg("23505"), cut: true}, client},
		{"permanent over the deadline in a cut run", &txError{stage: stageFn, err: retry.Permanent(context.DeadlineExceeded), cut: true},
			retry.Classify(retry.Permanent(context.DeadlineExceeded))},
		{"cut, but not in fn", &txError{stage: stageEnded, err: context.DeadlineExceeded, cut: true}, unsafe},
		{"a give-up of a cut run", &retry.Error{Attempts: 1, Err: &txError{stage: stageFn, err: context.DeadlineExceeded, cut: true}, Reason: retry.ErrNotRetryable},
			retry.Info{Safety: retry.Unsafe, Timeout: true, Fault: retry.FaultServer}},
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
