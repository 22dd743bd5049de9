package sqlretry_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// endRunners returns Tx, PgxTx over the pool and PgxTx over a *pgx.Conn of
// its own, which it closes when t ends.
func endRunners(t *testing.T) []api {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return append(apis(), api{
		name: "PgxTxConn",
		run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
			return sqlretry.PgxTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, opts...)
		},
	})
}

// tables numbers the tables of tableFor: names made of the tests' names
// would pass PostgreSQL's limit of 63 bytes, which cuts them to one.
var tables atomic.Int64

// tableFor returns a table name of t's own, and creates the table (k int)
// and a function <table>_raise(code) that fails with SQLSTATE code.
func tableFor(t *testing.T) string {
	t.Helper()
	table := fmt.Sprintf("ended_by_sql_%d", tables.Add(1))
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)",
		"CREATE OR REPLACE FUNCTION "+table+"_raise(code text) RETURNS int LANGUAGE plpgsql AS "+
			"$$ BEGIN RAISE EXCEPTION 'raised %', code USING ERRCODE = code; END $$")
	return table
}

// againAtOnce is a strategy of the caller's that runs the transaction again
// for every failure its classification allows, without waiting.
func againAtOnce() sqlretry.Option {
	return sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)})
}

// An fn that ends the transaction with a statement of its own (COMMIT, END,
// or ROLLBACK, which cannot be told from COMMIT) and then fails with an error
// that would be retried (a conflict, or with a strategy of the caller's a
// 57014 or 55P03) is not run again: its work may have committed. Neither
// pgx nor database/sql sees such a statement end the transaction. Nor is one
// that ended it with the driver's Commit, then met a conflict in a later
// statement (on another connection here; through tx.Conn() alike): that
// conflict cannot be told from one of the Commit, which committed nothing.
// Nor is one of PgxTx that committed, then lost its connection (its backend
// terminated: 57P01, which a strategy of the caller's retries in fn): the
// connection's last status, read though it is closed, says the transaction
// had ended; Tx alike, through pgx's stdlib driver.
func TestFnThatEndsTheTransactionThenFailsIsNotRunAgain(t *testing.T) {
	needServer(t)
	for _, a := range endRunners(t) {
		for _, c := range []struct {
			end, code string
			opts      []sqlretry.Option
			fail      string // the statement after the end; by default one raising code
		}{
			{"COMMIT", "40001", nil, ""},
			{"END", "40001", nil, ""},
			{"ROLLBACK", "40001", nil, ""},
			{"COMMIT", "40P01", nil, ""},
			{"COMMIT", "57014", []sqlretry.Option{againAtOnce()}, ""},
			{"COMMIT", "55P03", []sqlretry.Option{againAtOnce()}, ""},
			{"Commit", "40001", nil, ""}, // the driver's
			// Last: a *pgx.Conn does not survive it.
			{"COMMIT", "57P01", []sqlretry.Option{againAtOnce()}, "SELECT pg_terminate_backend(pg_backend_pid())"},
		} {
			t.Run(a.name+"/"+c.end+"/"+c.code, func(t *testing.T) {
				table := tableFor(t)
				runs := 0
				err := a.run(t.Context(), func(ctx context.Context, tx q) error {
					runs++
					if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
						return err
					}
					raise := c.fail
					if raise == "" {
						raise = "SELECT " + table + "_raise('" + c.code + "')"
					}
					if c.end == "Commit" {
						if err := tx.Commit(ctx); err != nil {
							return err
						}
						_, err := pool.Exec(ctx, raise)
						return err
					}
					if err := tx.Exec(ctx, c.end); err != nil {
						return err
					}
					return tx.Exec(ctx, raise)
				}, c.opts...)
				want := int64(1)
				if c.end == "ROLLBACK" {
					want = 0
				}
				if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != want {
					t.Fatalf("%d runs, %d rows committed (err %v); want 1 run, %d rows", runs, n, err, want)
				}
				var re *retry.Error
				var pg *pgconn.PgError
				if !errors.As(err, &re) || !errors.As(err, &pg) || pg.Code != c.code {
					t.Fatalf("err %v: want the give-up, reaching the %s", err, c.code)
				}
				if !strings.Contains(err.Error(), endedByFn) {
					t.Errorf("err %q does not say %q", err, endedByFn)
				}
				// Unsafe to a loop around the call too, were the call to
				// leave this failure to it (retry.ErrOuterLoop).
				if info := sqlretry.Classify(re.Err); info.Safety != retry.Unsafe {
					t.Errorf("the last error classified %+v, want Unsafe", info)
				}
			})
		}
	}
}

