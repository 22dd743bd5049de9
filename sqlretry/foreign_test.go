package sqlretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

// foreignSetup creates two postgres_fdw servers, p_a and p_b, that loop back
// to the test's server, each with a table p_X_remote that the transaction
// writes through the foreign table p_X_ft, and p_every_second(code), a
// trigger function that fails with SQLSTATE code every second time it fires
// (the sequence p_fired counts, outside any transaction). It drops what a
// previous run left.
func foreignSetup(t *testing.T, p string) {
	t.Helper()
	cc := pool.Config().ConnConfig
	needExtension(t, "postgres_fdw")
	for _, s := range []string{p + "_a", p + "_b"} {
		exec(t, "DROP SERVER IF EXISTS "+s+" CASCADE",
			fmt.Sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%d', dbname '%s')",
				s, cc.Host, cc.Port, cc.Database),
			"CREATE USER MAPPING FOR CURRENT_USER SERVER "+s+" OPTIONS (user '"+cc.User+"')",
			"DROP TABLE IF EXISTS "+s+"_remote",
			"CREATE TABLE "+s+"_remote (k int)",
			"CREATE FOREIGN TABLE "+s+"_ft (k int) SERVER "+s+" OPTIONS (table_name '"+s+"_remote')")
	}
	// The remote sessions of postgres_fdw run with search_path pg_catalog:
	// the function names its sequence with its schema.
	exec(t, "DROP SEQUENCE IF EXISTS "+p+"_fired", "CREATE SEQUENCE "+p+"_fired",
		`CREATE OR REPLACE FUNCTION `+p+`_every_second() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('public.`+p+`_fired') % 2 = 0 THEN
				RAISE EXCEPTION 'conflict at COMMIT' USING ERRCODE = TG_ARGV[0];
			END IF;
			RETURN NULL;
		END $$`)
}

// failSecondRemote makes the COMMIT TRANSACTION that postgres_fdw sends
// second, to whichever remote it is, fail with code: a deferred constraint
// trigger on both remote tables fails every second time it fires, and a run
// inserts one row through each. The remote tables are emptied. With
// parallel, postgres_fdw sends both COMMIT TRANSACTIONs before it reads
// either answer (the servers' option parallel_commit, set until t ends;
// PostgreSQL 15 and later, t skips on an older server): one fails, which
// one is a race.
func failSecondRemote(t *testing.T, p, code string, parallel bool) {
	t.Helper()
	if parallel && queryInt(t, "SELECT current_setting('server_version_num')::int") < 150000 {
		t.Skip("postgres_fdw's parallel_commit needs PostgreSQL 15 or later")
	}
	exec(t, "ALTER SEQUENCE "+p+"_fired RESTART")
	for _, s := range []string{p + "_a", p + "_b"} {
		if parallel {
			exec(t, "ALTER SERVER "+s+" OPTIONS (ADD parallel_commit 'true')")
			t.Cleanup(func() { exec(t, "ALTER SERVER "+s+" OPTIONS (DROP parallel_commit)") })
		}
		exec(t, "TRUNCATE "+s+"_remote",
			"DROP TRIGGER IF EXISTS every_second ON "+s+"_remote",
			atCommit("every_second", s+"_remote", p+"_every_second('"+code+"')"))
	}
}

// needExtension creates the extension name (of PostgreSQL's contrib
// modules) if the server has it, and skips t if not, unless
// pgtest.RequireEnv asks for that to fail.
func needExtension(t *testing.T, name string) {
	t.Helper()
	if queryInt(t, "SELECT count(*) FROM pg_available_extensions WHERE name = $1", name) == 0 {
		msg := "the server has no extension " + name + " (PostgreSQL's contrib modules)"
		if pgtest.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	exec(t, "CREATE EXTENSION IF NOT EXISTS "+name)
}

// forForeign runs f as a subtest for each entry point, with two foreign
// servers of its own (foreignSetup) named with the prefix p: the tests'
// names would pass PostgreSQL's limit of 63 bytes.
func forForeign(t *testing.T, f func(t *testing.T, a api, p string)) {
	needServer(t)
	for _, a := range apis() {
		t.Run(a.name, func(t *testing.T) {
			p := fmt.Sprintf("fdw_%d", tables.Add(1))
			foreignSetup(t, p)
			f(t, a, p)
		})
	}
}

// committedRows returns the rows committed on the remotes a and b. With
// parallel_commit, postgres_fdw sends every remote its COMMIT TRANSACTION
// at once and reports the first failure it reads, while another remote's
// COMMIT may still be on its way (or cancelled by the abort): that one is
// waited for, a few seconds at most, before the rows are counted.
func committedRows(t *testing.T, p string, parallel bool) (a, b int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a = queryInt(t, "SELECT count(*) FROM "+p+"_a_remote")
		b = queryInt(t, "SELECT count(*) FROM "+p+"_b_remote")
		if !parallel || a+b > 0 || time.Now().After(deadline) {
			return a, b
		}
	}
}

