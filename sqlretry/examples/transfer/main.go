// Command transfer moves money between a few accounts from many goroutines at
// once, under SERIALIZABLE isolation, with sqlretry.PgxTx: conflicts are
// frequent, each is rolled back and run again, and the total never changes.
// A transfer that still conflicts after the default's 10 runs gives up and is
// counted, as a refused one is; the run goes on.
//
//	go run ./sqlretry/examples/transfer -dsn 'postgres://localhost/postgres'
//
// It creates (and drops first) the table transfer_accounts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	workers := flag.Int("workers", 16, "goroutines making transfers")
	transfers := flag.Int("transfers", 50, "transfers per goroutine")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *dsn, *workers, *transfers); err != nil {
		fmt.Fprintln(os.Stderr, "transfer:", err)
		if *dsn == "" {
			// With no DSN, pgx tries libpq's defaults (a local socket, the
			// user's name): say how to point it at a server instead.
			fmt.Fprintln(os.Stderr, "transfer: no server found at libpq's defaults; give one with -dsn 'postgres://user:password@host:5432/db' or DATABASE_URL")
		}
		os.Exit(1)
	}
}

var errInsufficientFunds = errors.New("insufficient funds")

// run makes the transfers, with opts added to each PgxTx call, and reports
// them to out. A transfer that gave up after conflicts is counted and the
// others go on; any other error ends the run.
func run(ctx context.Context, out io.Writer, dsn string, workers, transfers int, opts ...sqlretry.Option) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(workers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	const accounts, initial = 4, 1000
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS transfer_accounts;
		CREATE TABLE transfer_accounts (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))`); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "INSERT INTO transfer_accounts SELECT g, $1 FROM generate_series(1, $2) g", initial, accounts); err != nil {
		return err
	}

	var committed, refused, gaveUp, conflicts atomic.Int64
	countConflicts := sqlretry.WithRetryOptions(retry.OnRetry(func(context.Context, int, time.Duration, error) {
		conflicts.Add(1)
	}))
	serializable := sqlretry.WithPgxTxOptions(pgx.TxOptions{IsoLevel: pgx.Serializable})
	opts = append([]sqlretry.Option{serializable, countConflicts}, opts...)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range transfers {
				from := rand.IntN(accounts) + 1
				to := from%accounts + 1
				amount := int64(rand.IntN(100) + 1)
				err := sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error {
					var balance int64
					if err := tx.QueryRow(ctx, "SELECT balance FROM transfer_accounts WHERE id = $1", from).Scan(&balance); err != nil {
						return err
					}
					if balance < amount {
						return errInsufficientFunds
					}
					if _, err := tx.Exec(ctx, "UPDATE transfer_accounts SET balance = balance - $1 WHERE id = $2", amount, from); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "UPDATE transfer_accounts SET balance = balance + $1 WHERE id = $2", amount, to)
					return err
				}, opts...)
				switch {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, errInsufficientFunds):
					refused.Add(1)
				case errors.Is(err, retry.ErrMaxAttempts) && conflict(err):
					// Rolled back: the transfer was not made, and the
					// others can still be.
					gaveUp.Add(1)
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	var total int64
	if err := pool.QueryRow(ctx, "SELECT sum(balance) FROM transfer_accounts").Scan(&total); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d transfers committed, %d refused for insufficient funds, %d gave up after conflicts, %d conflicts run again, in %v\n",
		committed.Load(), refused.Load(), gaveUp.Load(), conflicts.Load(), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "total balance: %d (was %d)\n", total, accounts*initial)
	if total != accounts*initial {
		return fmt.Errorf("money was created or lost: %d", total-accounts*initial)
	}
	return nil
}

// conflict reports whether err is a serialization failure or a deadlock.
func conflict(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40001" || pg.Code == "40P01")
}
