package sqlretry_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// fnCommits is a run of fn through a that commits the transaction itself, as
// code moved over from hand-written transactions often still does, after
// sending its pid to pids on the first run.
func fnCommits(a api, table string, pids chan<- int64, runs *int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return a.run(ctx, func(ctx context.Context, tx q) error {
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
				return err
			}
			if *runs++; *runs == 1 {
				pids <- pid
			}
			return tx.Commit(ctx)
		})
	}
}

// An fn that commits the transaction itself, and returns the error of a
// COMMIT whose outcome is unknown (its connection killed while a deferred
// trigger ran), may have committed: the caller's loop must not run it again.
func TestFnThatCommitsItselfIsNotRunAgain(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		slowCommitTable(t, table, "k int")
		pids := make(chan int64, 1)
		killed := killInCommit(pids)
		attempts, runs := 0, 0
		run := fnCommits(a, table, pids, &runs)
		err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
			attempts++
			return run(ctx)
		})
		if err := <-killed; err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || runs != 1 || err == nil {
			t.Fatalf("the caller's loop made %d attempts, fn %d runs (err %v): a COMMIT of unknown outcome was run again", attempts, runs, err)
		}
		var re *retry.Error
		if !errors.As(err, &re) || sqlretry.Classify(re.Err).Safety != retry.Unsafe {
			t.Fatalf("err %v: want the transaction's give-up, Unsafe", err)
		}
	})
}

// A COMMIT that the server answers with ROLLBACK (fn swallowed the conflict
// that aborted the transaction, and returned nil) committed nothing: it is
// not an unknown outcome, and is not run again.
func TestCommitAnsweredWithRollbackCommittedNothing(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
		runs := 0
		err := a.run(t.Context(), func(ctx context.Context, tx q) error {
			runs++
			if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
				return err
			}
			_ = tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$") // swallowed
			return nil
		})
		var re *retry.Error
		if !errors.As(err, &re) || !errors.Is(err, pgx.ErrTxCommitRollback) {
			t.Fatalf("err %v: want the give-up of a COMMIT answered with ROLLBACK", err)
		}
		if info := sqlretry.Classify(re.Err); info.Safety == retry.Unsafe || info.Retryable() {
			t.Fatalf("classified %+v: nothing committed, so not Unsafe, and fn's hidden error is not retried", info)
		}
		if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != 0 {
			t.Fatalf("%d runs, %d rows: want one run, nothing committed", runs, n)
		}
	})
}

// A pooled connection the server closed (a restart, a failover, a proxy's
// idle cut) fails at BEGIN without sending anything: nothing began, so the
// caller's loop, or a strategy of one's own, runs the transaction again.
func TestStaleConnectionAtBeginIsRetried(t *testing.T) {
	needServer(t)
	p, err := pgxpool.New(t.Context(), dsn+" pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// stale kills the pool's one connection, idle in the pool.
	stale := func() {
		var pid int64
		if err := p.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		exec(t, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
		if err := awaitBackendGone(t.Context(), pid); err != nil {
			t.Fatal(err)
		}
	}
	fn := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	}

	stale()
	attempts := 0
	err = retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
		attempts++
		return sqlretry.PgxTx(ctx, p, fn)
	})
	if err != nil || attempts != 2 {
		t.Fatalf("the caller's loop: %v after %d attempts, want success on the second", err, attempts)
	}

	stale()
	if err := sqlretry.PgxTx(t.Context(), p, fn, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)})); err != nil {
		t.Fatalf("a strategy of one's own: %v, want success on the second run", err)
	}
}

// The rollback after fn fails keeps the caller's deadline: a server that
// does not answer (its backend stopped) holds the call no longer than the
// caller allows, not for the rollback's own bound (5 s).
func TestRollbackKeepsTheCallersDeadline(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		var pid int64
		defer func() {
			if pid != 0 {
				_ = syscall.Kill(int(pid), syscall.SIGCONT)
			}
		}()
		start := time.Now()
		err := a.run(ctx, func(ctx context.Context, tx q) error {
			var err error
			if pid, err = tx.Int(ctx, "SELECT pg_backend_pid()"); err != nil {
				return err
			}
			if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
				return err
			}
			return errors.New("insufficient funds")
		})
		if waited := time.Since(start); waited > 3*time.Second || err == nil {
			t.Fatalf("returned %v after the call began, with a 500 ms deadline (err %v)", waited, err)
		}
	})
}