// atCommit returns the statement that creates the trigger name on table,
// which calls call (a trigger function and its arguments) for each row
// inserted, at COMMIT: a deferred constraint trigger.
func atCommit(name, table, call string) string {
	return "CREATE CONSTRAINT TRIGGER " + name + " AFTER INSERT ON " + table +
		" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + call
}

// pgErrorOf returns the *pgconn.PgError err wraps, or a zero one.
func pgErrorOf(err error) *pgconn.PgError {
	pe := &pgconn.PgError{}
	errors.As(err, &pe)
	return pe
}

// postgres_fdw commits a local transaction's remote transactions one by one
// at the local COMMIT, before the local commit, and reports a remote's failure
// as an error of the local COMMIT, with the remote's SQLSTATE, after the
// remotes before it committed. Here the second remote's COMMIT TRANSACTION
// fails with a conflict (or 55P03, which a strategy of the caller's
// retries), after the first committed its row: that error must not run the
// transaction again, here or in a caller's loop, or the first remote gets
// the row once per run (10 with the default strategy). Which remote commits
// first is postgres_fdw's choice (the order of its connection cache): the
// failure goes to whichever commits second.
func TestConflictRelayedFromARemoteAtCommitIsNotRunAgain(t *testing.T) {
	forForeign(t, func(t *testing.T, a api, p string) {
		type loop func(ctx context.Context, fn func(context.Context, q) error) (outer int, err error)
		alone := func(opts ...sqlretry.Option) loop {
			return func(ctx context.Context, fn func(context.Context, q) error) (int, error) {
				return 1, a.run(ctx, fn, opts...)
			}
		}
		callers := func(ctx context.Context, fn func(context.Context, q) error) (int, error) {
			outer := 0
			err := retry.Do(ctx, &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
				outer++
				return a.run(ctx, fn)
			})
			return outer, err
		}
		for _, c := range []struct {
			name, code string
			parallel   bool
			loop       loop
		}{
			{"40001", "40001", false, alone()},
			{"40P01", "40P01", false, alone()},
			{"55P03_own_strategy", "55P03", false, alone(againAtOnce())},
			{"40001_parallel_commit", "40001", true, alone()},
			{"40001_callers_loop", "40001", false, callers},
			{"55P03_callers_loop", "55P03", false, callers},
		} {
			t.Run(c.name, func(t *testing.T) {
				failSecondRemote(t, p, c.code, c.parallel)
				runs := 0
				outer, err := c.loop(t.Context(), func(ctx context.Context, tx q) error {
					runs++
					return tx.Exec(ctx, "INSERT INTO "+p+"_a_ft VALUES (1); INSERT INTO "+p+"_b_ft VALUES (1)")
				})
				ra, rb := committedRows(t, p, c.parallel)
				if err == nil {
					t.Fatalf("%d runs, rows committed on remote a %d, b %d: no error", runs, ra, rb)
				}
				last := innermost(err)
				pe := pgErrorOf(last)
				t.Logf("%d runs, %d outer attempts, rows committed on remote a %d, b %d; last error %v, classified %+v; "+
					"code %q, routine %q, file %q, where %q", runs, outer, ra, rb, err, sqlretry.Classify(last),
					pe.Code, pe.Routine, pe.File, pe.Where)
				if pe.Code != c.code || !strings.HasPrefix(last.Error(), "sqlretry: commit: ") {
					t.Fatalf("%v; want a %s at COMMIT", err, c.code)
				}
				// With parallel_commit the other remote's COMMIT was sent
				// too, and may have been cancelled with the transaction's
				// abort: 0 or 1, never a row per run.
				if ra+rb > 1 || !c.parallel && ra+rb != 1 {
					t.Fatalf("rows committed on remote a %d, b %d; want 1 in all", ra, rb)
				}
				if runs != 1 || outer != 1 || sqlretry.Classify(last).Safety != retry.Unsafe {
					t.Fatalf("%d runs, %d outer attempts, the COMMIT's error %+v; want 1 run, 1 attempt, Unsafe: "+
						"a remote had committed", runs, outer, sqlretry.Classify(last))
				}
			})
		}
	})
}

