package sqlretry_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/retrykit/retry/sqlretry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

// The handles of the server TestMain starts (or SQLRETRY_TEST_DSN names),
// shared by the tests; each test uses tables of its own. dsn == "": no
// server, and the tests that need one skip, saying why (noServer).
var (
	dsn      string
	sqlDB    *sql.DB
	pool     *pgxpool.Pool
	noServer string
)

// serverSettings make the tests quick: a deadlock is found after 20 ms, not 1 s.
// The synchronous standby named never connects: a transaction that sets
// synchronous_commit = on (the cluster's is off) commits locally and then
// waits in COMMIT for good, which the tests of a COMMIT whose answer is lost
// after it committed need (needSyncStandby).
var serverSettings = []string{"deadlock_timeout=20ms", "max_connections=200", "max_prepared_transactions=4",
	"synchronous_standby_names=sqlretry_never_connects"}

func TestMain(m *testing.M) {
	flag.Parse()
	runtime.LockOSThread() // the server dies with this thread: see pgtest.Start
	ctx := context.Background()
	c, err := pgtest.Start(ctx, serverSettings...)
	switch {
	case pgtest.Missing(err) && !pgtest.Required():
		noServer = err.Error() + "; " + pgtest.RequireEnv + "=1 makes its absence a failure"
		fmt.Fprintln(os.Stderr, "sqlretry: skipping the tests that need PostgreSQL:", noServer)
		// Examples cannot skip: keep the one that needs no server.
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = f.Value.Set("^(Test|ExampleClassify$)")
		}
		os.Exit(m.Run())
	case err != nil:
		fmt.Fprintln(os.Stderr, "sqlretry tests need PostgreSQL:", err)
		os.Exit(1)
	}
	code := func() int {
		defer c.Stop() // on a test's panic too; Stop runs before the exit
		dsn = c.DSN
		if sqlDB, err = sql.Open("pgx", dsn); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer sqlDB.Close()
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg.MaxConns = 40
		if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pool.Close()
		return m.Run()
	}()
	os.Exit(code)
}

// needServer skips t when there is no PostgreSQL to test against.
func needServer(t testing.TB) {
	t.Helper()
	if dsn == "" {
		t.Skip(noServer)
	}
}

// exec runs statements outside any transaction of the code under test.
func exec(t testing.TB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := pool.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// queryInt returns the integer a query outside the code under test returns.
func queryInt(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// q is what the tests do in a transaction, through *sql.Tx or pgx.Tx alike.
type q interface {
	Exec(ctx context.Context, sql string, args ...any) error
	Int(ctx context.Context, sql string, args ...any) (int64, error)
	// Commit is for tests of an fn that commits itself, as fn must not.
	Commit(ctx context.Context) error
}

type sqlQ struct{ tx *sql.Tx }

func (s sqlQ) Exec(ctx context.Context, query string, args ...any) error {
	_, err := s.tx.ExecContext(ctx, query, args...)
	return err
}

func (s sqlQ) Int(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.tx.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

func (s sqlQ) Commit(context.Context) error { return s.tx.Commit() }

type pgxQ struct{ tx pgx.Tx }

func (p pgxQ) Commit(ctx context.Context) error { return p.tx.Commit(ctx) }

func (p pgxQ) Exec(ctx context.Context, query string, args ...any) error {
	_, err := p.tx.Exec(ctx, query, args...)
	return err
}

func (p pgxQ) Int(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := p.tx.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// api is one of the two entry points, Tx and PgxTx, with the options that
// ask it for an isolation level.
type api struct {
	name string
	run  func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error
	iso  func(level string) sqlretry.Option // "serializable", "repeatable read"
}

// apis returns Tx over database/sql (pgx's stdlib driver) and PgxTx over a
// pgxpool.Pool.
func apis() []api {
	return []api{
		{
			name: "Tx",
			run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
				return sqlretry.Tx(ctx, sqlDB, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) }, opts...)
			},
			iso: func(level string) sqlretry.Option {
				l := map[string]sql.IsolationLevel{"serializable": sql.LevelSerializable, "repeatable read": sql.LevelRepeatableRead}[level]
				return sqlretry.WithTxOptions(&sql.TxOptions{Isolation: l})
			},
		},
		{
			name: "PgxTx",
			run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
				return sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, opts...)
			},
			iso: func(level string) sqlretry.Option {
				l := map[string]pgx.TxIsoLevel{"serializable": pgx.Serializable, "repeatable read": pgx.RepeatableRead}[level]
				return sqlretry.WithPgxTxOptions(pgx.TxOptions{IsoLevel: l})
			},
		},
	}
}

// forAPIs runs f as a subtest for each entry point, with a table prefix of
// its own.
func forAPIs(t *testing.T, f func(t *testing.T, a api, table string)) {
	needServer(t)
	for _, a := range apis() {
		t.Run(a.name, func(t *testing.T) {
			table := strings.ToLower(strings.NewReplacer("/", "_", "#", "_").Replace(t.Name()))
			f(t, a, table)
		})
	}
}

// barrier lets n goroutines wait for each other once.
type barrier struct {
	mu   sync.Mutex
	left int
	all  chan struct{} // closed when the last one arrives
}

func newBarrier(n int) *barrier {
	return &barrier{left: n, all: make(chan struct{})}
}

// barrierTimeout bounds a wait at a barrier.
const barrierTimeout = 10 * time.Second

// wait arrives and waits for the others, at most barrierTimeout. It starts
// no goroutine, so that a wait that times out leaves none behind.
func (b *barrier) wait(t testing.TB) {
	t.Helper()
	if !b.arrive() {
		t.Error("barrier: the other transaction never arrived")
	}
}

// arrive arrives and reports whether the others did within barrierTimeout.
func (b *barrier) arrive() bool {
	b.mu.Lock()
	if b.left--; b.left == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	timer := time.NewTimer(barrierTimeout)
	defer timer.Stop()
	select {
	case <-b.all:
		return true
	case <-timer.C:
		return false
	}
}
