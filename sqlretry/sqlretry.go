package sqlretry

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrykit/retry"
)

// Beginner starts pgx transactions: *pgxpool.Pool and *pgx.Conn satisfy it.
type Beginner interface {
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}

// Option configures Tx and PgxTx.
type Option struct{ apply func(*config) }

// WithStrategy sets the strategy that decides whether and when a failed
// transaction runs again, in place of DefaultStrategy's. A strategy of one's
// own also decides the transient failures other than conflicts (a refused
// connection at BEGIN, a server shutting down), which the default leaves to
// the caller: see the package documentation. nil restores the default.
func WithStrategy(s retry.Strategy) Option {
	return Option{func(c *config) { c.strategy = s }}
}

// WithTxOptions sets the options Tx begins its transactions with (isolation
// level, read-only). nil, the default, is the database's default isolation
// level (READ COMMITTED for PostgreSQL), where conflicts are rarer: ask for
// sql.LevelSerializable or sql.LevelRepeatableRead to get the guarantees that
// make them happen.
func WithTxOptions(o *sql.TxOptions) Option {
	return Option{func(c *config) { c.txOpts = o }}
}

// WithPgxTxOptions sets the options PgxTx begins its transactions with.
func WithPgxTxOptions(o pgx.TxOptions) Option {
	return Option{func(c *config) { c.pgxOpts = o }}
}

// WithRetryOptions adds options to the retry.Do call that runs the
// transaction: hooks (retry.OnRetry, retry.OnGiveUp), retry.Log, a
// retry.Scope, retry.MaxElapsed, a tracer. Several WithRetryOptions add up.
//
// retry.AttemptTimeout bounds each run of the whole transaction, BEGIN to
// COMMIT; a run cut short during COMMIT has its outcome resolved as after a
// lost connection (see Tx), within the call's context. One cut short in fn
// (fn returns the context's error) is not run again: the connection's state
// cannot prove that fn did not commit (a COMMIT statement of its own,
// COMMIT AND CHAIN, a COMMIT still in flight), so the timeout counts as the
// caller's. One whose fn returned nil after the attempt's end sends no
// COMMIT: it is rolled back, and safe to run again.
// retry.Unmarked changes nothing: the transaction's loop never marks its
// attempts (see the package documentation).
func WithRetryOptions(opts ...retry.Option) Option {
	return Option{func(c *config) { c.retryOpts = append(c.retryOpts, opts...) }}
}

// The default strategy's settings: see DefaultStrategy.
const (
	defaultMaxAttempts = 10
	defaultBase        = 5 * time.Millisecond
	defaultMax         = 500 * time.Millisecond
)

// defaultStrategy is the strategy of the calls that name none. A Simple keeps
// no state between calls, so one serves every call.
var defaultStrategy = DefaultStrategy()

// DefaultStrategy returns a new strategy with the settings Tx and PgxTx use
// when given none: up to 10 runs of the transaction, waits of full-jitter
// exponential backoff from 5 ms doubling to a cap of 500 ms, and no quota.
//
// It is chosen for contention, not overload. A serialization failure or a
// deadlock is the database working as designed: it aborted one transaction so
// that the others could commit, and the client is expected to run it again.
// Retrying it adds no load to a database that is failing (the work of the
// aborted run is already done, and the retry waits until the transactions it
// conflicted with are likely over), so it gets neither a retry quota that a
// burst of conflicts would drain, as retry.Standard's would, nor
// retry.Adaptive's stop after a streak of failures, which under heavy
// contention is the normal case. Jitter spreads the runs that collided, so
// that they do not collide again, and the doubling backs off further the
// hotter the rows are. The bound is 10 runs and at most 1.6 s of waiting
// (5+10+…+320 ms, then 500 ms twice): a transaction that conflicts every time, a
// runaway, still stops, with a *retry.Error wrapping its last conflict.
// README.md measures what it does with 32 goroutines on one row.
//
// With this strategy the transaction runs again only after a conflict
// (SQLSTATE 40001 or 40P01); other failures are returned to the caller at
// once.
func DefaultStrategy() *retry.Simple {
	return &retry.Simple{
		MaxAttempts: defaultMaxAttempts,
		Backoff:     retry.Exponential{Base: defaultBase, Max: defaultMax, Jitter: retry.FullJitter},
	}
}