// A conflict of the local server at COMMIT, raised by a local deferred
// trigger, in a transaction that also writes through postgres_fdw, is still
// a conflict: the trigger fires before postgres_fdw commits any remote
// transaction, the server rolls back all of them, and the run again commits
// every row once. Its context names the PL/pgSQL function, not a remote.
func TestLocalConflictAtCommitBesideForeignTablesRunsAgain(t *testing.T) {
	forForeign(t, func(t *testing.T, a api, p string) {
		exec(t, "ALTER SEQUENCE "+p+"_fired RESTART", "TRUNCATE "+p+"_a_remote, "+p+"_b_remote",
			"DROP TABLE IF EXISTS "+p+"_local", "CREATE TABLE "+p+"_local (k int)",
			// Fires twice a run, so the first run fails at the second.
			atCommit("every_second", p+"_local", p+"_every_second('40001')"))
		runs := 0
		var failures []string
		err := a.run(t.Context(), func(ctx context.Context, tx q) error {
			runs++
			if runs > 1 {
				return tx.Exec(ctx, "INSERT INTO "+p+"_a_ft VALUES (1); INSERT INTO "+p+"_b_ft VALUES (1); "+
					"INSERT INTO "+p+"_local VALUES (1)")
			}
			return tx.Exec(ctx, "INSERT INTO "+p+"_a_ft VALUES (1); INSERT INTO "+p+"_b_ft VALUES (1); "+
				"INSERT INTO "+p+"_local VALUES (1), (2)")
		}, recordFailures(&failures))
		ra := queryInt(t, "SELECT count(*) FROM "+p+"_a_remote")
		rb := queryInt(t, "SELECT count(*) FROM "+p+"_b_remote")
		local := queryInt(t, "SELECT count(*) FROM "+p+"_local")
		t.Logf("%d runs, failures %q, rows a %d, b %d, local %d", runs, failures, ra, rb, local)
		if err != nil || runs != 2 || ra != 1 || rb != 1 || local != 1 {
			t.Fatalf("%v after %d runs, rows a %d, b %d, local %d; want success after 2, one row each", err, runs, ra, rb, local)
		}
		wantOneConflictAtCommit(t, failures)
	})
}

