package sqlretry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// codes records the SQLSTATE of every failed run of a transaction.
type codes struct {
	mu sync.Mutex
	s  []string
}

func (c *codes) option() sqlretry.Option {
	return sqlretry.WithRetryOptions(retry.OnAttemptFailed(func(_ context.Context, _ int, err error) {
		var pg *pgconn.PgError
		code := "none"
		if errors.As(err, &pg) {
			code = pg.Code
		}
		c.mu.Lock()
		c.s = append(c.s, code)
		c.mu.Unlock()
	}))
}

func (c *codes) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.s)
}

// afterOther waits, at the start of a run again, for the other transaction's
// call to end, at most 30 s. Without it, how often the two conflict depends
// on the scheduling: a run again that starts before the other has committed
// can meet it again (on a loaded machine a deadlock recurred three times).
// The snapshot is taken at a transaction's first statement, so a run that
// waits here sees the other's commit.
func afterOther(ctx context.Context, ended <-chan struct{}) error {
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("the other transaction never ended")
	}
}

// The on-call doctors of PostgreSQL's documentation on serializable
// isolation: two transactions each see two doctors on call and take one off.
// Under REPEATABLE READ both commit and nobody is on call (write skew, the
// control); under SERIALIZABLE one fails with 40001, runs again once the
// other has committed, sees one doctor left, and leaves them on call.
func TestWriteSkew(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		for _, level := range []string{"repeatable read", "serializable"} {
			exec(t, "DROP TABLE IF EXISTS "+table,
				"CREATE TABLE "+table+" (name text PRIMARY KEY, on_call bool NOT NULL)",
				"INSERT INTO "+table+" VALUES ('alice', true), ('bob', true)")
			b := newBarrier(2)
			var runs atomic.Int64
			var failed codes
			var wg sync.WaitGroup
			errs := make([]error, 2)
			ended := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
			for i, name := range []string{"alice", "bob"} {
				wg.Go(func() {
					defer close(ended[i])
					first := true
					errs[i] = a.run(t.Context(), func(ctx context.Context, tx q) error {
						runs.Add(1)
						if !first {
							if err := afterOther(ctx, ended[1-i]); err != nil {
								return err
							}
						}
						n, err := tx.Int(ctx, "SELECT count(*) FROM "+table+" WHERE on_call")
						if err != nil {
							return err
						}
						if first { // both read before either writes
							first = false
							b.wait(t)
						}
						if n < 2 {
							return nil
						}
						return tx.Exec(ctx, "UPDATE "+table+" SET on_call = false WHERE name = $1", name)
					}, a.iso(level), failed.option())
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("%s: %v", level, err)
				}
			}
			onCall := queryInt(t, "SELECT count(*) FROM "+table+" WHERE on_call")
			t.Logf("%s: %d runs, failures %v, %d on call", level, runs.Load(), failed.list(), onCall)
			switch level {
			case "repeatable read":
				if onCall != 0 || runs.Load() != 2 {
					t.Fatalf("control: %d on call after %d runs, want the write skew: 0 after 2", onCall, runs.Load())
				}
			case "serializable":
				if onCall != 1 || runs.Load() != 3 || !slices.Equal(failed.list(), []string{"40001"}) {
					t.Fatalf("%d on call after %d runs, failures %v; want 1 after 3, one 40001", onCall, runs.Load(), failed.list())
				}
			}
		}
	})
}

// Two transactions lock two rows in opposite orders: PostgreSQL aborts one
// with 40P01, which runs again once the other has committed. Each adds 1 to
// both rows, so both end at 2: each transaction applied once.
func TestDeadlock(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table,
			"CREATE TABLE "+table+" (id int PRIMARY KEY, n int NOT NULL)",
			"INSERT INTO "+table+" VALUES (1, 0), (2, 0)")
		b := newBarrier(2)
		var runs atomic.Int64
		var failed codes
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ended := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
		for i, order := range [][2]int{{1, 2}, {2, 1}} {
			wg.Go(func() {
				defer close(ended[i])
				first := true
				errs[i] = a.run(t.Context(), func(ctx context.Context, tx q) error {
					runs.Add(1)
					if !first {
						if err := afterOther(ctx, ended[1-i]); err != nil {
							return err
						}
					}
					if err := tx.Exec(ctx, "UPDATE "+table+" SET n = n + 1 WHERE id = $1", order[0]); err != nil {
						return err
					}
					if first { // each holds its first row before taking the second
						first = false
						b.wait(t)
					}
					return tx.Exec(ctx, "UPDATE "+table+" SET n = n + 1 WHERE id = $1", order[1])
				}, failed.option())
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sum := queryInt(t, "SELECT sum(n) FROM "+table)
		both := queryInt(t, "SELECT count(*) FROM "+table+" WHERE n = 2")
		t.Logf("%d runs, failures %v", runs.Load(), failed.list())
		if both != 2 || sum != 4 || runs.Load() != 3 || !slices.Equal(failed.list(), []string{"40P01"}) {
			t.Fatalf("rows at 2: %d, sum %d, %d runs, failures %v; want 2, 4, 3 runs, one 40P01", both, sum, runs.Load(), failed.list())
		}
	})
}