type config struct {
	strategy      retry.Strategy
	conflictsOnly bool // the default strategy: retry conflicts only
	txOpts        *sql.TxOptions
	pgxOpts       pgx.TxOptions
	retryOpts     []retry.Option
	foreign       bool // WithForeignWrites: no error of COMMIT runs again
	unwatched     bool // WithoutStatementWatch: Tx does not trace fn's connection
	resolved      func(ctx context.Context, xid uint64, committed bool, cause error)
}

// WithForeignWrites says that fn may write through postgres_fdw, or another
// foreign data wrapper or extension that commits remote work as the local
// COMMIT begins. PostgreSQL commits those remote transactions before the
// local checks that can still fail the COMMIT: a SERIALIZABLE transaction's
// serialization failure found at COMMIT (SQLSTATE 40001) comes after its
// remote part committed, so running the transaction again would apply that
// part twice. With this option no error of COMMIT runs the transaction
// again, a conflict included (Classify says Unsafe): the price is that a
// conflict at COMMIT, which PostgreSQL reports under SERIALIZABLE whenever
// it finds one only then, fails the call. Without it, such a conflict runs
// again, and only one that postgres_fdw relays from a remote server, which
// the error shows, does not (see Classify).
func WithForeignWrites() Option {
	return Option{func(c *config) { c.foreign = true }}
}

// WithoutStatementWatch says that fn never ends the transaction with SQL of
// its own that leaves one open (COMMIT AND CHAIN, ROLLBACK AND CHAIN, or
// COMMIT and then BEGIN in one string). Tx then does not trace what fn's
// connection sends and receives, which costs about 2 µs a row fn reads
// (pgx formats each message for its trace): a transaction that reads many
// rows runs at its speed without Tx. A plain COMMIT, END or ROLLBACK of
// fn's is still seen, from the connection's state when fn returns, and is
// never run again; one followed by BEGIN, or chained, is not, and its
// committed part would run again after a failure. PgxTx reads fn's
// statements at no such cost and ignores the option.
func WithoutStatementWatch() Option {
	return Option{func(c *config) { c.unwatched = true }}
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(c)
		}
	}
	if c.strategy == nil {
		c.strategy, c.conflictsOnly = defaultStrategy, true
	}
	return c
}

// rollbackTimeout bounds a rollback: it must not wait on a cancelled
// context, nor forever.
const rollbackTimeout = 5 * time.Second

