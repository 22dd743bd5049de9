package sqlretry_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// needSyncStandby skips t unless the server names a synchronous standby
// (serverSettings: one that never connects), so that a transaction that
// sets synchronous_commit = on commits locally and then waits in COMMIT for
// an acknowledgement that never comes. The other transactions of the tests
// run with the cluster's synchronous_commit = off, and do not wait.
func needSyncStandby(t *testing.T) {
	t.Helper()
	needServer(t)
	var names string
	if err := pool.QueryRow(t.Context(), "SHOW synchronous_standby_names").Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names == "" {
		t.Skip("the server names no synchronous standby (synchronous_standby_names), as the tests' own cluster does")
	}
}

// awaitWaitEvent returns once pg_stat_activity shows the backend pid waiting
// on event (SyncRep: for a synchronous standby in COMMIT). It polls, for at
// most 10 s, as awaitPgSleep does.
func awaitWaitEvent(ctx context.Context, pid int64, event string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = $2",
			pid, event).Scan(&n); err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
	}
	return fmt.Errorf("backend %d never waited on %s", pid, event)
}

// killInSyncRep terminates the backend whose pid comes first on pids once
// it waits for the synchronous standby in COMMIT, its transaction committed
// locally, and then sends the outcome.
func killInSyncRep(pids <-chan int64) <-chan error {
	return killOnce(pids, func(pid int64) error { return awaitWaitEvent(context.Background(), pid, "SyncRep") })
}

// endSyncRepWaits terminates the backends still waiting for the standby,
// left by a test whose client gave up their COMMIT: they wait for good.
func endSyncRepWaits(t *testing.T) {
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	})
}

// accounts creates table with two accounts of 100 and a log of transfers.
func accounts(t *testing.T, table string) {
	exec(t, "DROP TABLE IF EXISTS "+table, "DROP TABLE IF EXISTS "+table+"_log",
		"CREATE TABLE "+table+" (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO "+table+" VALUES (1, 100), (2, 100)",
		"CREATE TABLE "+table+"_log (transfer int NOT NULL)")
}

// transfer moves 10 from account 1 to 2 and logs the transfer id, after
// sending its backend's pid to pids; syncRep makes its COMMIT wait for the
// standby that never comes.
func transfer(table string, id int, syncRep bool, pids chan<- int64, runs *int) func(context.Context, q) error {
	return func(ctx context.Context, tx q) error {
		*runs++
		pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
		if err != nil {
			return err
		}
		if syncRep {
			if err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
				return err
			}
		}
		if err := tx.Exec(ctx, "UPDATE "+table+" SET balance = balance - 10 WHERE id = 1"); err != nil {
			return err
		}
		if err := tx.Exec(ctx, "UPDATE "+table+" SET balance = balance + 10 WHERE id = 2"); err != nil {
			return err
		}
		if err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s_log VALUES (%d)", table, id)); err != nil {
			return err
		}
		if pids != nil {
			pids <- pid
		}
		return nil
	}
}

// resolutions records what OnResolved reports.
type resolutions struct {
	mu   sync.Mutex
	list []string
}

func (r *resolutions) option() sqlretry.Option {
	return sqlretry.OnResolved(func(_ context.Context, xid uint64, committed bool, cause error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.list = append(r.list, fmt.Sprintf("xid>0:%v committed:%v cause:%v", xid > 0, committed, cause != nil))
	})
}

// attemptsSeen is a retry.Trace that records each attempt's error.
type attemptsSeen struct {
	mu   sync.Mutex
	errs []error
	done error
}

func (a *attemptsSeen) option() sqlretry.Option {
	return sqlretry.WithRetryOptions(retry.WithTrace(&retry.Trace{
		AttemptDone: func(_ context.Context, _ string, _ int, err error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.errs = append(a.errs, err)
		},
		Done: func(_ context.Context, _ string, _ int, _ time.Duration, err error) { a.done = err },
	}))
}