// Inside a caller's loop, an fn that committed by SQL and then failed with
// an error left to that loop (57014, a statement_timeout) is not run again
// by it either.
func TestFnThatEndsTheTransactionInACallersLoop(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, _ string) {
		table := tableFor(t)
		attempts, runs := 0, 0
		err := retry.Do(t.Context(), &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}, func(ctx context.Context) error {
			attempts++
			return a.run(ctx, func(ctx context.Context, tx q) error {
				runs++
				if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				if err := tx.Exec(ctx, "COMMIT"); err != nil {
					return err
				}
				return tx.Exec(ctx, "SELECT "+table+"_raise('57014')")
			})
		})
		if n := queryInt(t, "SELECT count(*) FROM "+table); attempts != 1 || runs != 1 || n != 1 || !isCode(err, "57014") {
			t.Fatalf("%d attempts of the caller's loop, %d runs, %d rows committed (err %v); want 1, 1, 1, the 57014", attempts, runs, n, err)
		}
	})
}

// A conflict in fn, inside the transaction, is still run again on every
// entry point: the check that fn ended the transaction does not misjudge it.
func TestConflictInFnStillRunsAgain(t *testing.T) {
	needServer(t)
	for _, a := range endRunners(t) {
		t.Run(a.name, func(t *testing.T) {
			table := tableFor(t)
			runs := 0
			err := a.run(t.Context(), func(ctx context.Context, tx q) error {
				if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				if runs++; runs == 1 {
					_, err := tx.Int(ctx, "SELECT "+table+"_raise('40001')")
					return err
				}
				return nil
			})
			if n := queryInt(t, "SELECT count(*) FROM "+table); err != nil || runs != 2 || n != 1 {
				t.Fatalf("%d runs, %d rows committed (err %v); want 2 runs, 1 row", runs, n, err)
			}
		})
	}
}

// openRows runs a query through tx and leaves its rows open, one read.
func openRows(ctx context.Context, tx q) error {
	const query = "SELECT generate_series(1, 100000)"
	var rows interface {
		Next() bool
		Err() error
	}
	var err error
	switch tx := tx.(type) {
	case pgxQ:
		rows, err = tx.tx.Query(ctx, query)
	case sqlQ:
		rows, err = tx.tx.QueryContext(ctx, query)
	}
	if err != nil {
		return err
	}
	if !rows.Next() {
		return rows.Err()
	}
	return nil
}

// An fn that leaves a query's Rows open inside the transaction and fails
// with an error that may be retried is run again: the connection is busy,
// its transaction open. One of PgxTx that committed by SQL first, then left
// an autocommit query's Rows open, is not: the server's last word before
// that query was that no transaction was open; Tx alike, through pgx's
// stdlib driver.
func TestFnThatLeavesRowsOpen(t *testing.T) {
	needServer(t)
	// apis, not endRunners: a *pgx.Conn dies of the ROLLBACK sent while its
	// Rows are open, and would fail the next run's BEGIN.
	for _, a := range apis() {
		for _, commit := range []bool{false, true} {
			name := a.name + "/in_the_transaction"
			if commit {
				name = a.name + "/after_commit"
			}
			t.Run(name, func(t *testing.T) {
				table := tableFor(t)
				runs := 0
				err := a.run(t.Context(), func(ctx context.Context, tx q) error {
					if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
						return err
					}
					if runs++; runs > 1 {
						return nil
					}
					if commit {
						if err := tx.Exec(ctx, "COMMIT"); err != nil {
							return err
						}
					}
					if err := openRows(ctx, tx); err != nil {
						return err
					}
					return retry.Transient(errors.New("audit: 503")) // rows left open
				}, againAtOnce())
				wantRuns := 2
				if commit {
					wantRuns = 1
				}
				if n := queryInt(t, "SELECT count(*) FROM "+table); runs != wantRuns || n != 1 {
					t.Fatalf("%d runs, %d rows committed (err %v); want %d runs, 1 row", runs, n, err, wantRuns)
				}
			})
		}
	}
}