// Tx runs fn in a transaction of db and commits it, through retry.Do.
//
// A conflict (SQLSTATE 40001 serialization_failure or 40P01
// deadlock_detected), at BEGIN, in fn or at COMMIT, rolls the transaction
// back and runs the whole of it again, BEGIN to COMMIT, as the strategy allows
// (DefaultStrategy unless WithStrategy). Any other error (23505
// unique_violation, a syntax error, an error of fn's own, the context's)
// rolls it back and is returned at once. An error at COMMIT that does not say
// the server rolled the transaction back (a lost connection, a cancelled
// context, an attempt cut by retry.AttemptTimeout, a server shutting down)
// loses COMMIT's answer: the transaction's id, read in the same write as
// COMMIT, is then looked up with pg_xact_status on another connection of
// db. Committed, the call succeeds and fn is not run again (OnResolved
// says so); aborted, or no id (it wrote nothing), the run is safe to run
// again, as a lost connection before COMMIT is; still in progress, the
// lookup waits, within ctx. Without an answer, or for an error PostgreSQL
// relayed from a remote server of postgres_fdw (a conflict included: another
// remote may have committed), the outcome is unknown: the error is an
// *InDoubtError (ErrInDoubt), never run again (Classify reports it Unsafe).
//
// fn must do all its work through tx and the context it is given, and must
// return the errors of tx unwrapped or wrapped with %w, so that a conflict is
// seen as one: fn runs again from the start after a conflict, and anything it
// did outside the transaction (a message sent, a counter in memory, a Tx or
// PgxTx of its own, which commits on its own) is done again. A panic in fn
// rolls the transaction back and is propagated. fn must not end the
// transaction, by tx's Commit or Rollback or by a statement (COMMIT, END,
// ROLLBACK): Tx does. When fn fails after ending it anyway, the outcome is
// unknown, as after a failed COMMIT, and the transaction is never run again,
// even for a conflict. Tx sees tx's Commit and Rollback from database/sql.
// Through pgx's stdlib driver it sees a statement's end, COMMIT AND CHAIN
// included, in the messages of fn's connection, which it reads while fn
// runs from pgx's trace of the connection, without a round trip. Through
// another driver it sends SAVEPOINT after fn failed with an error that may
// be retried, which PostgreSQL refuses outside a transaction block: a round
// trip on such a failed run, none on one that commits or fails for good (in
// a transaction a failure aborted, as a conflict in fn does, the server
// refuses it too, and logs that as an error). The package documentation
// says which ends it cannot see, and what the trace costs.
//
// On success Tx returns nil. Otherwise it returns the *retry.Error of
// retry.Do, which wraps the last error (errors.Is and errors.As reach it, and
// the driver's error under it: *pgconn.PgError through pgx's stdlib driver),
// the reason the loop stopped and the runs made.
func Tx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error, opts ...Option) error {
	c := newConfig(opts)
	switch {
	case fn == nil:
		return c.do(ctx, nil) // retry.ErrNilOperation
	case db == nil:
		return c.do(ctx, noDatabase)
	}
	status := func(ctx context.Context, xid uint64) (string, error) {
		var s sql.NullString
		err := db.QueryRowContext(ctx, statusQuery, strconv.FormatUint(xid, 10)).Scan(&s)
		return s.String, err
	}
	call := ctx
	noID := false // the server refused the id's request: this call's runs read none
	return c.do(ctx, func(ctx context.Context) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return &txError{stage: stageBegin, err: err}
		}
		defer conn.Close()
		pconn := pgxConnOf(conn)
		// The transaction's context ends with ctx, so that database/sql
		// rolls back on its own as before, but not once COMMIT is under way:
		// commitReadingID holds pgx's connection then, which
		// database/sql's rollback must not touch.
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		tx, err := conn.BeginTx(tctx, c.txOpts)
		if err != nil {
			return &txError{stage: stageBegin, err: err}
		}
		ends := watchEnds(conn, pconn, !c.unwatched)
		defer ends.done(conn) // after a panic of fn's too: the trace is fn's only
		if err := runSQL(ctx, tx, fn); err != nil {
			// Read before the ROLLBACK, which ends the transaction too.
			// Once ctx has ended, database/sql's own rollback may have been
			// read as an end: the answer is then ignored, as below.
			ended := ends.done(conn) && ctx.Err() == nil
			if pconn == nil {
				ended = noTransaction(ctx, tx, err)
			}
			// database/sql rolls back on its own when ctx ends; this
			// rollback then finds the transaction done, which is fine.
			// Found done while ctx is live, fn ended it itself: with a
			// COMMIT, perhaps.
			if errors.Is(tx.Rollback(), sql.ErrTxDone) && ctx.Err() == nil || ended {
				return &txError{stage: stageEnded, err: err}
			}
			return &txError{stage: stageFn, err: err}
		}
		ends.done(conn)
		if !stop() {
			// ctx ended before COMMIT: database/sql rolls back, and the
			// run is safe to run again, as PgxTx's (commitNotSent).
			_ = tx.Rollback()
			return &txError{stage: stageCommit, err: ctx.Err(), aborted: true}
		}
		if noID {
			pconn = nil
		}
		xid, read, err := commitReadingID(ctx, call, pconn, tx.Commit, tx.Commit)
		noID = noID || errors.As(err, new(*idRefused))
		if err != nil {
			return c.settle(call, ctx, &txError{stage: stageCommit, err: err, foreign: c.foreign}, xid, read, status)
		}
		return nil
	})
}