// A COMMIT that committed locally and waits for a synchronous standby, whose
// backend is then terminated, loses its answer after the transaction
// committed: pg_xact_status on another connection says so, and the call
// succeeds without running fn again; OnResolved and the Trace see it. Before,
// the call gave up, and a caller that took the give-up for a failure would
// transfer again.
func TestLostCommitThatCommittedIsNotRunAgain(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	forAPIs(t, func(t *testing.T, a api, table string) {
		accounts(t, table)
		pids := make(chan int64, 1)
		killed := killInSyncRep(pids)
		var res resolutions
		var seen attemptsSeen
		runs := 0
		err := a.run(t.Context(), transfer(table, 1, true, pids, &runs), againAtOnce(), res.option(), seen.option())
		if err := <-killed; err != nil {
			t.Fatal(err)
		}
		if err != nil || runs != 1 {
			t.Fatalf("%d runs, err %v: want one run that succeeded", runs, err)
		}
		if n := queryInt(t, "SELECT count(*) FROM "+table+"_log"); n != 1 {
			t.Fatalf("the transfer applied %d times", n)
		}
		if want := []string{"xid>0:true committed:true cause:true"}; fmt.Sprint(res.list) != fmt.Sprint(want) {
			t.Fatalf("OnResolved saw %v, want %v", res.list, want)
		}
		if len(seen.errs) != 1 || seen.errs[0] != nil || seen.done != nil {
			t.Fatalf("the Trace saw attempts %v, done %v: want one attempt that succeeded", seen.errs, seen.done)
		}
	})
}

// An attempt that retry.AttemptTimeout cuts while COMMIT waits for the
// synchronous standby, its transaction committed, is resolved committed:
// the call succeeds, fn ran once. Before, it gave up.
func TestAttemptTimeoutInCommitThatCommittedIsNotRunAgain(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	forAPIs(t, func(t *testing.T, a api, table string) {
		accounts(t, table)
		runs := 0
		err := a.run(t.Context(), transfer(table, 1, true, nil, &runs), againAtOnce(),
			sqlretry.WithRetryOptions(retry.AttemptTimeout(300*time.Millisecond)))
		if err != nil || runs != 1 {
			t.Fatalf("%d runs, err %v: want one run that succeeded", runs, err)
		}
		if n := queryInt(t, "SELECT count(*) FROM "+table+"_log"); n != 1 {
			t.Fatalf("the transfer applied %d times", n)
		}
	})
}

// A COMMIT whose backend is terminated while a deferred trigger runs, before
// the transaction commits, is resolved aborted: safe, it runs again as the
// strategy allows (here the caller's loop, to which the transaction leaves
// it, as a connection lost before COMMIT) and applies once. Before, it gave
// up, though nothing committed.
func TestLostCommitThatAbortedRunsAgain(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		slowFirstCommit(t, table)
		pids := make(chan int64, 10)
		terminated := killInCommit(pids)
		runs := 0
		runsAgainInCallersLoop(t, a, table, insertOne(table, pids, &runs), &runs, "[xid>0:true committed:false cause:true]")
		if err := <-terminated; err != nil {
			t.Fatal(err)
		}
	})
}

// runsAgainInCallersLoop runs fn through a, in a loop of the caller's that
// runs it up to 3 times, and fails t unless the first run failed safe to
// run again, OnResolved seeing one of resolved (its calls, as fmt prints
// them), and the second committed it: table has one row, and runs, which
// fn counts, is 2.
func runsAgainInCallersLoop(t *testing.T, a api, table string, fn func(context.Context, q) error, runs *int, resolved ...string) {
	t.Helper()
	var res resolutions
	outer := 0
	err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
		outer++
		return a.run(ctx, fn, againAtOnce(), res.option())
	})
	if err != nil || outer != 2 || *runs != 2 {
		t.Fatalf("outer attempts %d, runs %d, err %v; want 2, 2, success", outer, *runs, err)
	}
	if n := queryInt(t, "SELECT count(*) FROM "+table); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if !slices.Contains(resolved, fmt.Sprint(res.list)) {
		t.Fatalf("OnResolved saw %v, want one of %q", res.list, resolved)
	}
}

// A backend that ends between fn and COMMIT (terminated while idle in the
// transaction) answers the id's request with its FATAL error, or not at all
// when the write finds the connection closed: COMMIT never ran, so the run
// is resolved aborted, with no id (or, COMMIT not sent, needs no
// resolving), and runs again (here in the caller's
// loop, as TestLostCommitThatAbortedRunsAgain), applying once. It must not
// be taken for a COMMIT whose answer was lost, which would leave it in doubt.
func TestBackendGoneBeforeCommitRunsAgain(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int PRIMARY KEY)")
		runs := 0
		terminateFirst := func(ctx context.Context, tx q) error {
			runs++
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil || runs > 1 {
				return err
			}
			if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				return err
			}
			return awaitBackendGone(ctx, pid)
		}
		// Read, the FATAL error says no id; or the write finds the
		// connection closed, and no COMMIT was sent to resolve.
		runsAgainInCallersLoop(t, a, table, terminateFirst, &runs, "[xid>0:false committed:false cause:true]", "[]")
	})
}

