package sqlretry_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// Inside an outer retry.Do, whose attempts are marked, the transaction still
// retries its own conflicts, and the caller's loop sees one call that
// committed once.
func TestOneLayerConflicts(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		var runs atomic.Int64
		fn := conflictEveryRun(t, table, &runs)
		outer := 0
		err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
			outer++
			if !retry.CallerRetries(ctx) {
				t.Fatal("the outer loop did not mark its attempt")
			}
			first := true
			return a.run(ctx, func(ctx context.Context, tx q) error {
				if first { // one real conflict, then a clean run
					first = false
					return fn(ctx, tx)
				}
				runs.Add(1)
				return tx.Exec(ctx, "UPDATE "+table+" SET n = n + 100 WHERE id = 1")
			}, a.iso("repeatable read"))
		})
		if err != nil || outer != 1 || runs.Load() != 2 {
			t.Fatalf("%v, outer attempts %d, runs %d; want nil, 1, 2", err, outer, runs.Load())
		}
		if n := queryInt(t, "SELECT n FROM "+table+" WHERE id = 1"); n != 101 {
			t.Fatalf("n = %d, want 101: one update of the other connection, one commit", n)
		}

		// A transaction that conflicts every time gives up after its own
		// attempts, and the caller's loop does not multiply them.
		runs.Store(0)
		outer = 0
		err = retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
			outer++
			return a.run(ctx, fn, a.iso("repeatable read"),
				sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 4, Backoff: retry.Constant(0)}))
		})
		if err == nil || outer != 1 || runs.Load() != 4 {
			t.Fatalf("%v, outer attempts %d, runs %d; want an error, 1, 4", err, outer, runs.Load())
		}
	})
}

// A failure other than a conflict that may be retried (here a refused
// connection at BEGIN) is left to a caller that retries: one attempt per
// call, the caller's loop retries. Without such a caller the default
// strategy does not retry it; a strategy of one's own does.
func TestOneLayerOtherFailures(t *testing.T) {
	nowhere := "host=" + filepath.Join(t.TempDir(), "none") + " user=postgres dbname=postgres sslmode=disable"
	db, err := sql.Open("pgx", nowhere)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	down, err := pgxpool.New(context.Background(), nowhere)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	runs := func(ctx context.Context, name string, opts ...sqlretry.Option) (int, error) {
		var err error
		switch name {
		case "Tx":
			err = sqlretry.Tx(ctx, db, func(context.Context, *sql.Tx) error { return nil }, opts...)
		default:
			err = sqlretry.PgxTx(ctx, down, func(context.Context, pgx.Tx) error { return nil }, opts...)
		}
		var re *retry.Error
		if !errors.As(err, &re) {
			t.Fatalf("%s: %v, want a *retry.Error", name, err)
		}
		return re.Attempts, err
	}
	for _, name := range []string{"Tx", "PgxTx"} {
		t.Run(name, func(t *testing.T) {
			if n, err := runs(t.Context(), name); n != 1 || !errors.Is(err, retry.ErrNotRetryable) {
				t.Errorf("default, no caller's loop: %d attempts, %v; want 1, not retryable", n, err)
			}
			if sqlretry.Classify(err).Safety == retry.Unsafe {
				t.Errorf("a refused connection at BEGIN classified Unsafe")
			}
			if n, _ := runs(t.Context(), name, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)})); n != 3 {
				t.Errorf("own strategy: %d attempts, want 3", n)
			}
			outer, inner := 0, 0
			_ = retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
				outer++
				n, err := runs(ctx, name, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}))
				inner += n
				return err
			})
			if outer != 3 || inner != 3 {
				t.Errorf("inside a caller's loop: %d outer attempts, %d in all; want 3 and 3, not 9", outer, inner)
			}
		})
	}
}
