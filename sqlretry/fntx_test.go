package sqlretry_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// TestFnTxThroughPgxHelpers: fn's tx, now a wrapper, works with what pgx
// offers a pgx.Tx: BeginFunc's savepoints (whose Commit and Rollback are
// the nested transaction's, not fn's end), CopyFrom, SendBatch and
// LargeObjects; and a conflict after a nested transaction still runs again.
func TestFnTxThroughPgxHelpers(t *testing.T) {
	needServer(t)
	exec(t, "DROP TABLE IF EXISTS fntx_rows", "CREATE TABLE fntx_rows (n int)")
	ctx := context.Background()
	runs := 0
	conflict := retry.Transient(errors.New("a conflict"))
	err := sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, "DELETE FROM fntx_rows"); err != nil {
			return err
		}
		if err := pgx.BeginFunc(ctx, tx, func(nested pgx.Tx) error {
			_, err := nested.Exec(ctx, "INSERT INTO fntx_rows VALUES (1)")
			return err
		}); err != nil {
			return err
		}
		_ = pgx.BeginFunc(ctx, tx, func(nested pgx.Tx) error {
			_, _ = nested.Exec(ctx, "INSERT INTO fntx_rows VALUES (100)")
			return errors.New("rolled back to its savepoint")
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"fntx_rows"}, []string{"n"}, pgx.CopyFromRows([][]any{{2}, {3}})); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue("INSERT INTO fntx_rows VALUES (4)")
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		lo := tx.LargeObjects()
		oid, err := lo.Create(ctx, 0)
		if err != nil {
			return err
		}
		if err := lo.Unlink(ctx, oid); err != nil {
			return err
		}
		if runs == 1 {
			return conflict // with a strategy of the caller's: run again
		}
		return nil
	}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}))
	if err != nil || runs != 2 {
		t.Fatalf("%v after %d runs, want success after 2", err, runs)
	}
	var sum int
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM fntx_rows").Scan(&sum); err != nil || sum != 10 {
		t.Errorf("sum %d (%v), want 10", sum, err)
	}
}

// TestFnCommitsFromAnotherGoroutine: fn's Commit from a goroutine it
// waits for is seen (no race, -race), and the run is not run again.
func TestFnCommitsFromAnotherGoroutine(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	p := poolOfOne(t)
	failed := retry.Transient(errors.New("after the commit"))
	var other sync.WaitGroup
	defer other.Wait()
	for range 50 {
		runs := 0
		err := sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error {
			runs++
			var wg sync.WaitGroup
			wg.Go(func() { _ = tx.Commit(ctx) })
			wg.Wait()
			// The pool's connection, given back by Commit, is another's.
			other.Go(func() { _, _ = p.Exec(ctx, "SELECT 1") })
			return failed
		}, againAtOnce())
		if !errors.Is(err, failed) || runs != 1 {
			t.Fatalf("%v after %d runs, want fn's error after 1", err, runs)
		}
	}
}