// 32 goroutines increment one counter under SERIALIZABLE with the default
// strategy, and log each call's id in the same transaction. The counter ends
// at the number of calls that succeeded, each logged once: no effect applied
// twice, none lost. A call that fails has met a conflict on each of the
// default's 10 runs, and some calls commit only because they ran again. How
// many calls commit depends on how fast the machine runs the transactions
// (on a loaded one, 135 of 160 did), so the test logs it and
// BenchmarkSQLContention in bench measures it.
func TestCounter(t *testing.T) {
	const goroutines, calls = 32, 5
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "DROP TABLE IF EXISTS "+table+"_log",
			"CREATE TABLE "+table+" (id int PRIMARY KEY, n bigint NOT NULL)",
			"CREATE TABLE "+table+"_log (call text PRIMARY KEY)",
			"INSERT INTO "+table+" VALUES (1, 0)")
		var (
			ok, gaveUp, rescued, runs atomic.Int64
			mu                        sync.Mutex
			perCall                   = map[int]int{} // runs per call → calls
			wg                        sync.WaitGroup
		)
		start := time.Now()
		for g := range goroutines {
			wg.Go(func() {
				for c := range calls {
					id := fmt.Sprintf("%d-%d", g, c)
					n := 0
					err := a.run(t.Context(), func(ctx context.Context, tx q) error {
						n++
						runs.Add(1)
						if err := tx.Exec(ctx, "UPDATE "+table+" SET n = n + 1 WHERE id = 1"); err != nil {
							return err
						}
						return tx.Exec(ctx, "INSERT INTO "+table+"_log VALUES ($1)", id)
					}, a.iso("serializable"))
					mu.Lock()
					perCall[n]++
					mu.Unlock()
					switch {
					case n < 1 || n > 10:
						t.Errorf("call %s ran %d times, want 1 to 10 (the default's bound)", id, n)
					case err == nil:
						ok.Add(1)
						if n > 1 {
							rescued.Add(1)
						}
					case errors.Is(err, retry.ErrMaxAttempts) && isCode(err, "40001") && n == 10:
						gaveUp.Add(1) // a conflict every time: the bound stopped it
					default:
						t.Errorf("call %s, after %d runs: %v", id, n, err)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		counter := queryInt(t, "SELECT n FROM "+table+" WHERE id = 1")
		logged := queryInt(t, "SELECT count(*) FROM "+table+"_log")
		t.Logf("%d calls in %v: %d committed (%d of them after running again), %d gave up after %d runs; %d runs in all, %.2f aborted runs per commit; calls by runs: %v",
			goroutines*calls, elapsed.Round(time.Millisecond), ok.Load(), rescued.Load(), gaveUp.Load(), 10, runs.Load(),
			float64(runs.Load()-ok.Load())/float64(max(ok.Load(), 1)), perCall)
		if counter != ok.Load() || logged != ok.Load() {
			t.Fatalf("counter %d, log %d, successful calls %d: want them equal", counter, logged, ok.Load())
		}
		if runs.Load() == ok.Load()+gaveUp.Load() {
			t.Fatal("no conflict at all: the test did not contend")
		}
		if rescued.Load() == 0 {
			t.Fatal("no call committed after running again: the conflicts were not retried")
		}
	})
}

// conflictEveryRun returns a transaction that fails with a real 40001 on
// every run: it reads a row (taking its snapshot), another connection then
// updates the row and commits, and its own update of the row cannot be
// serialized ("could not serialize access due to concurrent update").
func conflictEveryRun(t *testing.T, table string, runs *atomic.Int64) func(context.Context, q) error {
	exec(t, "DROP TABLE IF EXISTS "+table,
		"CREATE TABLE "+table+" (id int PRIMARY KEY, n int NOT NULL)",
		"INSERT INTO "+table+" VALUES (1, 0)")
	return func(ctx context.Context, tx q) error {
		runs.Add(1)
		if _, err := tx.Int(ctx, "SELECT n FROM "+table+" WHERE id = 1"); err != nil {
			return err
		}
		exec(t, "UPDATE "+table+" SET n = n + 1 WHERE id = 1")
		return tx.Exec(ctx, "UPDATE "+table+" SET n = n + 100 WHERE id = 1")
	}
}

// A give-up reports as many attempts as fn ran, and wraps the last conflict,
// which errors.As reaches as the driver's *pgconn.PgError.
func TestGiveUpAttempts(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		var runs atomic.Int64
		err := a.run(t.Context(), conflictEveryRun(t, table, &runs), a.iso("repeatable read"),
			sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}))
		var re *retry.Error
		var pg *pgconn.PgError
		if !errors.As(err, &re) || !errors.As(err, &pg) {
			t.Fatalf("got %v (%T), want a *retry.Error over a *pgconn.PgError", err, err)
		}
		if re.Attempts != 3 || runs.Load() != 3 || pg.Code != "40001" || !errors.Is(err, retry.ErrMaxAttempts) {
			t.Fatalf("attempts %d, runs %d, code %s, reason %v; want 3, 3, 40001, max attempts", re.Attempts, runs.Load(), pg.Code, re.Reason)
		}
		if n := queryInt(t, "SELECT n FROM "+table+" WHERE id = 1"); n != 3 {
			t.Fatalf("n = %d, want 3: only the other connection's updates", n)
		}
	})
}

