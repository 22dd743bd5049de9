package sqlretry_test

import (
	"context"
	"testing"
)

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
	return killOnce(pids, func(pid int64) error { return awaitPgSleep(context.Background(), pid, "commit%") })
}

// killOnce terminates the backend whose pid comes first on pids once ready
// returns for it, and then sends the outcome.
func killOnce(pids <-chan int64, ready func(pid int64) error) <-chan error {
	terminated := make(chan error, 1)
	go func() {
		pid := <-pids
		if err := ready(pid); err != nil {
			terminated <- err
			return
		}
		_, err := pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid)
		terminated <- err
	}()
	return terminated
}
