package sqlretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// attemptTimeout is the retry.AttemptTimeout of these tests: far shorter
// than the first run's pg_sleep(10).
const attemptTimeout = 200 * time.Millisecond

// slowFirstRun is an fn whose first run waits on the server for 10 s, longer
// than the attempt may last, before it inserts a row, as every run does. It
// ends the first run's backend when the test ends: with pgx's default
// handling of a context's end the connection is closed, and the server
// notices only when the sleep is over.
func slowFirstRun(t *testing.T, table string, runs *int) func(ctx context.Context, tx q) error {
	return func(ctx context.Context, tx q) error {
		if *runs++; *runs == 1 {
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			t.Cleanup(func() { exec(t, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)) })
			if err := tx.Exec(ctx, "SELECT pg_sleep(10)"); err != nil {
				return err
			}
		}
		return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
	}
}

// loop is a way of calling Tx or PgxTx, through a, that may run fn again.
type loop struct {
	name string
	run  func(ctx context.Context, a api, fn func(context.Context, q) error) (outer int, err error)
}

// timedLoops returns the two ways of running a transaction again, each run
// bounded by retry.AttemptTimeout(d): a strategy of its own, and the
// caller's loop around the default one. outer counts the caller's attempts.
func timedLoops(d time.Duration) []loop {
	strategy := func() retry.Strategy { return &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)} }
	return []loop{
		{"own_strategy", func(ctx context.Context, a api, fn func(context.Context, q) error) (int, error) {
			return 1, a.run(ctx, fn, sqlretry.WithStrategy(strategy()), sqlretry.WithRetryOptions(retry.AttemptTimeout(d)))
		}},
		{"callers_loop", func(ctx context.Context, a api, fn func(context.Context, q) error) (int, error) {
			outer := 0
			err := retry.Do(ctx, strategy(), func(ctx context.Context) error {
				outer++
				return a.run(ctx, fn, sqlretry.WithRetryOptions(retry.AttemptTimeout(d)))
			})
			return outer, err
		}},
	}
}

// A run of PgxTx cut short in fn by retry.AttemptTimeout committed nothing:
// pgx had not seen the transaction end when PgxTx rolled it back. It is a
// server timeout, Safe, which a strategy of one's own runs again, and which
// PgxTx's default strategy leaves to the caller's loop. Tx cannot tell it
// from an fn that committed itself (database/sql rolls back on its own when
// the context ends, and its Rollback then reports sql.ErrTxDone, as after
// fn's COMMIT), so its run stays the context's error, Unsafe, run once.
func TestAttemptTimeoutInFn(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		for _, l := range timedLoops(attemptTimeout) {
			t.Run(l.name, func(t *testing.T) {
				table := table + "_" + l.name
				exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
				runs := 0
				outer, err := l.run(t.Context(), a, slowFirstRun(t, table, &runs))
				rows := queryInt(t, "SELECT count(*) FROM "+table)
				switch a.name {
				case "PgxTx":
					wantOuter := map[string]int{"own_strategy": 1, "callers_loop": 2}[l.name]
					if err != nil || runs != 2 || outer != wantOuter || rows != 1 {
						t.Fatalf("%d runs, %d of the caller's attempts, %d rows, %v; want 2 runs, %d attempts, 1 row, success: a run cut short in fn committed nothing",
							runs, outer, rows, err, wantOuter)
					}
				case "Tx":
					// database/sql's own rollback on the ended context hides
					// whether fn committed: the run is not run again.
					if err == nil || runs != 1 || outer != 1 || rows != 0 || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("%d runs, %d of the caller's attempts, %d rows, %v; want one run, not retried, context.DeadlineExceeded",
							runs, outer, rows, err)
					}
					if info := retry.Classify(err); info.Safety != retry.Unsafe {
						t.Fatalf("classified %+v, want Unsafe: Tx cannot tell that nothing committed", info)
					}
				}
			})
		}
	})
}

