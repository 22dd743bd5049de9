package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	crdbpgx "github.com/cockroachdb/cockroach-go/v2/crdb/crdbpgxv5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry/sqlretry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

// A PostgreSQL server of the SQL benchmarks, started on first use by a
// goroutine locked to its thread for good (the server dies with that
// thread), and stopped by TestMain.
type pgServer struct {
	settings []string
	once     sync.Once
	cluster  *pgtest.Cluster
	err      error
}

var (
	// pgBench is the server of the SQL benchmarks, set as sqlretry's
	// tests set theirs: commits cost no disk flush (fsync and
	// synchronous_commit off). It listens on loopback TCP too.
	pgBench = &pgServer{settings: []string{"max_connections=200", "deadlock_timeout=20ms", pgtest.Loopback}}
	// pgDurable commits as PostgreSQL does by default: each COMMIT waits
	// for its WAL to reach the disk. Only the resolution benchmark uses it.
	pgDurable = &pgServer{settings: []string{pgtest.Loopback, "fsync=on", "synchronous_commit=on", "full_page_writes=on"}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*pgServer{pgBench, pgDurable} {
		if s.cluster != nil {
			s.cluster.Stop()
		}
	}
	os.Exit(code)
}

// start returns the server, started on first use, skipping b on a machine
// without PostgreSQL.
func (s *pgServer) start(b *testing.B) *pgtest.Cluster {
	s.once.Do(func() {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			s.cluster, s.err = pgtest.Start(context.Background(), s.settings...)
			close(done)
			select {} // keep the thread, and the server with it
		}()
		<-done
	})
	if pgtest.Missing(s.err) && !pgtest.Required() {
		b.Skip(s.err) // no initdb or postgres here: the benchmarks need them
	}
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.cluster
}

// postgres returns a pool on pgBench, skipping b without PostgreSQL.
func postgres(b *testing.B) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(pgBench.start(b).DSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// increment is the contended transaction: one counter row, incremented under
// SERIALIZABLE. runs counts its runs, aborted or not.
func increment(runs *atomic.Int64) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		runs.Add(1)
		_, err := tx.Exec(ctx, "UPDATE bench_counter SET n = n + 1 WHERE id = 1")
		return err
	}
}

var serializable = pgx.TxOptions{IsoLevel: pgx.Serializable}

// sqlLibs are the ways to run the transaction: sqlretry's default, the
// cockroach-go pgx v5 adapter, and a hand-written loop that runs the
// transaction again at once after a conflict, up to 100 times.
var sqlLibs = []struct {
	name string
	run  func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error
}{
	{"sqlretry", func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error {
		return sqlretry.PgxTx(ctx, pool, fn, sqlretry.WithPgxTxOptions(serializable))
	}},
	{"crdb", func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error {
		return crdbpgx.ExecuteTx(ctx, pool, serializable, func(tx pgx.Tx) error { return fn(ctx, tx) })
	}},
	{"naive", func(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx) error) error {
		var err error
		for range 100 {
			if err = pgx.BeginTxFunc(ctx, pool, serializable, func(tx pgx.Tx) error { return fn(ctx, tx) }); !conflict(err) {
				return err
			}
		}
		return err
	}},
}

func conflict(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40001" || pg.Code == "40P01")
}

// BenchmarkSQLContention runs b.N increments of one counter row under
// SERIALIZABLE, from 8 and from 32 goroutines, through each library. It
// reports the transactions committed per second (read back from the row: a
// call that returns nil without having committed does not count), the
// aborted runs per commit, the calls that failed, and the calls that
// returned nil without committing.
func BenchmarkSQLContention(b *testing.B) {
	pool := postgres(b)
	ctx := context.Background()
	for _, g := range []int{8, 32} {
		for _, lib := range sqlLibs {
			b.Run(fmt.Sprintf("%s/goroutines=%d", lib.name, g), func(b *testing.B) {
				for _, s := range []string{"DROP TABLE IF EXISTS bench_counter",
					"CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL)",
					"INSERT INTO bench_counter VALUES (1, 0)"} {
					if _, err := pool.Exec(ctx, s); err != nil {
						b.Fatal(err)
					}
				}
				var runs, ok, failed atomic.Int64
				left := atomic.Int64{}
				left.Store(int64(b.N))
				fn := increment(&runs)
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range g {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							if err := lib.run(ctx, pool, fn); err != nil {
								failed.Add(1)
							} else {
								ok.Add(1)
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				var committed int64
				if err := pool.QueryRow(ctx, "SELECT n FROM bench_counter WHERE id = 1").Scan(&committed); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(committed)/elapsed.Seconds(), "commits/s")
				b.ReportMetric(float64(runs.Load()-committed)/float64(max(committed, 1)), "aborts/commit")
				b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
				b.ReportMetric(float64(ok.Load()-committed)/float64(b.N), "nil-uncommitted/op")
			})
		}
	}
}
