package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/retrykit/retry/sqlretry"
	"github.com/retrykit/retry/sqlretry/pgtest"
)

// BenchmarkSQLResolvingCommit measures what reading the transaction's id
// with its COMMIT costs sqlretry, so that a COMMIT whose answer is lost can
// be resolved: a short transaction (BEGIN, one UPDATE, COMMIT) on the
// benchmarks' server over loopback TCP, one at a time. PgxTx/resolving
// reads the id in COMMIT's write; PgxTx/plain commits with a CommitQuery of
// the caller's, for which sqlretry reads no id (the cost before); pgx is
// the same transaction without sqlretry, and pgx/flush the same with the
// early send that reading the id needs, and no id (flushedCommit).
// Tx/resolving and database-sql are the same through pgx's stdlib driver.
// Compare ns/op: the id read adds no round trip.
// BenchmarkSQLResolvingCommitPaired compares them under the same load.
func BenchmarkSQLResolvingCommit(b *testing.B) {
	pool, db := loopback(b, pgBench.start(b), 40)
	for _, c := range shortTransactions(b, pool, db, "bench_resolve") {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loopback returns a pool and a *sql.DB of at most conns connections each,
// on c over loopback TCP.
func loopback(b *testing.B, c *pgtest.Cluster, conns int) (*pgxpool.Pool, *sql.DB) {
	cfg, err := pgxpool.ParseConfig(c.LoopbackDSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	db, err := sql.Open("pgx", c.LoopbackDSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(0)
	return pool, db
}

// shortTransaction is one way of running the short transaction.
type shortTransaction struct {
	name string
	run  func() error
}

// shortTransactions creates table, with its one row, and returns the ways
// of running the short transaction on it: PgxTx/resolving, PgxTx/plain and
// pgx on pool, Tx/resolving and database-sql on db, and pgx/flush on pool.
func shortTransactions(b *testing.B, pool *pgxpool.Pool, db *sql.DB, table string) []shortTransaction {
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+table+"; CREATE TABLE "+table+" (id int PRIMARY KEY, n bigint); INSERT INTO "+table+" VALUES (1, 0)"); err != nil {
		b.Fatal(err)
	}
	update := "UPDATE " + table + " SET n = n + 1 WHERE id = 1"
	pgxFn := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, update)
		return err
	}
	sqlFn := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, update)
		return err
	}
	return []shortTransaction{
		{"PgxTx/resolving", func() error { return sqlretry.PgxTx(ctx, pool, pgxFn) }},
		{"PgxTx/plain", func() error {
			return sqlretry.PgxTx(ctx, pool, pgxFn, sqlretry.WithPgxTxOptions(pgx.TxOptions{CommitQuery: "COMMIT"}))
		}},
		{"pgx", func() error { return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return pgxFn(ctx, tx) }) }},
		{"Tx/resolving", func() error { return sqlretry.Tx(ctx, db, sqlFn) }},
		{"database-sql", func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := sqlFn(ctx, tx); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}},
		{"pgx/flush", func() error { return flushedCommit(ctx, pool, update) }},
	}
}

// flushedCommit runs the short transaction on pgx alone, with a bare Sync
// message before COMMIT in COMMIT's write: the server answers it with a
// ReadyForQuery, which it sends at once, before it runs COMMIT. It reads
// nothing: it is the early send that reading the id needs (so that the id
// reaches the client before COMMIT's answer, which may be lost), and what
// that send costs on this machine, with no id in it. What resolution costs
// over it is the fast-path call and sqlretry's handling.
func flushedCommit(ctx context.Context, pool *pgxpool.Pool, update string) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	conn := c.Conn()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, update); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return err
	}
	pc := conn.PgConn()
	f := pc.Frontend()
	f.Send(&pgproto3.Sync{})
	f.SendQuery(&pgproto3.Query{String: "COMMIT"})
	if err := f.Flush(); err != nil {
		_ = pc.Close(ctx)
		return err
	}
	var tag string
	for ready := 0; ready < 2; {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			_ = pc.Close(ctx)
			return err
		}
		switch msg := msg.(type) {
		case *pgproto3.ReadyForQuery:
			ready++
		case *pgproto3.CommandComplete:
			tag = string(msg.CommandTag)
		case *pgproto3.ErrorResponse:
			tag = msg.Message
		}
	}
	if tag != "COMMIT" {
		return fmt.Errorf("COMMIT answered %q", tag)
	}
	return nil
}

// BenchmarkSQLResolvingCommitPaired runs, in each iteration, the short
// transaction of BenchmarkSQLResolvingCommit once in each way, in an order
// drawn afresh each iteration, all on one connection over loopback TCP for
// each API (a pool of one, a *sql.DB of one), and reports time ratios:
// PgxTx/plain-resolving is PgxTx with the id read over PgxTx without it (a
// CommitQuery of the caller's), the cost of resolution; PgxTx/pgx-resolving
// and Tx/database-sql are sqlretry's whole cost over the same transaction
// without it (Tx cannot be asked not to read the id); pgx/pgx-flush is the
// floor under the first, the cost of the early send alone (flushedCommit). The runs of one
// iteration see the same load on a shared machine, where separate
// benchmarks, run one after another, do not; and the same backend, whose
// caches and plans they share. The order is random because a fixed
// rotation gives each way the same predecessor every time: the way after
// the last database/sql one always paid for the switch to the other
// connection's backend (on a unix socket PgxTx/resolving read 1.11x
// PgxTx/plain in rotation, about 1.05x in random order). -count 10 and
// benchstat give each ratio's median and its confidence interval.
//
// It runs on two servers: test-cluster is the benchmarks' (and sqlretry's
// tests'), whose commits cost no disk flush (fsync and synchronous_commit
// off), the worst case for a cost of resolution, which is the same in
// time; durable commits as PostgreSQL does by default, each COMMIT waiting
// for its WAL to reach the disk.
func BenchmarkSQLResolvingCommitPaired(b *testing.B) {
	for _, srv := range []struct {
		name string
		pg   *pgServer
	}{{"test-cluster", pgBench}, {"durable", pgDurable}} {
		b.Run(srv.name, func(b *testing.B) {
			one, db := loopback(b, srv.pg.start(b), 1)
			runs := shortTransactions(b, one, db, "bench_resolve_paired")
			for _, r := range runs { // connect, and warm the backends up
				for range 100 {
					if err := r.run(); err != nil {
						b.Fatal(err)
					}
				}
			}
			total := make([]time.Duration, len(runs))
			order := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				for _, i := range order.Perm(len(runs)) {
					start := time.Now()
					if err := runs[i].run(); err != nil {
						b.Fatal(err)
					}
					total[i] += time.Since(start)
				}
			}
			// In the order of shortTransactions.
			ratio := func(over, base int) float64 { return float64(total[over]) / float64(total[base]) }
			b.ReportMetric(ratio(0, 1), "PgxTx/plain-resolving")
			b.ReportMetric(ratio(0, 2), "PgxTx/pgx-resolving")
			b.ReportMetric(ratio(3, 4), "Tx/database-sql")
			b.ReportMetric(ratio(5, 2), "pgx/pgx-flush")
		})
	}
}
