package sqlretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// A COMMIT cancelled (pg_cancel_backend) while a deferred constraint trigger
// runs is answered with ERROR 57014 query_canceled: PostgreSQL rolled the
// transaction back, since it cannot report an error after the commit record
// as an ERROR. It is therefore not Unsafe: Tx and PgxTx, alone, with a
// strategy of their own or inside a caller's loop, do with it what they do
// with the same trigger cancelled before COMMIT (SET CONSTRAINTS … IMMEDIATE
// fires it in fn), and the table holds no row.
//
// statement_timeout cannot produce this error: PostgreSQL stops the
// statement's timer before it commits (finish_xact_command in
// src/backend/tcop/postgres.c), so a cancel request is the way to interrupt
// COMMIT's triggers.
func TestQueryCanceledAtCommit(t *testing.T) {
	forAPIs(t, func(t *testing.T, a api, table string) {
		slowCommitTable(t, table, "k int PRIMARY KEY")
		insert := func(ctx context.Context, tx q, pids chan<- int64) error {
			pid, err := tx.Int(ctx, "SELECT pg_backend_pid()")
			if err != nil {
				return err
			}
			pids <- pid
			return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
		}
		inFn := func(ctx context.Context, tx q, pids chan<- int64) error {
			if err := insert(ctx, tx, pids); err != nil {
				return err
			}
			return tx.Exec(ctx, "SET CONSTRAINTS slow_commit IMMEDIATE")
		}
		strategy := func() retry.Strategy { return &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(0)} }
		loops := []struct {
			name string
			run  func(ctx context.Context, fn func(context.Context, q) error) (outer int, err error)
		}{
			{"default", func(ctx context.Context, fn func(context.Context, q) error) (int, error) {
				return 1, a.run(ctx, fn)
			}},
			{"own_strategy", func(ctx context.Context, fn func(context.Context, q) error) (int, error) {
				return 1, a.run(ctx, fn, sqlretry.WithStrategy(strategy()))
			}},
			{"callers_loop", func(ctx context.Context, fn func(context.Context, q) error) (int, error) {
				outer := 0
				err := retry.Do(ctx, strategy(), func(ctx context.Context) error {
					outer++
					return a.run(ctx, fn)
				})
				return outer, err
			}},
		}
		for _, l := range loops {
			t.Run(l.name, func(t *testing.T) {
				// outcome runs fn through l, cancelling each run's statement
				// like like, and describes what the loops did.
				outcome := func(fn func(context.Context, q, chan<- int64) error, like string, atCommit bool) string {
					t.Helper()
					pids := make(chan int64, 10)
					cancelled := cancelEach(pids, like)
					runs := 0
					outer, err := l.run(t.Context(), func(ctx context.Context, tx q) error {
						runs++
						return fn(ctx, tx, pids)
					})
					close(pids)
					if err := <-cancelled; err != nil {
						t.Fatal(err)
					}
					last := innermost(err)
					var pe *pgconn.PgError
					if !errors.As(last, &pe) || pe.Code != "57014" ||
						strings.HasPrefix(last.Error(), "sqlretry: commit: ") != atCommit {
						t.Fatalf("%v; want a 57014 query_canceled, at COMMIT %t", err, atCommit)
					}
					if n := queryInt(t, "SELECT count(*) FROM "+table); n != 0 {
						t.Fatalf("%d rows committed, want none", n)
					}
					return fmt.Sprintf("runs %d, outer attempts %d, reasons %q, classified %+v",
						runs, outer, reasons(err), sqlretry.Classify(last))
				}
				before := outcome(inFn, "set constraints%", false)
				at := outcome(insert, "commit%", true)
				t.Logf("cancelled in fn: %s", before)
				if at != before {
					t.Errorf("cancelled at COMMIT: %s\nwant as in fn:      %s", at, before)
				}
			})
		}
	})
}

// cancelEach cancels the statement of each backend whose pid comes on pids
// (pg_cancel_backend) once it sleeps in a statement like the ILIKE pattern
// like. Once pids is closed it sends the first error, if any, and ends.
func cancelEach(pids <-chan int64, like string) <-chan error {
	done := make(chan error, 1)
	go func() {
		var first error
		for pid := range pids {
			if first != nil {
				continue
			}
			first = awaitPgSleep(context.Background(), pid, like)
			if first == nil {
				_, first = pool.Exec(context.Background(), "SELECT pg_cancel_backend($1)", pid)
			}
		}
		done <- first
	}()
	return done
}

// innermost returns the last error of the innermost loop whose give-up err
// is.
func innermost(err error) error {
	for {
		var re *retry.Error
		if !errors.As(err, &re) {
			return err
		}
		err = re.Err
	}
}

// reasons returns why each loop whose give-up err is stopped, outermost
// first.
func reasons(err error) []string {
	var rs []string
	for {
		var re *retry.Error
		if !errors.As(err, &re) {
			return rs
		}
		rs = append(rs, re.Reason.Error())
		err = re.Err
	}
}