// pgxConnOf returns the connection of pgx under conn, nil if its driver is
// not pgx's stdlib. It is used only while database/sql does not use it:
// under conn's lock (endWatch), or by commitReadingID once fn has returned
// and the transaction's context cannot end.
func pgxConnOf(conn *sql.Conn) *pgx.Conn {
	var pc *pgx.Conn
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(interface{ Conn() *pgx.Conn }); ok {
			pc = c.Conn()
		}
		return nil
	})
	return pc
}

// probe is the statement by which Tx asks, after fn failed, whether the
// transaction it began is still open: in a transaction block it sets a
// savepoint, which the ROLLBACK that follows discards; in a failed one it is
// refused with 25P02; outside one, PostgreSQL refuses it with 25P01
// (no_active_sql_transaction), "SAVEPOINT can only be used in transaction
// blocks". It has no arguments, so that drivers send it as a simple query.
const probe = "SAVEPOINT sqlretry_probe"

// noTransaction, for a driver other than pgx's stdlib (with pgx's, Tx reads
// the connection's messages instead: endWatch), reports whether the server
// says that tx's connection is in no transaction (probe refused with
// 25P01): a statement of fn's ended the one Tx began (COMMIT, END,
// ROLLBACK), which database/sql does not see. It
// asks only when fn's error may be retried, by this loop or a caller's, since
// the answer changes nothing for the others (an error of the application's, a
// unique violation): a round trip on such a failed run only. Any other answer
// proves nothing: a transaction open (fn's own, after a COMMIT; BEGIN, is one
// too), a connection lost or busy with a Rows fn left open, a context ended
// (after which database/sql rolls back on its own, so the answer would be
// its).
func noTransaction(ctx context.Context, tx *sql.Tx, err error) bool {
	if ctx.Err() != nil || !Classify(&txError{stage: stageFn, err: err}).Retryable() {
		return false
	}
	_, err = tx.ExecContext(ctx, probe)
	var s sqlStater
	return errors.As(err, &s) && s.SQLState() == noActiveSQLTransaction
}

// runSQL calls fn, rolling tx back if fn panics.
func runSQL(ctx context.Context, tx *sql.Tx, fn func(context.Context, *sql.Tx) error) (err error) {
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	err = fn(ctx, tx)
	done = true
	return err
}

// PgxTx runs fn in a transaction begun on db and commits it, through
// retry.Do, under the same rules as Tx.
//
// PgxTx sees fn end the transaction by tx's Commit or Rollback (tx is the
// Beginner's transaction wrapped so that PgxTx knows: fn must not
// type-assert it to *pgxpool.Tx), by a statement sent through tx that may
// end it (COMMIT, END, ROLLBACK, COMMIT AND CHAIN, alone or in a query
// string of several statements), whose text it reads before it is sent,
// and by a statement after which no transaction is open (through tx or
// tx.Conn()): after fn failed, before its ROLLBACK, it reads
// the transaction status of the server's last ReadyForQuery on tx's
// connection, which says 'I' once no transaction is open, without a round
// trip; it reads nothing once fn called Commit or Rollback, which may have
// handed the connection back to a pool. A Beginner of one's own whose
// transactions show no connection (Conn returns nil, or panics, as a mock's
// may) gets the first check alone. The package documentation says which
// ends it cannot see. Once the run is over, tx and the savepoints begun on
// it refuse every statement with pgx.ErrTxClosed, as pgx's own transaction
// does after its Commit: fn must not keep them (tx.Conn() and
// tx.LargeObjects() reach the connection itself, back in its pool by then).
func PgxTx(ctx context.Context, db Beginner, fn func(ctx context.Context, tx pgx.Tx) error, opts ...Option) error {
	c := newConfig(opts)
	switch {
	case fn == nil:
		return c.do(ctx, nil) // retry.ErrNilOperation
	case isNil(db):
		return c.do(ctx, noDatabase)
	}
	status := xactStatusOf(db)
	call := ctx
	noID := false // the server refused the id's request: this call's runs read none
	return c.do(ctx, func(ctx context.Context) error {
		tx, pconn, release, err := begin(ctx, db, c.pgxOpts)
		if err != nil {
			return &txError{stage: stageBegin, err: err}
		}
		defer release()
		if err, ended := runPgx(ctx, tx, fn); err != nil {
			// Read before the ROLLBACK, which ends the transaction too, and
			// only if fn did not end it with Commit or Rollback, after which
			// a Beginner of one's own may have handed the connection back
			// to a pool, to be another goroutine's.
			idle := !ended && idleConn(tx)
			if errors.Is(rollback(ctx, tx), pgx.ErrTxClosed) || ended || idle {
				// fn ended the transaction itself: with a COMMIT, perhaps.
				return &txError{stage: stageEnded, err: err}
			}
			return &txError{stage: stageFn, err: err}
		}
		// A connection whose COMMIT failed mid-transaction is closed.
		if noID {
			pconn = nil
		}
		xid, read, err := commitReadingID(ctx, call, pconn, func() error { return tx.Commit(ctx) }, nil)
		noID = noID || errors.As(err, new(*idRefused))
		if err != nil {
			return c.settle(call, ctx, &txError{stage: stageCommit, err: err, foreign: c.foreign}, xid, read, status)
		}
		return nil
	})
}

