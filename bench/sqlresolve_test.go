package main

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/retrykit/retry/sqlretry"
)

// BenchmarkSQLResolvingCommit measures what reading the transaction's id
// with its COMMIT costs sqlretry, so that a COMMIT whose answer is lost can
// be resolved: a short transaction (BEGIN, one UPDATE, COMMIT) on the local
// server, one at a time. PgxTx/resolving reads the id in COMMIT's write;
// PgxTx/plain commits with a CommitQuery of the caller's, for which sqlretry
// reads no id (the cost before); pgx is the same transaction without
// sqlretry. Tx/resolving and database-sql are the same through pgx's stdlib
// driver. Compare ns/op: the id read adds no round trip.
func BenchmarkSQLResolvingCommit(b *testing.B) {
	pool := postgres(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS bench_resolve; CREATE TABLE bench_resolve (id int PRIMARY KEY, n bigint); INSERT INTO bench_resolve VALUES (1, 0)"); err != nil {
		b.Fatal(err)
	}
	const update = "UPDATE bench_resolve SET n = n + 1 WHERE id = 1"
	pgxFn := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, update)
		return err
	}
	sqlFn := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, update)
		return err
	}
	db, err := sql.Open("pgx", pgCluster.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for _, c := range []struct {
		name string
		run  func() error
	}{
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
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