// insertOne is a run that inserts 1 in table, after sending its backend's
// pid to pids.
func insertOne(table string, pids chan<- int64, runs *int) func(context.Context, q) error {
	return func(ctx context.Context, tx q) error {
		*runs++
		pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
		if err != nil {
			return err
		}
		pids <- pid
		return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
	}
}

// slowFirstCommit creates table (k int PRIMARY KEY) with a deferred trigger
// that sleeps 5 s in the first COMMIT that inserted in it, and not in the
// later ones (a sequence counts them: it does not roll back).
func slowFirstCommit(t *testing.T, table string) {
	exec(t, "DROP TABLE IF EXISTS "+table, "DROP SEQUENCE IF EXISTS "+table+"_seq",
		"CREATE TABLE "+table+" (k int PRIMARY KEY)",
		"CREATE SEQUENCE "+table+"_seq",
		`CREATE OR REPLACE FUNCTION `+table+`_slow() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF nextval('`+table+`_seq') = 1 THEN PERFORM pg_sleep(5); END IF; RETURN NULL; END $$`,
		"CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON "+table+
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "+table+"_slow()")
}

// With no other connection to ask (PgxTx on a *pgx.Conn, which its failed
// COMMIT closed), a COMMIT that lost its answer stays in doubt: an
// *InDoubtError with the transaction's id, errors.Is ErrInDoubt, Unsafe,
// not run again.
func TestLostCommitWithNoConnectionToAskIsInDoubt(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	table := "in_doubt_no_conn"
	accounts(t, table)
	a := endRunners(t)[2]
	pids := make(chan int64, 1)
	killed := killInSyncRep(pids)
	runs := 0
	err := a.run(t.Context(), transfer(table, 1, true, pids, &runs), againAtOnce())
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	wantInDoubt(t, err, runs, true)
}

// wantInDoubt fails t unless err is a give-up after one run wrapping an
// *InDoubtError (with an id if withID).
func wantInDoubt(t *testing.T, err error, runs int, withID bool) {
	t.Helper()
	var d *sqlretry.InDoubtError
	if !errors.As(err, &d) || !errors.Is(err, sqlretry.ErrInDoubt) || runs != 1 {
		t.Fatalf("%d runs, err %v: want one run, in doubt", runs, err)
	}
	if withID != (d.XID != 0) || d.Err == nil {
		t.Fatalf("InDoubtError %+v: want an id %v, and a cause", d, withID)
	}
	if info := retry.Classify(err); info.Safety != retry.Unsafe {
		t.Fatalf("classified %+v, want Unsafe", info)
	}
}

// A COMMIT whose attempt retry.AttemptTimeout cut while its backend does
// not run (stopped with SIGSTOP in a deferred trigger, as a backend stuck on
// a lost network may be) is still in progress; the wait for its end is
// bounded by the call's context, which ends first: in doubt, with the id,
// not run again. (A backend that runs gets pgx's cancel request, which
// aborts such a COMMIT: resolved aborted, it runs again.)
func TestCommitStillInProgressWhenTheCallEndsIsInDoubt(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		slowCommitTable(t, table, "k int")
		pids := make(chan int64, 1)
		stopped := make(chan error, 1)
		go func() {
			pid := <-pids
			err := awaitPgSleep(context.Background(), pid, "commit%")
			if err == nil {
				err = syscall.Kill(int(pid), syscall.SIGSTOP)
			}
			stopped <- err
			t.Cleanup(func() {
				_ = syscall.Kill(int(pid), syscall.SIGCONT)
				_, _ = pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid)
			})
		}()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		runs := 0
		err := a.run(ctx, insertOne(table, pids, &runs), againAtOnce(), sqlretry.WithRetryOptions(retry.AttemptTimeout(300*time.Millisecond)))
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		wantInDoubt(t, err, runs, true)
	})
}

// CockroachDB's "result is ambiguous" (SQLSTATE 40003
// statement_completion_unknown) at COMMIT is in doubt: errors.Is
// ErrInDoubt, never run again, and not resolved by pg_xact_status, which
// CockroachDB lacks. A deferred trigger raises it here.
func TestAmbiguousResultAtCommitIsInDoubt(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)",
			`CREATE OR REPLACE FUNCTION `+table+`_ambiguous() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'result is ambiguous' USING ERRCODE = '40003'; END $$`,
			"CREATE CONSTRAINT TRIGGER ambiguous AFTER INSERT ON "+table+
				" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "+table+"_ambiguous()")
		runs := 0
		err := a.run(t.Context(), func(ctx context.Context, tx q) error {
			runs++
			return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
		}, againAtOnce())
		wantInDoubt(t, err, runs, true)
		if !isCode(err, "40003") {
			t.Fatalf("err %v: want the 40003 under it", err)
		}
	})
}

