// Package sqlretry runs database transactions that retry serialization
// failures and deadlocks, through retry.Do.
//
// Under SERIALIZABLE isolation, often under REPEATABLE READ, and with
// deadlocks at any level, PostgreSQL (and CockroachDB) abort a transaction
// with SQLSTATE 40001 (serialization_failure) or 40P01 (deadlock_detected)
// and expect the client to run the whole transaction again. PostgreSQL's
// documentation says so in "Serialization Failure Handling"
// (https://www.postgresql.org/docs/current/mvcc-serialization-failure-handling.html)
// and "Transaction Isolation"
// (https://www.postgresql.org/docs/current/transaction-iso.html); the codes
// are in its Appendix A
// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
//
//	err := sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
//		var balance int64
//		if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = $1", from).Scan(&balance); err != nil {
//			return err
//		}
//		if balance < amount {
//			return errInsufficientFunds // rolled back, returned at once
//		}
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, from)
//		return err
//	}, sqlretry.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}))
//
// Tx takes a *sql.DB (any driver whose errors have a SQLState() string
// method: pgx's stdlib driver, lib/pq); PgxTx takes a *pgxpool.Pool or a
// *pgx.Conn. A whole program, with pgx's stdlib driver:
//
//	package main
//
//	import (
//		"context"
//		"database/sql"
//		"log"
//		"os"
//		"time"
//
//		_ "github.com/jackc/pgx/v5/stdlib" // registers the driver "pgx"
//		"github.com/retrykit/retry"
//		"github.com/retrykit/retry/sqlretry"
//	)
//
//	func main() {
//		ctx := context.Background()
//		db, err := sql.Open("pgx", os.Getenv("DATABASE_URL")) // postgres://user:password@host:5432/db
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer db.Close()
//		err = sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
//			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1")
//			return err
//		},
//			sqlretry.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}),
//			// Hooks are retry's: OnRetry(func(ctx, attempt, delay, err)) sees each run again.
//			sqlretry.WithRetryOptions(retry.OnRetry(func(_ context.Context, attempt int, _ time.Duration, err error) {
//				log.Printf("run %d conflicted: %v", attempt, err)
//			})))
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// With pgx's own API, pool, err := pgxpool.New(ctx, dsn) and
// sqlretry.PgxTx(ctx, pool, func(ctx context.Context, tx pgx.Tx) error { ... })
// do the same (ExamplePgxTx). Both follow the same rules:
//
//   - A conflict (40001, 40P01), at BEGIN, in fn or at COMMIT, rolls the
//     transaction back and runs all of it again, fn included, unless
//     postgres_fdw relayed it from a remote server at COMMIT (see below).
//   - Any other error rolls back and is returned at once: a unique
//     violation, a syntax error, an error fn returns of its own, a cancelled
//     context.
//   - An error at COMMIT that does not say the server rolled back (the
//     connection lost, the context cancelled during COMMIT, an attempt cut
//     by retry.AttemptTimeout, a server shutting down) lost COMMIT's answer:
//     the transaction may have committed. It is resolved, never guessed
//     (see "A COMMIT whose answer was lost"): committed, the call succeeds
//     and fn does not run again; not committed, the run is safe to run
//     again; unresolved, the error is an *InDoubtError (ErrInDoubt), never
//     run again, by this package or by a loop around it (Classify reports
//     it Unsafe), since running it again could apply a payment twice. So is
//     an error of COMMIT that PostgreSQL relays from
//     a remote server of postgres_fdw, a conflict included: postgres_fdw
//     commits the transaction's remote parts one by one before the local
//     one, so another remote may have committed its part (the error's
//     routine, which lc_messages does not translate, tells such an error
//     from a local one). A local conflict found at COMMIT comes after the
//     remote parts committed too (SERIALIZABLE's check runs after
//     postgres_fdw commits them), and nothing in the error shows it: a
//     transaction that may write through postgres_fdw needs
//     WithForeignWrites, under which no error of COMMIT runs again. So is
//     an error fn returns after it ended the
//     transaction itself, a conflict included: with the driver's Commit or
//     Rollback, or with a COMMIT, END or ROLLBACK statement, which the
//     server's answer shows (see "What fn must do": fn must leave COMMIT
//     and ROLLBACK to this package). A COMMIT that pgx reports answered
//     with ROLLBACK committed nothing: fn hid the error that aborted it,
//     and it is returned, not run again.
//   - Every failure returns the *retry.Error of retry.Do, wrapping the last
//     error: errors.As reaches the driver's *pgconn.PgError, errors.Is the
//     reason retrying stopped.
//
// # A COMMIT whose answer was lost
//
// When the connection fails after COMMIT was sent, or the attempt's context
// ends during COMMIT, the client cannot know whether the transaction
// committed: a COMMIT that waits for a synchronous standby has already
// committed locally, one cut short in a deferred trigger has not. Tx and
// PgxTx read the transaction's id, pg_current_xact_id_if_assigned(), in the
// same write as COMMIT, at no cost of a round trip: a fast-path call of the
// function (the protocol's FunctionCall message, which libpq's PQfn sends:
// no statement to parse and plan), then COMMIT, a query of its own. The
// server answers the call, and sends the answer, before it runs COMMIT, so
// that the id reaches the client even when COMMIT's answer never does. A
// connection's first commit reads the id with a statement instead, which
// also reads the function's OID; then, its transaction committed, the
// connection makes one fast-path call in an empty transaction of its own,
// a round trip once in its life, to learn whether the way to the server
// takes the message (a proxy that audits statements may refuse it, with an
// error or by closing the session; pgcat drops it without a word). Its
// later commits take the fast path if it did,
// and the statement if not, so that such a proxy costs no transaction
// (unless it is put in the way of a connection that had learned the fast
// path: that transaction fails, or is in doubt if the link is lost too).
// After a failure that lost the answer they ask
// pg_xact_status(id) on another connection of the same database, which reads
// the commit log (PostgreSQL's "System Information Functions and Operators",
// https://www.postgresql.org/docs/current/functions-info.html, documents it
// for a client disconnected while COMMIT was in progress). A COMMIT whose
// answer they stop waiting for (the attempt's context ended) is first sent
// a cancel request, as pgx sends for any exchange it abandons, while the
// call's context is live (after it, the lookup has no time to wait
// anyway), and its connection closed: a COMMIT waiting for a synchronous
// standby then ends committed locally (PostgreSQL warns that the standby
// may not have it yet: resolved committed, it is durable on the primary
// only), one in a deferred trigger ends aborted; without it, the backend
// would wait for the standby as long as it takes, pg_xact_status saying
// "in progress" until then. An error in the id's request proves that
// nothing committed only when PostgreSQL's backend sent it (its errors name
// the routine that raised them): a proxy's own (PgBouncer's FATAL "server
// conn crashed?") may come after the server committed, and leaves the
// outcome in doubt. Once the attempt's context has ended, before COMMIT
// was written, COMMIT is not sent: the transaction is rolled back, and the
// run is safe to run again. The lookup says:
//
//   - "committed": the call succeeds, and fn is not run again. OnResolved
//     is told, with the attempt's context; a retry.Trace sees the attempt
//     succeed.
//   - "aborted", or no id (the transaction wrote nothing): nothing
//     committed; the run failed safe to run again (Classify: Safe, a server
//     fault, as a connection lost before COMMIT), and runs again as the
//     strategy allows (the default leaves it to the caller's loop, if any).
//   - "in progress": the old backend still runs it (a deferred trigger, a
//     COMMIT still in flight); the lookup waits, bounded by the call's
//     context.
//   - no answer (no other connection, as for PgxTx on a *pgx.Conn; the
//     call's context ended; an id too old to know): an *InDoubtError with
//     the id and the cause, errors.Is ErrInDoubt, never run again.
//
// ErrInDoubt asks the caller to find out before doing the work again: read
// back its effect (the row the transfer wrote), or give the work an
// idempotency key that a second run finds already used. CockroachDB's
// "result is ambiguous" (SQLSTATE 40003, statement_completion_unknown) is
// in doubt too: CockroachDB has no pg_xact_status. With WithForeignWrites,
// or for an error postgres_fdw relayed, only "committed" resolves: a local
// transaction that aborted may have committed its remote parts.
//
// The id is read through pgx only: PgxTx with a *pgxpool.Pool or a
// *pgx.Conn, Tx with pgx's stdlib driver, on PostgreSQL 13 or later. With a
// Beginner of one's own, another driver, a CommitQuery of the caller's or
// CockroachDB, a lost answer is in doubt, as before. A transaction with no
// id when COMMIT is sent is taken to have written nothing, which misjudges
// a NOTIFY alone (PostgreSQL assigns its id during COMMIT) and writes made
// only through postgres_fdw (which WithForeignWrites covers). A run cut
// short in fn, before COMMIT (fn returns the context's error), is not
// resolved: it is not run again, as WithRetryOptions says; one whose fn
// returned nil after the attempt's end sends no COMMIT (above). pgx's QueryTracer of the connection sees that
// COMMIT as one query, with its command tag or error, as it sees pgx's own
// Commit (the id's request in the same write is not shown), or the ROLLBACK
// sent in its place once the attempt's context has ended; through Tx it
// also sees a "commit" fail with "conn busy": the driver's Commit, by which
// database/sql's transaction is told that it ended, finds the connection
// held busy by Tx and sends nothing.
//
// # The default strategy
//
// Conflicts are the database working as designed, not a sign of overload, so
// the default strategy (DefaultStrategy) is made for contention: up to 10 runs
// with full-jitter exponential backoff from 5 ms to 500 ms, and no retry
// quota or failure streak that would stop retrying the moment contention
// peaks. The bound, 10 runs and about 1.6 s of waiting, still stops a
// transaction that can never commit. With 32 goroutines incrementing one row
// under SERIALIZABLE it commits all but a fraction of a percent of the calls
// (those that conflicted on all 10 runs give up), with about one aborted run
// per commit (README.md has the numbers). The default retries conflicts only:
// for a refused connection or a server shutting down, which a strategy built
// for outages should judge (retry.Adaptive, with its protection against
// retry storms), pass WithStrategy, or leave it to the caller's loop.
//
// # Retries at one layer
//
// retrykit's rule (see retry.CallerRetries) is that when a caller's loop
// retries, the integrations inside it make one attempt for the failures the
// caller will retry anyway. A transaction's conflicts are the exception: only
// the transaction can run itself again, BEGIN to COMMIT, and the caller's loop
// would see its give-up as final. So inside an outer retry.Do:
//
//   - The transaction retries its conflicts with its own strategy, whatever
//     the caller's mark says, and commits at most once per call. When it
//     gives up, its *retry.Error is Unsafe to the caller's loop, which does
//     not multiply the runs.
//   - Any other failure that may be retried (a refused connection at BEGIN,
//     a pooled connection the server had closed, class 08 or 53 before
//     COMMIT, an error of fn marked retry.Transient) is left to the caller:
//     one run, a give-up with retry.ErrOuterLoop, and the caller's loop
//     retries the whole call with its own backoff and quota.
//   - The transaction's loop does not mark the context it gives fn
//     (retry.Unmarked): it is not a layer of retries for the clients fn
//     calls, so a retrying client in fn (httpretry, grpcretry) keeps its rule
//     with the caller's loop, and a failure it leaves to that loop passes
//     through the transaction's.
//
// # What fn must do
//
// fn runs again from the start after a conflict: it must do its work through
// the transaction it is given, and must not have effects outside it (a
// message sent, a value kept in memory, a statement sent through dblink,
// which commits on its own) that a second run would repeat. It
// must return the transaction's errors as they are, or wrapped with %w, so
// that a conflict is seen as one: an error turned into a string hides it.
//
// fn must not end the transaction: COMMIT and ROLLBACK are this package's. An
// fn that fails after ending it anyway is never run again, since its work may
// have committed: the error says that fn ended the transaction itself, and
// Classify reports it Unsafe. Tx and PgxTx see an end by the driver's Commit
// or Rollback, and by a statement of fn's (COMMIT, END, ROLLBACK, PREPARE
// TRANSACTION, through tx or its connection) after which the connection is
// in no transaction, from the transaction status of the server's last
// ReadyForQuery message, without asking the server. Tx through a driver
// other than pgx's stdlib asks instead, by sending SAVEPOINT, which
// PostgreSQL refuses outside a transaction block (25P01): a round trip on a
// run that failed with an error that may be retried, and only there. A
// ROLLBACK statement cannot be told from a COMMIT that way.
//
// An end that leaves the connection in a transaction again (COMMIT AND
// CHAIN, ROLLBACK AND CHAIN, COMMIT; BEGIN in one query string) shows
// nothing in its status ('T', or 'E' once a later statement failed, as in
// the transaction Tx or PgxTx began), and pgx returns only the last command
// tag of a query string of several statements. So PgxTx reads the text of
// every statement fn sends through tx, its savepoints (tx.Begin,
// pgx.BeginFunc) and its batches, and the text of those it prepares, before
// it is sent: one that is COMMIT, END, ABORT, ROLLBACK (not ROLLBACK TO a
// savepoint) or PREPARE TRANSACTION, alone or among others in one string
// (split at semicolons outside quotes, dollar quotes and comments, as
// PostgreSQL's lexer does), counts as an end, sent or not, answered or not.
// It costs no round trip and no allocation. Where the reading may err, it
// errs toward an end where there is none (the END of a BEGIN ATOMIC function
// body counts): a conflict after it is not run again.
//
// Tx, through pgx's stdlib driver, reads what fn's connection sends and
// receives while fn runs, from pgx's trace of the connection
// (pgproto3.Frontend.Trace, pgx's PQtrace), which it sets on the
// connection when fn starts and removes when fn returns: the text of each
// query and of each statement prepared, read as PgxTx reads it, and the
// server's answers, a command tag COMMIT or PREPARE TRANSACTION (which
// answer COMMIT and END, AND CHAIN or not, sent by text or by the name of a
// statement prepared before fn ran) or a ReadyForQuery outside a
// transaction. It costs no round trip, but pgx formats each message for the
// trace, rows included: about 2 µs a row of three columns read in fn (1000
// such rows: 2.8 ms a transaction instead of 1.0), about 10 µs for a short
// one (BEGIN, one UPDATE, COMMIT: 3 % of its time on a loopback
// connection). A trace of one's own on that connection is replaced while
// fn runs, and removed after. WithoutStatementWatch turns the trace off,
// for an fn that reads many rows and never ends the transaction with SQL
// of its own: a plain COMMIT, END or ROLLBACK is still seen then, from the
// connection's state when fn returns. Neither sees:
//
//   - with Tx through a driver other than pgx's stdlib, an end that leaves
//     a transaction open: database/sql shows fn's statements to no one;
//   - with Tx, a ROLLBACK AND CHAIN run by the name of a statement
//     prepared before fn ran (its command tag, ROLLBACK, is that of
//     ROLLBACK TO a savepoint too): it committed nothing, so running fn
//     again repeats nothing;
//   - with PgxTx, such an end sent on tx.Conn() rather than tx, run by the
//     name of a statement prepared other than through tx, or written into
//     the query by a pgx.QueryRewriter argument of one's own;
//   - a COMMIT of fn's whose answer was never read (cut short by the
//     context, its connection closed before the answer came), except one
//     whose text PgxTx or Tx read;
//   - with Tx, an end followed by the end of the context (database/sql then
//     rolls back on its own, which reads as an end too); through a driver
//     other than pgx's stdlib, also one followed by a statement still in
//     flight (a Rows left open) or by a lost connection.
//
// Such an fn may run again after it committed: it is a misuse, as is any
// effect of fn outside the transaction.
//
// CockroachDB's client-side retry protocol (SAVEPOINT cockroach_restart) is
// not implemented: PostgreSQL, which the tests run against, cannot test it.
// Tx and PgxTx work with CockroachDB as with PostgreSQL, by running the whole
// transaction again.
package sqlretry