// connless is a Beginner whose transactions have no connection to show, as
// a mock's (pgxmock's Conn panics): Conn panics, or returns nil. PgxTx
// neither panics nor skips the rollback.
type connless struct {
	db        sqlretry.Beginner
	panics    bool
	rollbacks int
}

func (c *connless) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	tx, err := c.db.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &connlessTx{Tx: tx, of: c}, nil
}

type connlessTx struct {
	pgx.Tx
	of *connless
}

func (t *connlessTx) Conn() *pgx.Conn {
	if t.of.panics {
		panic("Conn is not available on a mock")
	}
	return nil
}

func (t *connlessTx) Rollback(ctx context.Context) error {
	t.of.rollbacks++
	return t.Tx.Rollback(ctx)
}

var errFunds = errors.New("insufficient funds")

func TestBeginnerWithoutConn(t *testing.T) {
	needServer(t)
	for _, panics := range []bool{false, true} {
		name := "nil"
		if panics {
			name = "panics"
		}
		t.Run(name, func(t *testing.T) {
			table := tableFor(t)
			db := &connless{db: pool, panics: panics}
			runs := 0
			err := sqlretry.PgxTx(t.Context(), db, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				if runs++; runs == 1 {
					_, err := tx.Exec(ctx, "SELECT "+table+"_raise('40001')")
					return err
				}
				return errFunds
			})
			if !errors.Is(err, errFunds) || runs != 2 || db.rollbacks != 2 {
				t.Fatalf("%d runs, %d rollbacks (err %v): want 2 runs (a conflict, then fn's error), each rolled back", runs, db.rollbacks, err)
			}
			if n := queryInt(t, "SELECT count(*) FROM "+table); n != 0 {
				t.Fatalf("%d rows committed, want none", n)
			}
		})
	}
}

// statements is a pgx QueryTracer that counts the statements sent with a
// given text.
type statements struct {
	text string
	n    atomic.Int64
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == s.text {
		s.n.Add(1)
	}
	return ctx
}

