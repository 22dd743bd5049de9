package sqlretry_test

import (
	"context"
	"fmt"
	"time"
)

// awaitPgSleep returns once the backend pid runs pg_sleep in a statement
// whose text matches the ILIKE pattern like, as pg_stat_activity shows it.
// PostgreSQL signals no event for a backend reaching a statement (a NOTIFY
// is delivered only at commit), so it polls, for at most 10 s.
func awaitPgSleep(ctx context.Context, pid int64, like string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid = $1 AND state = 'active' AND query ILIKE $2 AND wait_event = 'PgSleep'`, pid, like).Scan(&n)
		if err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
	}
	return fmt.Errorf("backend %d never reached pg_sleep in a statement like %q", pid, like)
}

// awaitBackendGone waits until pg_stat_activity no longer lists the backend
// pid, after pg_terminate_backend: PostgreSQL signals no event for a
// backend's exit, so it polls, for at most 10 s.
func awaitBackendGone(ctx context.Context, pid int64) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return fmt.Errorf("backend %d still listed 10 s after it was terminated", pid)
}