// tracedQueries is a pgx QueryTracer that keeps each query it saw end: its
// text, command tag and error.
type tracedQueries struct {
	mu     sync.Mutex
	starts int
	ended  []tracedQuery
}

type tracedQuery struct {
	sql, tag string
	err      error
}

type tracedSQL struct{}

func (q *tracedQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.starts++
	return context.WithValue(ctx, tracedSQL{}, d.SQL)
}

// open returns how many queries started and have not ended.
func (q *tracedQueries) open() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.starts - len(q.ended)
}

func (q *tracedQueries) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sql, _ := ctx.Value(tracedSQL{}).(string)
	q.ended = append(q.ended, tracedQuery{sql, d.CommandTag.String(), d.Err})
}

// traced returns a pool and a *sql.DB of the tests' server whose
// connections have queries for their QueryTracer.
func traced(t *testing.T) (queries *tracedQueries, p *pgxpool.Pool, db *sql.DB) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	queries = &tracedQueries{}
	cfg.ConnConfig.Tracer = queries
	p, db = poolAndDB(t, cfg)
	return queries, p, db
}

// take returns the queries seen since the last take.
func (q *tracedQueries) take() []tracedQuery {
	q.mu.Lock()
	defer q.mu.Unlock()
	seen := q.ended
	q.starts -= len(seen)
	q.ended = nil
	return seen
}

// A pgx QueryTracer sees the COMMIT that reads the transaction's id as one
// query, answered COMMIT, or failed with the error of COMMIT (a deferred
// unique constraint), as it sees pgx's own Commit. Through PgxTx it sees
// nothing else of the commit; through Tx it also sees the "commit" by which
// database/sql's transaction is told it ended, which fails with "conn busy"
// without being sent (see commitReadingID).
func TestQueryTracerSeesOneCommit(t *testing.T) {
	needServer(t)
	queries, p, db := traced(t)
	exec(t, "DROP TABLE IF EXISTS traced_commit", "CREATE TABLE traced_commit (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	for _, r := range []struct {
		name string
		run  func(ctx context.Context, fn func(context.Context, q) error) error
	}{
		{"Tx", func(ctx context.Context, fn func(context.Context, q) error) error {
			return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) })
		}},
		{"PgxTx", func(ctx context.Context, fn func(context.Context, q) error) error {
			return sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) })
		}},
	} {
		for _, dup := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/duplicate=%v", r.name, dup), func(t *testing.T) {
				exec(t, "TRUNCATE traced_commit")
				queries.take()
				err := r.run(t.Context(), func(ctx context.Context, tx q) error {
					if err := tx.Exec(ctx, "INSERT INTO traced_commit VALUES (1)"); err != nil || !dup {
						return err
					}
					return tx.Exec(ctx, "INSERT INTO traced_commit VALUES (1)")
				})
				if dup != isCode(err, "23505") {
					t.Fatalf("err %v", err)
				}
				var commits, busy int
				for _, q := range queries.take() {
					switch {
					case r.name == "Tx" && q.sql == "commit" && q.err != nil && strings.Contains(q.err.Error(), "conn busy"):
						busy++
					case strings.EqualFold(q.sql, "commit"):
						commits++
						if dup && !isCode(q.err, "23505") || !dup && (q.err != nil || q.tag != "COMMIT") {
							t.Errorf("the commit traced %q, %v", q.tag, q.err)
						}
					case q.err != nil:
						t.Errorf("%q traced with %v", q.sql, q.err)
					}
				}
				if wantBusy := map[bool]int{true: 1}[r.name == "Tx"]; commits != 1 || busy != wantBusy {
					t.Fatalf("%d commits traced and %d busy; want 1 and %d", commits, busy, wantBusy)
				}
			})
		}
	}
}

// heavyEnv names the environment variable that runs the long forms of the
// tests (RETRYKIT_HEAVY=1), as the repository's other heavy tests do.
const heavyEnv = "RETRYKIT_HEAVY"