// The default strategy stops a transaction that conflicts on every run after
// 10 runs, having waited at most 1.6 s.
func TestDefaultBound(t *testing.T) {
	needServer(t)
	a := apis()[1]
	var runs atomic.Int64
	start := time.Now()
	err := a.run(t.Context(), conflictEveryRun(t, "default_bound", &runs), a.iso("serializable"))
	elapsed := time.Since(start)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 10 || runs.Load() != 10 || !errors.Is(err, retry.ErrMaxAttempts) {
		t.Fatalf("got %v after %d runs, want a give-up after 10", err, runs.Load())
	}
	t.Logf("gave up after %d runs in %v", runs.Load(), elapsed.Round(time.Millisecond))
	if elapsed > 3*time.Second {
		t.Fatalf("took %v", elapsed)
	}
}

// A unique violation and an error of fn's own are not retried: one run, the
// transaction rolled back, the error returned.
func TestNotRetried(t *testing.T) {
	errFunds := errors.New("insufficient funds")
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table,
			"CREATE TABLE "+table+" (k text PRIMARY KEY)",
			"INSERT INTO "+table+" VALUES ('taken')")
		for _, c := range []struct {
			name string
			last string // the statement after the insert of "new"
			own  error
			want func(error) bool
		}{
			{"unique violation", "INSERT INTO " + table + " VALUES ('taken')", nil, func(err error) bool {
				var pg *pgconn.PgError
				return errors.As(err, &pg) && pg.Code == "23505"
			}},
			{"syntax error", "INSERT INTO", nil, func(err error) bool {
				var pg *pgconn.PgError
				return errors.As(err, &pg) && pg.Code == "42601"
			}},
			{"fn's own error", "", errFunds, func(err error) bool { return errors.Is(err, errFunds) }},
		} {
			runs := 0
			err := a.run(t.Context(), func(ctx context.Context, tx q) error {
				runs++
				if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ('new')"); err != nil {
					return err
				}
				if c.own != nil {
					return fmt.Errorf("transfer: %w", c.own)
				}
				return tx.Exec(ctx, c.last)
			}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 5, Backoff: retry.Constant(0)}))
			if runs != 1 || !c.want(err) || !errors.Is(err, retry.ErrNotRetryable) {
				t.Errorf("%s: %d runs, %v; want 1 run, the error, not retryable", c.name, runs, err)
			}
			if n := queryInt(t, "SELECT count(*) FROM "+table+" WHERE k = 'new'"); n != 0 {
				t.Errorf("%s: the insert was committed", c.name)
			}
		}
	})
}

// Cancelling the context stops the transaction at once, in the middle of a
// statement, and rolls it back: its row lock is released, so another
// connection can take it. The context is cancelled once pg_stat_activity
// shows the statement running.
func TestCancel(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int PRIMARY KEY)")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		pids := make(chan int64, 1)
		cancelled := make(chan error, 1)
		go func() {
			select {
			case pid := <-pids:
				cancelled <- awaitPgSleep(t.Context(), pid, "select pg_sleep%")
			case <-ctx.Done():
				cancelled <- nil // the run ended before its statement: the checks below say how
			}
			cancel()
		}()
		runs := 0
		var start time.Time
		err := a.run(ctx, func(ctx context.Context, tx q) error {
			runs++
			if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
				return err
			}
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			start = time.Now()
			pids <- pid
			return tx.Exec(ctx, "SELECT pg_sleep(10)")
		})
		cancel() // for a run that ended before its statement
		if err := <-cancelled; err != nil {
			t.Fatal(err)
		}
		// Ten seconds would be the statement run to its end.
		if elapsed := time.Since(start); start.IsZero() || elapsed > 5*time.Second || runs != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("%d runs, the statement cut after %v, %v; want one, cut short, context.Canceled", runs, elapsed, err)
		}
		// The row's lock is gone: the same key inserts at once.
		conn, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(t.Context(), "SET lock_timeout = '2s'"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), "INSERT INTO "+table+" VALUES (1)"); err != nil {
			t.Fatalf("the cancelled transaction still holds its row: %v", err)
		}
	})
}

// A panic in fn rolls the transaction back and reaches the caller.
func TestPanic(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int PRIMARY KEY)")
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the panic", r)
				}
			}()
			_ = a.run(t.Context(), func(ctx context.Context, tx q) error {
				if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				panic("boom")
			})
		}()
		if err := a.run(t.Context(), func(ctx context.Context, tx q) error {
			return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
		}); err != nil {
			t.Fatalf("after the panic: %v", err)
		}
	})
}

// isCode reports whether err wraps a *pgconn.PgError with code.
func isCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}