// A conflict that dblink relays from a remote server at the local COMMIT
// (a deferred trigger runs dblink_exec, and the remote statement fails with
// 40001) is not postgres_fdw's: dblink commits nothing at the local COMMIT,
// and the remote statement that failed committed nothing either. The local
// transaction rolled back, so the run again is right. (Work a trigger or fn
// does through dblink commits on its own, outside the transaction: a misuse,
// like any effect of fn outside it.)
func TestConflictRelayedByDblinkAtCommitRunsAgain(t *testing.T) {
	needServer(t)
	cc := pool.Config().ConnConfig
	needExtension(t, "dblink")
	for _, a := range apis() {
		t.Run(a.name, func(t *testing.T) {
			p := fmt.Sprintf("dblink_%d", tables.Add(1))
			remote := `DO $r$ BEGIN RAISE EXCEPTION 'remote conflict' USING ERRCODE = '40001'; END $r$`
			exec(t, "DROP TABLE IF EXISTS "+p, "CREATE TABLE "+p+" (k int)",
				"DROP SEQUENCE IF EXISTS "+p+"_fired", "CREATE SEQUENCE "+p+"_fired",
				fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s_remote() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('%[1]s_fired') = 1 THEN
						PERFORM dblink_exec('host=%s port=%d dbname=%s user=%s', %s);
					END IF;
					RETURN NULL;
				END $$`, p, cc.Host, cc.Port, cc.Database, cc.User, quote(remote)),
				atCommit("remote", p, p+"_remote()"))
			runs := 0
			var failures []string
			err := a.run(t.Context(), func(ctx context.Context, tx q) error {
				runs++
				return tx.Exec(ctx, "INSERT INTO "+p+" VALUES (1)")
			}, recordFailures(&failures))
			n := queryInt(t, "SELECT count(*) FROM "+p)
			t.Logf("%d runs, failures %q, %d rows", runs, failures, n)
			if err != nil || runs != 2 || n != 1 {
				t.Fatalf("%v after %d runs, %d rows; want success after 2, one row", err, runs, n)
			}
			wantOneConflictAtCommit(t, failures)
		})
	}
}

// recordFailures records each failed run's error in list: its SQLSTATE,
// whether it is COMMIT's, and the routine and context of the server's error.
func recordFailures(list *[]string) sqlretry.Option {
	return sqlretry.WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
		pe := pgErrorOf(err)
		*list = append(*list, fmt.Sprintf("%s at commit %t, routine %q, where %q",
			pe.Code, strings.HasPrefix(err.Error(), "sqlretry: commit: "), pe.Routine, pe.Where))
	}))
}

// wantOneConflictAtCommit fails t unless failures, of recordFailures, is one
// 40001 at COMMIT.
func wantOneConflictAtCommit(t *testing.T, failures []string) {
	t.Helper()
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "40001 at commit true") {
		t.Fatalf("failures %q; want one 40001 at COMMIT", failures)
	}
}

// quote returns s as a SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// innermost returns the last error of the innermost loop whose give-up err
// is.
func innermost(err error) error {
	for {
		var re *retry.Error
		if !errors.As(err, &re) {
			return err
		}
		err = re.Err
	}
}

// A SERIALIZABLE transaction that writes through postgres_fdw and fails
// PostgreSQL's serialization check at COMMIT failed after its remote part
// committed: postgres_fdw commits remote transactions as COMMIT begins, and
// the local check (PreCommit_CheckForSerializationFailure, a local routine,
// so nothing shows the remote part) comes after. WithForeignWrites keeps it
// from running again; without it the remote row was committed once per run.
// T, the pivot, reads x and writes y; T_in reads the y T writes and stays
// open; T_out writes the x T read and commits, which dooms T at its COMMIT.
func TestForeignWritesSerializationFailureAtCommitIsNotRunAgain(t *testing.T) {
	forForeign(t, func(t *testing.T, a api, p string) {
		exec(t, "TRUNCATE "+p+"_a_remote",
			"DROP TABLE IF EXISTS "+p+"_x, "+p+"_y",
			"CREATE TABLE "+p+"_x (k int)", "CREATE TABLE "+p+"_y (k int)",
			"INSERT INTO "+p+"_x VALUES (1)", "INSERT INTO "+p+"_y VALUES (1)")
		ctx := t.Context()
		tin, err := pool.Acquire(ctx) // T_in: reads y, stays open
		if err != nil {
			t.Fatal(err)
		}
		defer tin.Release()
		defer tin.Exec(context.Background(), "ROLLBACK")
		runs := 0
		var failures []string
		err = a.run(ctx, func(ctx context.Context, tx q) error {
			runs++
			if _, err := tx.Int(ctx, "SELECT count(*) FROM "+p+"_x"); err != nil { // T reads x
				return err
			}
			if err := tx.Exec(ctx, "UPDATE "+p+"_y SET k = k + 1"); err != nil { // T writes y
				return err
			}
			if err := tx.Exec(ctx, "INSERT INTO "+p+"_a_ft VALUES (1)"); err != nil { // the remote part
				return err
			}
			if runs > 1 {
				return nil
			}
			// T_in →rw→ T: T_in reads the y that T wrote, and stays open.
			if _, err := tin.Exec(ctx, "BEGIN ISOLATION LEVEL SERIALIZABLE"); err != nil {
				return err
			}
			if _, err := tin.Exec(ctx, "SELECT count(*) FROM "+p+"_y"); err != nil {
				return err
			}
			// T →rw→ T_out: T_out writes the x that T read, and commits,
			// which dooms T, the pivot.
			if _, err := pool.Exec(ctx, "BEGIN ISOLATION LEVEL SERIALIZABLE; UPDATE "+p+"_x SET k = k + 1; COMMIT"); err != nil {
				return err
			}
			return nil
		}, a.iso("serializable"), recordFailures(&failures), sqlretry.WithForeignWrites())
		ra := queryInt(t, "SELECT count(*) FROM "+p+"_a_remote")
		if len(failures) != 1 || !strings.HasPrefix(failures[0], "40001 at commit true, routine \"PreCommit_CheckForSerializationFailure\"") {
			t.Fatalf("failures %q; want one local serialization failure at COMMIT", failures)
		}
		if runs != 1 || ra != 1 || !errors.Is(err, retry.ErrNotRetryable) {
			t.Fatalf("%d runs, the remote part committed %d times, err %v; want 1 run, the remote part once, and the failure", runs, ra, err)
		}
	})
}