// With pgx's cancel request on a context's end (pgconn's
// CancelRequestContextWatcherHandler) the server may answer the cut
// statement with 57014 query_canceled: the run committed nothing all the
// same, and is Safe to run again, not merely a server timeout of unknown
// safety, as a 57014 is where nothing says the transaction was still open.
func TestAttemptTimeoutInFnCancelRequest(t *testing.T) {
	needServer(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
	}
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	table := "attempt_timeout_cancel_request"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	runs := 0
	var (
		first   error // the first run's statement's error
		retried error // the error the loop retried
	)
	slow := slowFirstRun(t, table, &runs)
	err = sqlretry.PgxTx(t.Context(), p, func(ctx context.Context, tx pgx.Tx) error {
		err := slow(ctx, pgxQ{tx})
		if runs == 1 {
			first = err
		}
		return err
	}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}),
		sqlretry.WithRetryOptions(retry.AttemptTimeout(attemptTimeout),
			retry.OnRetry(func(_ context.Context, _ int, _ time.Duration, err error) { retried = err })))
	if rows := queryInt(t, "SELECT count(*) FROM "+table); err != nil || runs != 2 || rows != 1 {
		t.Fatalf("%d runs, %d rows, %v (the first run's error: %v); want 2 runs, 1 row, success", runs, rows, err, first)
	}
	want := retry.Info{Safety: retry.Safe, Timeout: true, Fault: retry.FaultServer}
	if got := sqlretry.Classify(retried); got != want {
		t.Fatalf("the cut run's error %v classified %+v, want %+v", retried, got, want)
	}
	t.Logf("the first run's error: %v (57014: %v)", first, isCode(first, "57014"))
}

// The caller's own context ending during fn is the caller giving up: the
// transaction is not run again, by a strategy of its own or by the caller's
// loop, and its error says so, PgxTx's as Tx's.
func TestCallersDeadlineInFnIsNotRetried(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		for _, l := range timedLoops(5 * time.Second) {
			t.Run(l.name, func(t *testing.T) {
				table := table + "_" + l.name
				exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
				ctx, cancel := context.WithTimeout(t.Context(), attemptTimeout)
				defer cancel()
				runs := 0
				outer, err := l.run(ctx, a, slowFirstRun(t, table, &runs))
				rows := queryInt(t, "SELECT count(*) FROM "+table)
				if err == nil || runs != 1 || outer != 1 || rows != 0 || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%d runs, %d of the caller's attempts, %d rows, %v; want one run, not retried, context.DeadlineExceeded",
						runs, outer, rows, err)
				}
				// The transaction's give-up, under the caller's if any.
				var re *retry.Error
				if !errors.As(err, &re) {
					t.Fatalf("err %v, want a *retry.Error", err)
				}
				for {
					var inner *retry.Error
					if !errors.As(re.Err, &inner) {
						break
					}
					re = inner
				}
				if got, want := sqlretry.Classify(re.Err), (retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}); got != want {
					t.Fatalf("the run classified %+v, want %+v: the caller gave up", got, want)
				}
			})
		}
	})
}

// An fn that commits the transaction itself with a COMMIT statement (not
// tx.Commit, so pgx does not know) and is then cut short by
// retry.AttemptTimeout committed: PgxTx asks the connection whether a
// transaction was still in progress, and does not run it again.
func TestFnThatCommitsItselfByStatementThenTimesOutIsNotRunAgain(t *testing.T) {
	needServer(t)
	table := "commit_by_statement_then_timeout"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	runs := 0
	err := sqlretry.PgxTx(t.Context(), pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "COMMIT"); err != nil {
			return err
		}
		if runs > 1 {
			return nil
		}
		pid, err := pgxQ{tx}.Int(ctx, "SELECT pg_backend_pid()")
		if err != nil {
			return err
		}
		t.Cleanup(func() { exec(t, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)) })
		_, err = tx.Exec(ctx, "SELECT pg_sleep(10)")
		return err
	}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}),
		sqlretry.WithRetryOptions(retry.AttemptTimeout(attemptTimeout)))
	if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != 1 {
		t.Fatalf("%d runs, %d rows committed (err %v): want 1 run", runs, n, err)
	}
}