// begin begins a transaction on db. For pgx's own Beginners it begins on a
// *pgx.Conn (a pool's acquired for the run, given back by release), and
// returns its connection, on which commitReadingID commits: a *pgxpool.Tx
// gives its connection back to the pool only in its Commit or Rollback,
// which commitReadingID does not call. A Beginner of one's own
// is used as it is, with no connection to read the id on.
func begin(ctx context.Context, db Beginner, opts pgx.TxOptions) (tx pgx.Tx, pc *pgx.Conn, release func(), err error) {
	switch db := db.(type) {
	case *pgxpool.Pool:
		c, err := db.Acquire(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		if tx, err = c.Conn().BeginTx(ctx, opts); err != nil {
			c.Release()
			return nil, nil, nil, err
		}
		return tx, idPipe(c.Conn(), opts), c.Release, nil
	case *pgx.Conn:
		if tx, err = db.BeginTx(ctx, opts); err != nil {
			return nil, nil, nil, err
		}
		return tx, idPipe(db, opts), func() {}, nil
	}
	if tx, err = db.BeginTx(ctx, opts); err != nil {
		return nil, nil, nil, err
	}
	return tx, nil, func() {}, nil
}

// idPipe is the connection on which commitReadingID commits, nil when the
// caller's options commit with a statement of their own (CommitQuery).
func idPipe(c *pgx.Conn, opts pgx.TxOptions) *pgx.Conn {
	if opts.CommitQuery != "" {
		return nil
	}
	return c
}

// xactStatusOf asks pg_xact_status on another connection of db: a pool's; a
// *pgx.Conn has none other, and one whose COMMIT failed is closed, so the
// outcome stays in doubt.
func xactStatusOf(db Beginner) xactStatus {
	type queryRower interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
	q, ok := db.(queryRower)
	if !ok {
		return nil
	}
	return func(ctx context.Context, xid uint64) (string, error) {
		var s *string
		if err := q.QueryRow(ctx, statusQuery, strconv.FormatUint(xid, 10)).Scan(&s); err != nil || s == nil {
			return "", err
		}
		return *s, nil
	}
}

// ErrNoDatabase is the error that the *retry.Error of Tx and PgxTx wraps
// when given no database (a nil *sql.DB, Beginner, *pgxpool.Pool or
// *pgx.Conn): nothing was begun, and nothing is run again.
var ErrNoDatabase = errors.New("sqlretry: no database (nil)")

// noDatabase is the run of a call given no database.
func noDatabase(context.Context) error { return retry.Permanent(ErrNoDatabase) }

// isNil reports whether db is nil, or one of pgx's own Beginners that is.
func isNil(db Beginner) bool {
	switch db := db.(type) {
	case nil:
		return true
	case *pgxpool.Pool:
		return db == nil
	case *pgx.Conn:
		return db == nil
	}
	return false
}

// idleConn reports whether the server's last ReadyForQuery on tx's
// connection said that no transaction was open (status 'I'). BeginTx
// returned after the answer to BEGIN ('T'), so 'I' since can only come from
// a statement of fn's that ended the transaction (COMMIT, END, ROLLBACK, by
// tx.Exec or tx.Conn()): it proves the end, whether or not the connection is
// still busy with a later query or closed since. Any other status proves
// nothing. It asks nothing of the server. A Tx of one's own may have no
// connection to show (nil, or a mock's Conn that panics): then it says no.
func idleConn(tx pgx.Tx) (idle bool) {
	defer func() {
		if recover() != nil {
			idle = false
		}
	}()
	c := tx.Conn()
	if c == nil {
		return false
	}
	pc := c.PgConn()
	return pc != nil && pc.TxStatus() == 'I'
}

// runPgx calls fn, rolling tx back if fn panics. The tx fn gets refuses
// everything once fn has returned (see watchedTx): what follows (the
// rollback, or the commit and its resolution) is PgxTx's.
// It reports whether fn ended tx, or may have: with its Commit or Rollback,
// or with a statement sent through it (see fnTx).
func runPgx(ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) error) (err error, ended bool) {
	done := false
	defer func() {
		if !done {
			_ = rollback(ctx, tx)
		}
	}()
	own := &fnTx{watchedTx{Tx: tx, ended: new(atomic.Bool), closed: new(atomic.Bool)}}
	defer own.closed.Store(true) // before the rollback above
	err = fn(ctx, own)
	done = true
	return err, own.ended.Load()
}

