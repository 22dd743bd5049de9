// Command transfer moves money between a few accounts from many goroutines at
// once, under SERIALIZABLE isolation, with sqlretry.PgxTx: conflicts are
// frequent, each is rolled back and run again, and the total never changes.
// A transfer that still conflicts after the default's 10 runs gives up and is
// counted, as a refused one is; the run goes on.
//
// Each transfer carries an id, written to transfer_log, whose primary key
// makes it an idempotency key. A transfer whose outcome is unknown
// (sqlretry.ErrInDoubt: its COMMIT's answer was lost, and PostgreSQL could
// not say how it ended) is run again under the same key: if the first run
// committed, the second fails on the key and moves nothing; if it did not,
// the second makes the transfer. At the end the run checks that every
// account's balance is what the log says, so that no transfer was applied
// twice or half.
//
//	go run ./sqlretry/examples/transfer -dsn 'postgres://localhost/postgres'
//
// It creates (and drops first) the tables transfer_accounts and
// transfer_log.
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

// The accounts: how many, and what each holds at the start.
const accounts, initial = 4, 1000

// run makes the transfers, with opts added to each PgxTx call, and reports
// them to out. A transfer that gave up after conflicts is counted and the
// others go on; any other error ends the run.
func run(ctx context.Context, out io.Writer, dsn string, workers, transfers int, opts ...sqlretry.Option) error {
	pool, err := connect(ctx, dsn, workers)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := setUp(ctx, pool); err != nil {
		return err
	}
	return transferAll(ctx, out, pool, workers, transfers, opts...)
}

// connect returns a pool of up to conns connections to dsn.
func connect(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// setUp creates the accounts, each holding initial, and an empty log.
func setUp(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `DROP TABLE IF EXISTS transfer_accounts, transfer_log;
		CREATE TABLE transfer_accounts (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0));
		CREATE TABLE transfer_log (id bigint PRIMARY KEY, source int NOT NULL, target int NOT NULL, amount bigint NOT NULL)`)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, "INSERT INTO transfer_accounts SELECT g, $1 FROM generate_series(1, $2) g", initial, accounts)
	return err
}

// A transfer moves amount from one account to another, once: id is its
// idempotency key.
type transfer struct {
	id       int64
	from, to int
	amount   int64
}

// What became of a transfer.
type outcome int

const (
	made              outcome = iota // committed by this call
	madeBefore                       // committed by an earlier run whose outcome was in doubt
	refused                          // insufficient funds
	gaveUpOnConflicts                // conflicted on every run the strategy allowed
)

// maxDoubts bounds how many times a transfer in doubt is run again.
const maxDoubts = 3

// do makes t through PgxTx, and reports how many of its runs were in
// doubt.
func (t transfer) do(ctx context.Context, pool *pgxpool.Pool, opts ...sqlretry.Option) (outcome, int, error) {
	err := sqlretry.PgxTx(ctx, pool, t.run, opts...)
	doubts := 0
	for ; errors.Is(err, sqlretry.ErrInDoubt) && doubts < maxDoubts; doubts++ {
		// The first run may have committed: run it again under the same
		// key. A run still in progress holds the key, and this one waits
		// for its end, then fails on the key if it committed.
		err = sqlretry.PgxTx(ctx, pool, t.run, opts...)
		if keyTaken(err) {
			return madeBefore, doubts + 1, nil
		}
	}
	switch {
	case err == nil:
		return made, doubts, nil
	case errors.Is(err, errInsufficientFunds):
		return refused, doubts, nil
	case errors.Is(err, retry.ErrMaxAttempts) && conflict(err):
		// Rolled back: the transfer was not made, and the others can
		// still be.
		return gaveUpOnConflicts, doubts, nil
	}
	return 0, doubts, fmt.Errorf("transfer %d: %w", t.id, err)
}

// run is one run of the transfer's transaction.
func (t transfer) run(ctx context.Context, tx pgx.Tx) error {
	var balance int64
	if err := tx.QueryRow(ctx, "SELECT balance FROM transfer_accounts WHERE id = $1", t.from).Scan(&balance); err != nil {
		return err
	}
	if balance < t.amount {
		return errInsufficientFunds
	}
	if _, err := tx.Exec(ctx, "UPDATE transfer_accounts SET balance = balance - $1 WHERE id = $2", t.amount, t.from); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE transfer_accounts SET balance = balance + $1 WHERE id = $2", t.amount, t.to); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO transfer_log VALUES ($1, $2, $3, $4)", t.id, t.from, t.to, t.amount)
	return err
}

// transferAll makes transfers random transfers from each of workers
// goroutines, reports them to out, and checks the accounts against the log.
func transferAll(ctx context.Context, out io.Writer, pool *pgxpool.Pool, workers, transfers int, opts ...sqlretry.Option) error {
	var counts [gaveUpOnConflicts + 1]atomic.Int64
	var conflicts, doubts atomic.Int64
	countConflicts := sqlretry.WithRetryOptions(retry.OnRetry(func(context.Context, int, time.Duration, error) {
		conflicts.Add(1)
	}))
	serializable := sqlretry.WithPgxTxOptions(pgx.TxOptions{IsoLevel: pgx.Serializable})
	opts = append([]sqlretry.Option{serializable, countConflicts}, opts...)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := range transfers {
				from := rand.IntN(accounts) + 1
				t := transfer{id: int64(w*transfers + i + 1), from: from, to: from%accounts + 1, amount: int64(rand.IntN(100) + 1)}
				o, d, err := t.do(ctx, pool, opts...)
				doubts.Add(int64(d))
				if err != nil {
					errs <- err
					return
				}
				counts[o].Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintf(out, "%d transfers committed, %d refused for insufficient funds, %d gave up after conflicts, %d conflicts run again, in %v\n",
		counts[made].Load()+counts[madeBefore].Load(), counts[refused].Load(), counts[gaveUpOnConflicts].Load(), conflicts.Load(),
		time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "%d runs in doubt, run again under their key: %d transfers had been made by the run in doubt\n",
		doubts.Load(), counts[madeBefore].Load())
	return check(ctx, out, pool, counts[made].Load()+counts[madeBefore].Load())
}

// check fails unless the accounts hold what they started with, each the
// balance that the log's transfers give it, and the log holds the
// committed transfers, each once.
func check(ctx context.Context, out io.Writer, pool *pgxpool.Pool, committed int64) error {
	var total, logged, wrong int64
	err := pool.QueryRow(ctx, `SELECT (SELECT sum(balance) FROM transfer_accounts), (SELECT count(*) FROM transfer_log),
		(SELECT count(*) FROM transfer_accounts a WHERE a.balance <> $1
			+ coalesce((SELECT sum(amount) FROM transfer_log WHERE target = a.id), 0)
			- coalesce((SELECT sum(amount) FROM transfer_log WHERE source = a.id), 0))`, initial).Scan(&total, &logged, &wrong)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "total balance: %d (was %d)\n", total, accounts*initial)
	switch {
	case total != accounts*initial:
		return fmt.Errorf("money was created or lost: %d", total-accounts*initial)
	case logged != committed:
		return fmt.Errorf("%d transfers logged, %d committed", logged, committed)
	case wrong != 0:
		return fmt.Errorf("%d accounts do not hold what the log says", wrong)
	}
	return nil
}

// conflict reports whether err is a serialization failure or a deadlock.
func conflict(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40001" || pg.Code == "40P01")
}

// keyTaken reports whether err says the transfer's id is in the log
// already: the transfer was made by an earlier run.
func keyTaken(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "transfer_log_pkey"
}
