package sqlretry_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// A transfer between two accounts under SERIALIZABLE: a conflict with
// another transaction runs it again; the error of its own (insufficient
// funds) rolls it back and is returned.
func ExampleTx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", dsn) // e.g. "postgres://localhost/bank"
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS example_accounts;
		CREATE TABLE example_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO example_accounts VALUES (1, 100), (2, 0)`); err != nil {
		panic(err)
	}
	errInsufficientFunds := errors.New("insufficient funds")
	transfer := func(from, to int, amount int64) error {
		return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
			var balance int64
			if err := tx.QueryRowContext(ctx, "SELECT balance FROM example_accounts WHERE id = $1", from).Scan(&balance); err != nil {
				return err
			}
			if balance < amount {
				return errInsufficientFunds
			}
			if _, err := tx.ExecContext(ctx, "UPDATE example_accounts SET balance = balance - $1 WHERE id = $2", amount, from); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "UPDATE example_accounts SET balance = balance + $1 WHERE id = $2", amount, to)
			return err
		}, sqlretry.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}))
	}
	fmt.Println(transfer(1, 2, 70))
	err = transfer(1, 2, 70)
	fmt.Println(errors.Is(err, errInsufficientFunds))
	// Output:
	// <nil>
	// true
}

// PgxTx takes a *pgxpool.Pool (or a *pgx.Conn). The give-up of a transaction
// that conflicted on every run wraps the last conflict, the driver's
// *pgconn.PgError.
func ExamplePgxTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS example_stock;
		CREATE TABLE example_stock (sku text PRIMARY KEY, n int NOT NULL);
		INSERT INTO example_stock VALUES ('apple', 10)`); err != nil {
		panic(err)
	}
	err = sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, "SELECT n FROM example_stock WHERE sku = 'apple'").Scan(&n); err != nil {
			return err
		}
		// Another client takes one apple and commits, after this
		// transaction's snapshot: every run conflicts.
		if _, err := pool.Exec(ctx, "UPDATE example_stock SET n = n - 1 WHERE sku = 'apple'"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE example_stock SET n = $1 WHERE sku = 'apple'", n-1)
		return err
	},
		sqlretry.WithPgxTxOptions(pgx.TxOptions{IsoLevel: pgx.RepeatableRead}),
		sqlretry.WithStrategy(&retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}))
	var pgErr *pgconn.PgError
	var gaveUp *retry.Error
	if errors.As(err, &pgErr) && errors.As(err, &gaveUp) {
		fmt.Println(pgErr.Code, gaveUp.Attempts, errors.Is(err, retry.ErrMaxAttempts))
	}
	// Output: 40001 3 true
}

// Classify tells a conflict, which running the transaction again resolves,
// from the errors it does not.
func ExampleClassify() {
	for _, code := range []string{"40001", "40P01", "23505"} {
		info := sqlretry.Classify(&pgconn.PgError{Code: code})
		fmt.Println(code, info.Safety, info.Retryable())
	}
	// Output:
	// 40001 safe true
	// 40P01 safe true
	// 23505 maybe-safe false
}

// A COMMIT whose answer was lost is resolved with pg_xact_status: a
// transfer that committed succeeds without running again, and OnResolved
// says so. One that could not be resolved is in doubt: the caller reads
// the effect back (here, the transfer's row) before doing the work again.
func ExampleInDoubtError() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS example_transfers;
		CREATE TABLE example_transfers (id text PRIMARY KEY, amount int NOT NULL)`); err != nil {
		panic(err)
	}
	const id = "t-42" // the transfer's idempotency key
	err = sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO example_transfers VALUES ($1, 10)", id)
		return err
	}, sqlretry.OnResolved(func(_ context.Context, xid uint64, committed bool, cause error) {
		fmt.Println("COMMIT's answer lost (", cause, "); committed:", committed)
	}))
	var doubt *sqlretry.InDoubtError
	if errors.As(err, &doubt) {
		// Find out before transferring again.
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM example_transfers WHERE id = $1", id).Scan(&n); err != nil {
			panic(err)
		}
		fmt.Println("transaction", doubt.XID, "in doubt; committed:", n == 1)
		return
	}
	fmt.Println(err)
	// Output: <nil>
}