// Transfers whose backends are terminated at random points (in fn, in a
// COMMIT that waits for the synchronous standby with its transaction
// committed, after the call) through Tx and PgxTx: the sum of the balances
// never changes, every call that succeeded applied its transfer once, every
// other call none (an in-doubt one: none or once, as it may). 40 calls, 200
// with RETRYKIT_HEAVY=1; the log gives the counts by outcome.
func TestRandomTerminations(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	calls := 40
	if os.Getenv(heavyEnv) == "1" {
		calls = 200
	}
	const table = "random_terminations"
	exec(t, "DROP TABLE IF EXISTS "+table, "DROP TABLE IF EXISTS "+table+"_log",
		"CREATE TABLE "+table+" (id int PRIMARY KEY, balance int NOT NULL)",
		"INSERT INTO "+table+" VALUES (1, 1000), (2, 1000)",
		"CREATE TABLE "+table+"_log (transfer int NOT NULL)")
	// The calls' own pool and database: a backend killed after its call
	// ended dies in these, not in the tests' pool, which counts.
	p, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	apis := []api{
		{name: "Tx", run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
			return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) }, opts...)
		}},
		{name: "PgxTx", run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
			return sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, opts...)
		}},
	}
	outcomes := map[string]int{}
	for id := range calls {
		a := apis[id%len(apis)]
		syncRep := rand.IntN(3) == 0
		pids := make(chan int64, 1)
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			pid := <-pids
			time.Sleep(time.Duration(rand.Int64N(int64(4 * time.Millisecond))))
			_, _ = pool.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid)
		}()
		runs := 0
		var committed, aborted bool
		err := a.run(t.Context(), func(ctx context.Context, tx q) error {
			runs++
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			if runs == 1 {
				pids <- pid
				if syncRep {
					if err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
						return err
					}
				}
			}
			if err := tx.Exec(ctx, "UPDATE "+table+" SET balance = balance - 1 WHERE id = 1"); err != nil {
				return err
			}
			if err := tx.Exec(ctx, "UPDATE "+table+" SET balance = balance + 1 WHERE id = 2"); err != nil {
				return err
			}
			return tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s_log VALUES (%d)", table, id))
		}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 5, Backoff: retry.Constant(0)}),
			sqlretry.OnResolved(func(_ context.Context, _ uint64, c bool, _ error) { committed, aborted = c, !c }))
		if runs == 0 {
			close(pids) // BEGIN failed every time: nothing to kill
		}
		<-killed
		applied := queryInt(t, "SELECT count(*) FROM "+table+"_log WHERE transfer = $1", id)
		var outcome string
		switch {
		case err == nil && committed:
			outcome = "succeeded, lost COMMIT resolved committed"
		case err == nil && aborted:
			outcome = "succeeded, lost COMMIT resolved aborted and run again"
		case err == nil && runs > 1:
			outcome = "succeeded, run again after a failure before COMMIT"
		case err == nil:
			outcome = "succeeded in one run"
		case errors.Is(err, sqlretry.ErrInDoubt):
			outcome = "in doubt"
		default:
			outcome = "failed"
		}
		if err != nil {
			t.Logf("transfer %d (%s): %s: %v", id, a.name, outcome, err)
		}
		outcomes[outcome]++
		if err == nil && applied != 1 || err != nil && !errors.Is(err, sqlretry.ErrInDoubt) && applied != 0 || applied > 1 {
			t.Errorf("transfer %d (%s, %s, %d runs, err %v): applied %d times", id, a.name, outcome, runs, err, applied)
		}
	}
	if sum := queryInt(t, "SELECT sum(balance) FROM "+table); sum != 2000 {
		t.Errorf("the balances sum to %d, want 2000", sum)
	}
	if moved, logged := 1000-queryInt(t, "SELECT balance FROM "+table+" WHERE id = 1"),
		queryInt(t, "SELECT count(*) FROM "+table+"_log"); moved != logged {
		t.Errorf("%d moved, %d transfers logged", moved, logged)
	}
	t.Logf("%d calls: %v", calls, outcomes)
}

// An fn whose one query string commits and then sleeps (UPDATE; COMMIT;
// SELECT pg_sleep), cut by retry.AttemptTimeout in the sleep, committed
// its work before the cut: it is not run again, though the connection's
// last status still said a transaction was open, with a strategy that
// runs again what it may.
func TestFnCommittingInAMultiStatementQueryThenCutIsNotRunAgain(t *testing.T) {
	needServer(t)
	for _, a := range endRunners(t) {
		t.Run(a.name, func(t *testing.T) {
			table := tableFor(t)
			runs := 0
			err := a.run(t.Context(), func(ctx context.Context, tx q) error {
				runs++
				return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1); COMMIT; SELECT pg_sleep(5)")
			}, againAtOnce(), sqlretry.WithRetryOptions(retry.AttemptTimeout(300*time.Millisecond)))
			if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != 1 || err == nil {
				t.Fatalf("%d runs, %d rows, err %v: want one run, its row, an error", runs, n, err)
			}
		})
	}
}