// Missing arguments are a give-up with a clear reason, not a panic.
func TestNoDatabaseOrFunction(t *testing.T) {
	ctx := t.Context()
	sqlFn := func(context.Context, *sql.Tx) error { return nil }
	pgxFn := func(context.Context, pgx.Tx) error { return nil }
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"Tx without a database", sqlretry.Tx(ctx, nil, sqlFn), sqlretry.ErrNoDatabase},
		{"Tx without fn", sqlretry.Tx(ctx, sqlDB, nil), retry.ErrNilOperation},
		{"PgxTx without a database", sqlretry.PgxTx(ctx, nil, pgxFn), sqlretry.ErrNoDatabase},
		{"PgxTx with a nil pool", sqlretry.PgxTx(ctx, (*pgxpool.Pool)(nil), pgxFn), sqlretry.ErrNoDatabase},
		{"PgxTx with a nil conn", sqlretry.PgxTx(ctx, (*pgx.Conn)(nil), pgxFn), sqlretry.ErrNoDatabase},
		{"PgxTx without fn", sqlretry.PgxTx(ctx, pool, nil), retry.ErrNilOperation},
	} {
		var re *retry.Error
		if !errors.As(tt.err, &re) || !errors.Is(tt.err, tt.want) || re.Attempts > 1 {
			t.Errorf("%s: %v, want a *retry.Error for %v", tt.name, tt.err, tt.want)
		}
	}
}

// An fn that commits the transaction itself and then fails, with an error
// marked Transient (a notification sent after the COMMIT, say), committed:
// its mark does not make it run again.
func TestFnThatCommitsItselfThenFailsIsNotRunAgain(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
		runs := 0
		fn := func(ctx context.Context) error {
			return a.run(ctx, func(ctx context.Context, tx q) error {
				runs++
				if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
				return retry.Transient(errors.New("notify: 503"))
			})
		}
		err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, fn)
		if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != 1 {
			t.Fatalf("%d runs, %d rows committed (err %v): want 1 run", runs, n, err)
		}
	})
}

// An fn that commits the transaction itself and then runs out of time (its
// last statement, on a pooled connection, reports that nothing was sent)
// committed: neither the deadline nor the driver's "nothing sent" makes it
// run again, although database/sql's own rollback on the ended context hides
// that fn ended the transaction.
func TestFnThatCommitsItselfThenTimesOutIsNotRunAgain(t *testing.T) {
	needServer(t)
	table := "commit_then_timeout"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	runs := 0
	err := sqlretry.Tx(t.Context(), sqlDB, func(ctx context.Context, tx *sql.Tx) error {
		runs++
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		<-ctx.Done()
		_, err = c.Exec(ctx, "SELECT 1") // e.g. an audit row on a pooled conn
		return err
	}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}),
		sqlretry.WithRetryOptions(retry.AttemptTimeout(300*time.Millisecond)))
	if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != 1 {
		t.Fatalf("%d runs, %d rows committed (err %v): want 1 run", runs, n, err)
	}
}

// A statement of fn on a context the caller cancelled is the caller's giving
// up, as retry.Classify has it, not a failure nothing of which reached the
// server (pgconn's SafeToRetry): "nothing sent" counts only at BEGIN.
func TestCancelledContextInFnIsTheCallers(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		cancel()
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Fatalf("err %v, want the transaction's give-up", err)
	}
	if got, want := sqlretry.Classify(re.Err), (retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}); got != want {
		t.Fatalf("a statement on a cancelled context classified %+v, want %+v (the caller gave up), though pgx says nothing was sent", got, want)
	}
}