func (*statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Through pgx's stdlib driver, Tx learns that fn ended the transaction from
// the messages of its connection, and sends nothing to ask. Through another
// driver (pgx's, hidden here behind a driver.Conn that does not show it) it
// asks the server (its SAVEPOINT) only when fn's failure may be retried: for
// an error of the application's, which nobody retries, the answer would
// change nothing, and the round trip (and, in a transaction a failure
// aborted, an error in the server's log) is not paid.
func TestTxProbesOnlyFailuresThatMayBeRetried(t *testing.T) {
	needServer(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	probes := &statements{text: "SAVEPOINT sqlretry_probe"}
	cfg.Tracer = probes
	table := tableFor(t)
	errApp := errors.New("insufficient funds")
	for _, d := range []struct {
		name     string
		db       *sql.DB
		conflict int64 // probes after a conflict, one per run of the two
	}{
		{"pgx", stdlib.OpenDB(*cfg), 0},
		{"another driver", sql.OpenDB(hiddenPgx{stdlib.GetConnector(*cfg)}), 2},
	} {
		defer d.db.Close()
		for _, c := range []struct {
			name   string
			fail   func(ctx context.Context, tx *sql.Tx) error
			probes int64
		}{
			{"an error of the application's", func(context.Context, *sql.Tx) error { return errApp }, 0},
			{"a unique violation", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "SELECT "+table+"_raise('23505')")
				return err
			}, 0},
			{"a conflict", func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "SELECT "+table+"_raise('40001')")
				return err
			}, d.conflict},
			{"a COMMIT then a conflict", func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "SELECT "+table+"_raise('40001')")
				return err
			}, d.conflict / 2}, // one run: fn ended the transaction
		} {
			t.Run(d.name+"/"+c.name, func(t *testing.T) {
				before := probes.n.Load()
				err := sqlretry.Tx(t.Context(), d.db, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
						return err
					}
					return c.fail(ctx, tx)
				}, sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(0)}))
				if err == nil {
					t.Fatal("no error")
				}
				if got := probes.n.Load() - before; got != c.probes {
					t.Fatalf("%d probes, want %d (%v)", got, c.probes, err)
				}
				if ended := strings.Contains(err.Error(), endedByFn); ended != strings.Contains(c.name, "COMMIT") {
					t.Fatalf("err %v: says fn ended the transaction: %v", err, ended)
				}
			})
		}
	}
	if n := queryInt(t, "SELECT count(*) FROM "+table); n != 2 {
		t.Fatalf("%d rows committed, want 2, those of the COMMITs of fn's", n)
	}
}

// hiddenPgx is pgx's stdlib connector, whose connections show database/sql
// only what any driver's do: Tx cannot reach pgx under them.
type hiddenPgx struct{ driver.Connector }

// pgxDriverConn is what database/sql uses of a connection of pgx's stdlib.
type pgxDriverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

func (h hiddenPgx) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return struct{ pgxDriverConn }{c.(pgxDriverConn)}, nil
}

// An fn that calls tx.Commit on a pool's transaction hands its connection
// back to the pool; PgxTx must then read nothing of that connection, which
// another goroutine may have acquired (it read the transaction status
// there: a data race that go test -race reports). The run is still not run
// again: fn ended the transaction.
func TestPgxTxReadsNoConnectionFnGaveBack(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	p := poolOfOne(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // another user of the pool's one connection
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = p.Exec(ctx, "SELECT 1")
		}
	}()
	failed := retry.Transient(errors.New("after the commit"))
	for range 200 {
		runs := 0
		err := sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error {
			runs++
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			return failed
		}, againAtOnce())
		if !errors.Is(err, failed) || runs != 1 {
			t.Fatalf("%v after %d runs, want fn's error after 1", err, runs)
		}
	}
	close(stop)
	wg.Wait()
}

