package sqlretry

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fnTx is the transaction PgxTx gives fn: the Beginner's, noting whether fn
// ended it, with Commit or Rollback or with a statement (COMMIT AND CHAIN
// included), atomically: fn may use it from a goroutine of its own.
type fnTx struct{ watchedTx }

func (t *fnTx) Commit(ctx context.Context) error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	t.ended.Store(true)
	return t.Tx.Commit(ctx)
}

func (t *fnTx) Rollback(ctx context.Context) error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	t.ended.Store(true)
	return t.Tx.Rollback(ctx)
}

// watchedTx is tx, noting in ended, before it sends them, the statements
// that may end the transaction (endsTransaction): the query strings of
// Exec, Query, QueryRow, a batch's and a prepared statement's (one that is
// prepared may be run by name). Its nested transactions (savepoints, as
// pgx.BeginFunc makes) are watched alike, into the same ended; their Commit
// and Rollback are the savepoint's, no end. Statements sent on tx.Conn() are
// not seen.
//
// Once fn has returned (closed, set by runPgx), tx and its nested
// transactions refuse everything with pgx.ErrTxClosed, as pgx's own
// transaction does after its Commit: PgxTx ends the transaction on the
// connection without pgx's Commit, and gives the connection back to its
// pool, where it may be another goroutine's, so that fn code that kept tx
// must not reach it. Conn and LargeObjects, which hand out the connection
// itself, are not refused.
type watchedTx struct {
	pgx.Tx
	ended  *atomic.Bool
	closed *atomic.Bool
}

// watch notes sql's end, if it may end the transaction.
func (t *watchedTx) watch(sql string) {
	if endsTransaction(sql) {
		t.ended.Store(true)
	}
}

func (t *watchedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed.Load() {
		return nil, pgx.ErrTxClosed
	}
	sp, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedTx{Tx: sp, ended: t.ended, closed: t.closed}, nil
}

func (t *watchedTx) Commit(ctx context.Context) error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	return t.Tx.Commit(ctx)
}

func (t *watchedTx) Rollback(ctx context.Context) error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	return t.Tx.Rollback(ctx)
}

func (t *watchedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed.Load() {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	t.watch(sql)
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *watchedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed.Load() {
		return closedRows{}, pgx.ErrTxClosed
	}
	t.watch(sql)
	return t.Tx.Query(ctx, sql, args...)
}

func (t *watchedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.closed.Load() {
		return closedRows{}
	}
	t.watch(sql)
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *watchedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error) {
	if t.closed.Load() {
		return 0, pgx.ErrTxClosed
	}
	return t.Tx.CopyFrom(ctx, table, columns, rows)
}

func (t *watchedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed.Load() {
		return closedBatch{}
	}
	if b != nil {
		for _, q := range b.QueuedQueries {
			t.watch(q.SQL)
		}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *watchedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.closed.Load() {
		return nil, pgx.ErrTxClosed
	}
	t.watch(sql)
	return t.Tx.Prepare(ctx, name, sql)
}
