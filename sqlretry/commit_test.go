package sqlretry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// A connection lost during COMMIT leaves the transaction's outcome unknown,
// so it is not run again, not by Tx and not by a loop around it. To lose it
// at the right moment, COMMIT runs a deferred constraint trigger that sleeps,
// and another connection terminates the backend (pg_terminate_backend) once
// pg_stat_activity shows it in that COMMIT.
func TestLostConnectionAtCommit(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		slowCommitTable(t, table, "k int PRIMARY KEY")
		pids := make(chan int64, 10)
		terminated := killInCommit(pids)
		outer := 0
		runs := 0
		err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
			outer++
			return a.run(ctx, func(ctx context.Context, tx q) error {
				runs++
				pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
				if err != nil {
					return err
				}
				pids <- pid
				return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
			}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 5, Backoff: retry.Constant(0)}))
		})
		if err := <-terminated; err != nil {
			t.Fatal(err)
		}
		t.Logf("%v", err)
		if err == nil || outer != 1 || runs != 1 {
			t.Fatalf("outer attempts %d, runs %d, %v; want 1, 1, an error", outer, runs, err)
		}
		var inner *retry.Error
		if !errors.As(err.(*retry.Error).Err, &inner) || !errors.Is(inner.Reason, retry.ErrNotRetryable) ||
			sqlretry.Classify(inner.Err).Safety != retry.Unsafe {
			t.Fatalf("the transaction's give-up: %#v; want not retryable, the COMMIT's error Unsafe", inner)
		}
	})
}

// slowCommitTable creates table with columns, and a deferred constraint
// trigger that sleeps 5 s in the COMMIT of a transaction that inserted in it.
func slowCommitTable(t *testing.T, table, columns string) {
	exec(t, "DROP TABLE IF EXISTS "+table,
		"CREATE TABLE "+table+" ("+columns+")",
		`CREATE OR REPLACE FUNCTION `+table+`_slow() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(5); RETURN NULL; END $$`,
		"CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON "+table+
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "+table+"_slow()")
}

// killInCommit terminates the backend whose pid comes first on pids once
// pg_stat_activity shows it in that COMMIT, and then sends the outcome.
func killInCommit(pids <-chan int64) <-chan error {
	terminated := make(chan error, 1)
	go func() {
		pid := <-pids
		if err := awaitPgSleep(context.Background(), pid, "commit%"); err != nil {
			terminated <- err
			return
		}
		_, err := pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid)
		terminated <- err
	}()
	return terminated
}
