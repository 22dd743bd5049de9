package sqlretry_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// TestFnTxKeptAfterTheRunIsClosed: fn code that keeps its tx and uses it
// after PgxTx returned, when the connection is back in its pool and in
// another goroutine's transaction, is refused with pgx.ErrTxClosed, as
// pgx's own transaction is after its Commit, whatever it calls; before, its
// statements ran on the connection, inside the other's transaction.
func TestFnTxKeptAfterTheRunIsClosed(t *testing.T) {
	needServer(t)
	exec(t, "DROP TABLE IF EXISTS fntx_kept", "CREATE TABLE fntx_kept (n int)")
	ctx := context.Background()
	cfg := pool.Config()
	cfg.MaxConns = 1 // the kept tx's connection is the next transaction's
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var kept, keptNested pgx.Tx
	if err := sqlretry.PgxTx(ctx, one, func(ctx context.Context, tx pgx.Tx) error {
		kept = tx
		return pgx.BeginFunc(ctx, tx, func(nested pgx.Tx) error {
			keptNested = nested
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	other, err := one.Begin(ctx) // another's transaction, on the same connection
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	for _, tx := range []pgx.Tx{kept, keptNested} {
		calls := map[string]error{}
		_, calls["Exec"] = tx.Exec(ctx, "INSERT INTO fntx_kept VALUES (1)")
		_, calls["Query"] = tx.Query(ctx, "SELECT 1")
		calls["QueryRow"] = tx.QueryRow(ctx, "SELECT 1").Scan(new(int))
		calls["SendBatch"] = tx.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: "INSERT INTO fntx_kept VALUES (2)"}}}).Close()
		_, calls["CopyFrom"] = tx.CopyFrom(ctx, pgx.Identifier{"fntx_kept"}, []string{"n"}, pgx.CopyFromRows([][]any{{3}}))
		_, calls["Prepare"] = tx.Prepare(ctx, "kept", "SELECT 1")
		_, calls["Begin"] = tx.Begin(ctx)
		calls["Commit"] = tx.Commit(ctx)
		calls["Rollback"] = tx.Rollback(ctx)
		for name, err := range calls {
			if !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("%s on the kept tx: %v, want pgx.ErrTxClosed", name, err)
			}
		}
	}
	var n int
	if err := other.QueryRow(ctx, "SELECT count(*) FROM fntx_kept").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the other transaction sees %d rows (%v), want none of the kept tx's", n, err)
	}
}