// rollback rolls tx back, and returns what Rollback did. While ctx is live
// the rollback keeps its deadline, so that a server that does not answer
// holds the call no longer than the caller allows; once ctx has ended, it
// is sent anyway, for at most rollbackTimeout: pgx would otherwise close the
// connection without sending ROLLBACK, which also ends the transaction, but
// costs the pool a connection.
func rollback(ctx context.Context, tx pgx.Tx) error {
	rctx, cancel := rollbackContext(ctx)
	defer cancel()
	return tx.Rollback(rctx)
}

// rollbackContext is the context a rollback is sent in: ctx while it is
// live, else one that ends after rollbackTimeout.
func rollbackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, rollbackTimeout)
}

// do runs op, one run of the transaction, through retry.Do.
//
// The loop does not mark its attempts (retry.Unmarked): it is not a layer of
// retries for the clients fn may call, since by default it retries nothing
// but conflicts, so a retrying client inside fn keeps the rule it has with
// the caller's loop, if any, and a failure it leaves to that loop passes
// through this one (retry.Do's rule for loops that do not mark).
func (c *config) do(ctx context.Context, op func(context.Context) error) error {
	opts := make([]retry.Option, 0, 2+len(c.retryOpts))
	opts = append(opts, retry.Unmarked(), retry.BeforeRetry(c.vet))
	opts = append(opts, c.retryOpts...)
	return retry.Do(ctx, c.strategy, op, opts...)
}

// vet is the transaction's rule of retries at one layer, applied before the
// strategy is asked. A conflict is this loop's to retry, whatever the caller
// does, and so is a run that sqlretry's own request for the transaction's
// id aborted (see idRefused): only this loop can run the whole transaction
// again, and the caller's
// loop would see the give-up as final. Any other failure that may be retried
// is left to the caller when it retries (retry.CallerRetries), so that it is
// retried once, with the caller's backoff and quota; otherwise the strategy
// decides, except the default one, which retries conflicts only.
func (c *config) vet(ctx context.Context, _ int, err error) error {
	w := inspect(err)
	if w.rerun() {
		return nil
	}
	if !Classify(err).Retryable() {
		return nil // the strategy refuses it, with its own reason
	}
	if retry.CallerRetries(ctx) {
		return retry.ErrOuterLoop
	}
	if c.conflictsOnly {
		return retry.ErrNotRetryable
	}
	return nil
}