// poolOfOne returns a pool of one connection to the test server, closed when
// t ends: a connection fn gave back is then the next user's at once.
func poolOfOne(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// endedByFn is what the error of a run says when fn ended the transaction
// itself.
const endedByFn = "fn ended the transaction itself"

// An fn that ends the transaction and is in another at once (COMMIT AND
// CHAIN, ROLLBACK AND CHAIN, or a COMMIT inside a query string of several
// statements) and then fails is not run again, a conflict included: its work
// committed once, and the connection's status ('T' or 'E', as in the
// transaction Tx or PgxTx began) does not show it. PgxTx reads the
// statements fn sends through tx, its savepoints and its batches; Tx reads
// the messages of fn's connection, the server's answers included, so that
// it sees a COMMIT AND CHAIN by the name of a statement prepared before fn
// ran. Nor is one that ends it with END, or with PREPARE TRANSACTION. A
// savepoint's ROLLBACK TO is no end: a conflict after it runs again.
func TestFnThatEndsTheTransactionAndChainsIsNotRunAgain(t *testing.T) {
	needServer(t)
	// A database/sql pool of one connection, on which a COMMIT AND CHAIN is
	// prepared before fn runs: fn then runs it by name, without its text.
	one, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	chain, err := one.PrepareContext(t.Context(), "COMMIT AND CHAIN")
	if err != nil {
		t.Fatal(err)
	}
	runners := append(endRunners(t), api{
		name: "TxOneConn",
		run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
			return sqlretry.Tx(ctx, one, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) }, opts...)
		},
	})
	for _, a := range runners {
		for _, c := range []struct {
			name string
			// fn, after its INSERT into table; raise is a statement that
			// fails with 40001
			fn   func(ctx context.Context, tx q, table, raise string) error
			code string // the error fn's run ends with; "" fn's own
			rows int64  // committed
			only string // the one runner of the case, if any
		}{
			{"COMMIT AND CHAIN then a conflict", func(ctx context.Context, tx q, _, raise string) error {
				if err := tx.Exec(ctx, "COMMIT AND CHAIN"); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 1, ""},
			{"COMMIT AND CHAIN then an error of fn's", func(ctx context.Context, tx q, _, _ string) error {
				if err := tx.Exec(ctx, "commit and chain"); err != nil {
					return err
				}
				return retry.Transient(errors.New("audit: 503"))
			}, "", 1, ""},
			{"END then a conflict", func(ctx context.Context, tx q, _, raise string) error {
				if err := tx.Exec(ctx, "END"); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 1, ""},
			{"one string: COMMIT AND CHAIN, 1/0", func(ctx context.Context, tx q, table, _ string) error {
				return tx.Exec(ctx, "UPDATE "+table+" SET k = k + 1; COMMIT AND CHAIN; SELECT 1/0")
			}, "22012", 1, ""},
			{"one string: COMMIT AND CHAIN, a conflict", func(ctx context.Context, tx q, table, raise string) error {
				return tx.Exec(ctx, "UPDATE "+table+" SET k = k + 1; COMMIT AND CHAIN; "+raise)
			}, "40001", 1, ""},
			{"one string: COMMIT; BEGIN, a conflict", func(ctx context.Context, tx q, table, raise string) error {
				return tx.Exec(ctx, "UPDATE "+table+" SET k = k + 1; COMMIT; BEGIN; "+raise)
			}, "40001", 1, ""},
			{"a savepoint's COMMIT AND CHAIN", func(ctx context.Context, tx q, _, raise string) error {
				nested, err := tx.(pgxQ).tx.Begin(ctx)
				if err != nil {
					return err
				}
				if _, err := nested.Exec(ctx, "COMMIT AND CHAIN"); err != nil {
					return err
				}
				_, err = nested.Exec(ctx, raise)
				return err
			}, "40001", 1, "PgxTx"},
			{"a batch's COMMIT AND CHAIN", func(ctx context.Context, tx q, _, raise string) error {
				b := &pgx.Batch{}
				b.Queue("COMMIT AND CHAIN")
				b.Queue(raise)
				return tx.(pgxQ).tx.SendBatch(ctx, b).Close()
			}, "40001", 1, "PgxTx"},
			{"COMMIT AND CHAIN prepared before fn", func(ctx context.Context, tx q, _, raise string) error {
				if _, err := tx.(sqlQ).tx.StmtContext(ctx, chain).ExecContext(ctx); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 1, "TxOneConn"},
			{"COMMIT AND CHAIN prepared in fn", func(ctx context.Context, tx q, _, raise string) error {
				s, err := tx.(sqlQ).tx.PrepareContext(ctx, "COMMIT AND CHAIN")
				if err != nil {
					return err
				}
				if _, err := s.ExecContext(ctx); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 1, "Tx"},
			{"ROLLBACK AND CHAIN then a conflict", func(ctx context.Context, tx q, _, raise string) error {
				if err := tx.Exec(ctx, "ROLLBACK AND CHAIN"); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 0, ""},
			{"PREPARE TRANSACTION then a conflict", func(ctx context.Context, tx q, table, raise string) error {
				if err := tx.Exec(ctx, "PREPARE TRANSACTION '"+table+"'"); err != nil {
					return err
				}
				return tx.Exec(ctx, raise)
			}, "40001", 1, ""},
		} {
			if c.only != "" && c.only != a.name && !(c.only == "PgxTx" && a.name == "PgxTxConn") {
				continue
			}
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				table := tableFor(t)
				raise := "SELECT " + table + "_raise('40001')"
				runs := 0
				err := a.run(t.Context(), func(ctx context.Context, tx q) error {
					runs++
					if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
						return err
					}
					return c.fn(ctx, tx, table, raise)
				}, againAtOnce())
				if strings.HasPrefix(c.name, "PREPARE") {
					exec(t, "COMMIT PREPARED '"+table+"'")
				}
				if n := queryInt(t, "SELECT count(*) FROM "+table); runs != 1 || n != c.rows {
					t.Fatalf("%d runs, %d rows committed (err %v); want 1 run, %d rows", runs, n, err, c.rows)
				}
				if c.rows == 1 {
					// Applied once: the UPDATE of the one-string cases ran
					// once, or not at all.
					if k := queryInt(t, "SELECT max(k) FROM "+table); k > 2 {
						t.Fatalf("k = %d: the update applied more than once", k)
					}
				}
				var pg *pgconn.PgError
				if c.code != "" && (!errors.As(err, &pg) || pg.Code != c.code) {
					t.Fatalf("err %v: want it to reach the %s", err, c.code)
				}
				if err == nil || !strings.Contains(err.Error(), endedByFn) {
					t.Fatalf("err %v does not say %q", err, endedByFn)
				}
				if info := sqlretry.Classify(err); info.Safety != retry.Unsafe {
					t.Errorf("classified %+v, want Unsafe", info)
				}
			})
		}
	}
}

// A savepoint rolled back by fn's own ROLLBACK TO, then a conflict: the
// transaction is still PgxTx's, and runs again.
func TestFnsRollbackToSavepointStillRunsAgain(t *testing.T) {
	needServer(t)
	for _, a := range endRunners(t) {
		t.Run(a.name, func(t *testing.T) {
			table := tableFor(t)
			runs := 0
			err := a.run(t.Context(), func(ctx context.Context, tx q) error {
				runs++
				for _, s := range []string{"INSERT INTO " + table + " VALUES (1)", "SAVEPOINT s",
					"INSERT INTO " + table + " VALUES (2)", "ROLLBACK TO SAVEPOINT s"} {
					if err := tx.Exec(ctx, s); err != nil {
						return err
					}
				}
				if runs == 1 {
					return tx.Exec(ctx, "SELECT "+table+"_raise('40001')")
				}
				return nil
			})
			if n := queryInt(t, "SELECT count(*) FROM "+table); err != nil || runs != 2 || n != 1 {
				t.Fatalf("%d runs, %d rows committed (err %v); want 2 runs, 1 row", runs, n, err)
			}
		})
	}
}

// WithoutStatementWatch: Tx no longer reads fn's connection, so a chained
// end is not seen and fn's committed part runs again after a conflict (what
// the option's doc warns of); a plain END is still seen from the
// connection's state, and is not run again.
func TestWithoutStatementWatch(t *testing.T) {
	needServer(t)
	for _, c := range []struct {
		name       string
		end        string
		runs, rows int64
	}{
		{"COMMIT AND CHAIN is not seen", "COMMIT AND CHAIN", 2, 2},
		{"END is seen", "END", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := tableFor(t)
			var runs int64
			err := sqlretry.Tx(t.Context(), sqlDB, func(ctx context.Context, tx *sql.Tx) error {
				runs++
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, c.end); err != nil {
					return err
				}
				if runs == 1 {
					_, err := tx.ExecContext(ctx, "SELECT "+table+"_raise('40001')")
					return err
				}
				return nil
			}, againAtOnce(), sqlretry.WithoutStatementWatch())
			n := queryInt(t, "SELECT count(*) FROM "+table)
			if runs != c.runs || n != c.rows {
				t.Fatalf("%d runs, %d rows committed (err %v); want %d runs, %d rows", runs, n, err, c.runs, c.rows)
			}
		})
	}
}
