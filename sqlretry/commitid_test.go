package sqlretry_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/sqlretry"
)

// idFuncKey is where a connection keeps what it learned of the fast path
// (commitid.go's idFuncKey): the function's OID once a call went through.
const idFuncKey = "github.com/retrykit/retry/sqlretry.pg_current_xact_id_if_assigned"

// refusedFastPath reports whether conn keeps that its fast-path call was
// refused: something other than the function's OID.
func refusedFastPath(conn *pgx.Conn) bool {
	v := conn.PgConn().CustomData()[idFuncKey]
	_, learned := v.(uint32)
	return v != nil && !learned
}

// The id is read at every commit of a connection: the first, with a
// statement, after which a fast-path call of its own tells that the way to
// the server takes the message, and the later ones by that call (their
// COMMIT's write begins with a FunctionCall message). A commit cut short,
// with no other connection to ask (PgxTx on a *pgx.Conn), is in doubt with
// the id that fn's own pg_current_xact_id() saw.
func TestIDReadAtEveryCommitOfAConnection(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	const table = "id_every_commit"
	accounts(t, table)
	var commitWrite atomic.Value // the first byte of the last write that sent COMMIT
	cfg := dialingThrough(t, func(c net.Conn) net.Conn { return commitWriteConn{c, &commitWrite} })
	for _, earlier := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("after %d commits", earlier), func(t *testing.T) {
			conn := connect(t, cfg)
			for i := range earlier {
				if err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "INSERT INTO "+table+"_log VALUES (0)")
					return err
				}); err != nil {
					t.Fatal(err)
				}
				want := byte('F') // a FunctionCall
				if i == 0 {
					want = 'Q' // a query
				}
				if got := commitWrite.Load(); got != want {
					t.Fatalf("commit %d: the COMMIT's write began with %q, want %q", i+1, got, want)
				}
			}
			var xid uint64
			runs := 0
			err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error {
				runs++
				if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
					return err
				}
				return tx.QueryRow(ctx, "INSERT INTO "+table+"_log VALUES (1) RETURNING pg_current_xact_id()::text::bigint").Scan(&xid)
			}, againAtOnce(), sqlretry.WithRetryOptions(retry.AttemptTimeout(200*time.Millisecond)))
			wantInDoubt(t, err, runs, true)
			var d *sqlretry.InDoubtError
			if errors.As(err, &d); d.XID != xid {
				t.Fatalf("in doubt with id %d, fn's transaction was %d", d.XID, xid)
			}
		})
	}
}

// A server that refuses the fast-path call inside a transaction (here a
// call of a function that does not exist, put where the connection keeps
// the one it learned) aborts the transaction, and COMMIT, which runs after
// it, rolls it back: nothing committed, and the run is run again at once,
// fn's work no part of the failure; the connection is left idle, and its
// later commits read the id with a statement. Before, the call failed with
// the server's error.
func TestFastPathRefusedInATransactionCommitsNothing(t *testing.T) {
	needServer(t)
	const table = "id_request_refused"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	var commitWrite atomic.Value
	cfg := dialingThrough(t, func(c net.Conn) net.Conn { return commitWriteConn{c, &commitWrite} })
	conn := connect(t, cfg)
	insert := inserting(table)
	if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil { // learns the function's OID
		t.Fatal(err)
	}
	if _, ok := conn.PgConn().CustomData()[idFuncKey].(uint32); !ok {
		t.Fatalf("the connection keeps no function OID under %q", idFuncKey)
	}
	conn.PgConn().CustomData()[idFuncKey] = uint32(1) // no function has OID 1
	runs := 0
	err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error { runs++; return insert(ctx, tx) })
	if err != nil || runs != 2 {
		t.Fatalf("the call whose id's request the server refused: %v after %d runs, want success after 2", err, runs)
	}
	if n := queryInt(t, "SELECT count(*) FROM "+table); n != 2 {
		t.Fatalf("%d rows, want 2: the first call's, the second's once", n)
	}
	if s := conn.PgConn().TxStatus(); s != 'I' || conn.IsClosed() {
		t.Fatalf("connection status %q, closed %v: want idle and open", s, conn.IsClosed())
	}
	for range 2 {
		if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil {
			t.Fatal(err)
		}
		if got := commitWrite.Load(); got != byte('Q') {
			t.Fatalf("a commit after the refusal began with %q, want 'Q' (the statement)", got)
		}
	}
}

// A server where the application's role may not execute
// pg_current_xact_id_if_assigned (EXECUTE revoked from PUBLIC, as a
// hardened server may) refuses the id's request, the statement's and the
// fast path's alike, and that aborts the transaction (COMMIT answers
// ROLLBACK): the run is run again, the call's runs read no id from then
// on, and nor, for a while, do the connection's commits. Every call
// commits once, through Tx and PgxTx, on a kept connection (each first run
// on it aborted) and on a new connection per call (each call's first run
// aborted); the connection's QueryTracer sees every query it started end.
// Before, every transaction failed with the server's insufficient_privilege.
func TestIDRefusedByTheServerCostsNoCall(t *testing.T) {
	needServer(t)
	const role, table = "sqlretry_no_xact_id", "id_refused_by_server"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)",
		"DROP ROLE IF EXISTS "+role, "CREATE ROLE "+role+" LOGIN", "GRANT ALL ON "+table+" TO "+role,
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_current_xact_id_if_assigned() FROM PUBLIC")
	t.Cleanup(func() {
		exec(t, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_current_xact_id_if_assigned() TO PUBLIC",
			"DROP TABLE IF EXISTS "+table, "DROP ROLE IF EXISTS "+role)
	})
	for _, c := range []struct {
		name     string
		kept     bool // one connection for all the calls, else a new one per call
		wantRuns int
	}{{"kept connection", true, 8}, {"a new connection per call", false, 12}} {
		t.Run(c.name, func(t *testing.T) {
			exec(t, "TRUNCATE "+table)
			queries := &tracedQueries{}
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.User = role
			cfg.ConnConfig.Tracer = queries
			cfg.MaxConns = 1
			p, db := poolAndDB(t, cfg)
			db.SetMaxOpenConns(1)
			if !c.kept {
				db.SetMaxIdleConns(0)
			}
			runs := 0
			for i := range 3 {
				if err := sqlretry.PgxTx(t.Context(), p, func(ctx context.Context, tx pgx.Tx) error {
					runs++
					_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", i)
					return err
				}); err != nil {
					t.Fatalf("PgxTx %d: %v", i, err)
				}
				if !c.kept {
					p.Reset() // the next call's connection is new
				}
				if err := sqlretry.Tx(t.Context(), db, func(ctx context.Context, tx *sql.Tx) error {
					runs++
					_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES ($1)", i)
					return err
				}); err != nil {
					t.Fatalf("Tx %d: %v", i, err)
				}
			}
			if n := queryInt(t, "SELECT count(*) FROM "+table); n != 6 || runs != c.wantRuns {
				t.Fatalf("%d rows after %d runs, want 6 after %d", n, runs, c.wantRuns)
			}
			p.Close()
			db.Close()
			if n := queries.open(); n != 0 {
				t.Fatalf("%d queries the tracer saw start never ended", n)
			}
		})
	}
}

// A proxy that refuses the id's request with an error that looks like the
// backend's (a routine, a failed transaction: the server cannot run it)
// and then passes COMMIT on, which commits: the call succeeds after its one
// run, whatever the refusal said. The id's refusal alone is no word that
// nothing committed; COMMIT's ROLLBACK is (see TestIDRefusedByTheServerCostsNoCall).
func TestIDRefusedByAProxyWhileCommitCommitsRunsOnce(t *testing.T) {
	needServer(t)
	const table = "id_refused_by_proxy"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	var calls atomic.Int64
	var lying atomic.Bool
	cfg := dialingThrough(t, func(c net.Conn) net.Conn { return &refusingProxy{Conn: c, lying: &lying, calls: &calls} })
	conn := connect(t, cfg)
	insert := inserting(table)
	for range 2 { // the statement, then the fast path learned
		if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, "TRUNCATE "+table)
	lying.Store(true)
	runs := 0
	err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error { runs++; return insert(ctx, tx) })
	if n := queryInt(t, "SELECT count(*) FROM "+table); err != nil || runs != 1 || n != 1 || calls.Load() != 1 {
		t.Fatalf("%v after %d runs, %d rows, %d calls refused: want success after 1 run, 1 row, 1 refusal", err, runs, n, calls.Load())
	}
}

// A proxy on the way to the server that refuses the fast-path call (an
// auditing proxy cannot see into it: some answer with an error, some close
// the session) costs no transaction: a connection tries the call once,
// after its first commit, with no transaction open. Refused with an error,
// the connection reads the id with a statement from then on, and is kept;
// refused by closing, the connection is replaced. Every call commits once,
// through Tx and PgxTx.
func TestFastPathRefusedOnTheWay(t *testing.T) {
	needServer(t)
	for _, closes := range []bool{false, true} {
		t.Run(fmt.Sprintf("closes=%v", closes), func(t *testing.T) {
			table := fmt.Sprintf("fast_path_refused_%v", closes)
			exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
			var dials, calls atomic.Int64
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			cfg.ConnConfig = dialingThrough(t, func(c net.Conn) net.Conn {
				dials.Add(1)
				return &refusingProxy{Conn: c, closes: closes, calls: &calls}
			})
			p, db := poolAndDB(t, cfg)
			db.SetMaxOpenConns(1)
			const each = 4
			for i := range each {
				if err := sqlretry.PgxTx(t.Context(), p, func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", i)
					return err
				}); err != nil {
					t.Fatalf("PgxTx %d: %v", i, err)
				}
				if err := sqlretry.Tx(t.Context(), db, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES ($1)", i)
					return err
				}); err != nil {
					t.Fatalf("Tx %d: %v", i, err)
				}
			}
			if n := queryInt(t, "SELECT count(*) FROM "+table); n != 2*each {
				t.Fatalf("%d rows, want %d", n, 2*each)
			}
			// Refused with an error: one connection each for the pool and
			// the *sql.DB, each tried once. Closed: each call's
			// connection is new, and tried once.
			switch {
			case !closes && (dials.Load() != 2 || calls.Load() != 2):
				t.Fatalf("%d connections, %d fast-path calls refused: want 2, 2", dials.Load(), calls.Load())
			case closes && (dials.Load() < 2*each || calls.Load() != 2*each):
				t.Fatalf("%d connections, %d fast-path calls refused: want %d calls", dials.Load(), calls.Load(), 2*each)
			}
		})
	}
}

// A proxy on the way that loses its link to the server after the server
// committed (it passed COMMIT on) leaves the outcome in doubt, and the
// transfer is not run again, whatever the proxy said of the id's request
// before: its own FATAL error (PgBouncer's "server conn crashed?"), or its
// own refusal of the fast-path call, which the server never saw. Neither
// is the backend's word that the transaction aborted. Before, the first
// was taken for a backend that ended before COMMIT, and a committed
// transaction ran twice; the second was returned as a plain client error.
func TestProxysErrorsBeforeALostCommitLeaveItInDoubt(t *testing.T) {
	needServer(t)
	for _, c := range []struct {
		name          string
		warm          bool // the id by the fast path, not the statement
		refuse, fatal bool
		routine       string // the refusal's, if any, with a ReadyForQuery that says the transaction failed
	}{
		{"fatal, the id by the statement", false, false, true, ""},
		{"fatal, the id by the fast path", true, false, true, ""},
		{"the fast path refused, then the link lost", true, true, false, ""},
		{"the fast path refused naming a routine of the proxy's, then the link lost", true, true, false, "client::QueryEngine::route_query"},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := fmt.Sprintf("proxy_errors_%d", tables.Add(1))
			exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
			var armed atomic.Bool
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			cfg.ConnConfig = dialingThrough(t, func(conn net.Conn) net.Conn {
				return &crashingProxy{Conn: conn, armed: &armed, refuse: c.refuse, fatal: c.fatal, routine: c.routine}
			})
			p, db := poolAndDB(t, cfg)
			db.SetMaxOpenConns(1)
			for _, a := range []api{
				{name: "Tx", run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
					return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) }, opts...)
				}},
				{name: "PgxTx", run: func(ctx context.Context, fn func(context.Context, q) error, opts ...sqlretry.Option) error {
					return sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, opts...)
				}},
			} {
				insert := func(ctx context.Context, tx q) error { return tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)") }
				if c.warm { // two commits: the statement's, then the fast path tried
					for range 2 {
						if err := a.run(t.Context(), insert); err != nil {
							t.Fatal(err)
						}
					}
					exec(t, "TRUNCATE "+table)
				}
				armed.Store(true)
				runs := 0
				err := a.run(t.Context(), func(ctx context.Context, tx q) error { runs++; return insert(ctx, tx) }, againAtOnce())
				wantInDoubt(t, err, runs, false)
				if n := queryInt(t, "SELECT count(*) FROM "+table); n != 1 {
					t.Fatalf("%s: %d rows, want the one committed", a.name, n)
				}
				exec(t, "TRUNCATE "+table)
			}
		})
	}
}

// crashingProxy stands for a proxy whose link to the server fails after
// the server answered COMMIT, once armed (it disarms itself): it passes
// COMMIT on, swallows the server's answers up to COMMIT's, and ends the
// session, with its own FATAL error first (severity, code and message, as
// PgBouncer's) if fatal. With refuse it does not pass the fast-path call
// on, and answers it with its own error and a ReadyForQuery that says a
// transaction is open (or, with routine, PgDog's way: an error naming a
// routine of the proxy's, and a ReadyForQuery that says it failed).
type crashingProxy struct {
	net.Conn
	armed         *atomic.Bool
	refuse, fatal bool
	routine       string // the refusal's (PgDog names its own), then a ReadyForQuery 'E'

	crashing bool
	answer   []byte // the proxy's own messages, read before the server's
	ended    bool
}

func (p *crashingProxy) Write(b []byte) (int, error) {
	if !p.armed.Load() || !bytes.Contains(b, []byte("COMMIT\x00")) {
		return p.Conn.Write(b)
	}
	p.crashing = true
	p.armed.Store(false)
	var pass []byte
	for rest := b; len(rest) >= 5; {
		n := 1 + int(binary.BigEndian.Uint32(rest[1:5]))
		if rest[0] == 'F' && p.refuse {
			status := byte('T')
			if p.routine != "" {
				status = 'E'
			}
			p.answer, _ = (&pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: "fast-path function calls are not supported", Routine: p.routine}).Encode(p.answer)
			p.answer, _ = (&pgproto3.ReadyForQuery{TxStatus: status}).Encode(p.answer)
		} else {
			pass = append(pass, rest[:n]...)
		}
		rest = rest[n:]
	}
	if _, err := p.Conn.Write(pass); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (p *crashingProxy) Read(b []byte) (int, error) {
	switch {
	case !p.crashing:
		return p.Conn.Read(b)
	case len(p.answer) > 0:
		n := copy(b, p.answer)
		p.answer = p.answer[n:]
		return n, nil
	case p.ended:
		return 0, io.EOF
	}
	var seen []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(seen, []byte("C\x00\x00\x00\x0bCOMMIT\x00")) { // COMMIT's CommandComplete
		n, err := p.Conn.Read(buf)
		if err != nil {
			return 0, err
		}
		seen = append(seen, buf[:n]...)
	}
	p.Conn.Close()
	p.ended = true
	if !p.fatal {
		return 0, io.EOF
	}
	fatal, _ := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08P01", Message: "server conn crashed?"}).Encode(nil)
	return copy(b, fatal), nil
}

// A run whose attempt ends after fn returned, before COMMIT was written,
// sends no COMMIT: the transaction is rolled back, on a connection that is
// kept (a *pgx.Conn's too), and the run is safe to run again, and commits
// once; a QueryTracer sees no COMMIT begin without an end. Through Tx, when
// the attempt ends while fn still runs, database/sql rolls back, and the
// run is safe to run again too. Before, PgxTx sent COMMIT after the
// attempt's end and left the outcome in doubt, the tracer saw a COMMIT
// that never ended, and Tx's run was never run again, although nothing
// committed.
func TestAttemptEndedBeforeCommitSendsNoCommit(t *testing.T) {
	needServer(t)
	const table = "attempt_ended_before_commit"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	queries, p, db := traced(t)
	conn, err := pgx.ConnectConfig(t.Context(), p.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// fn inserts, then, on its first run, returns once the attempt has
	// ended, after linger.
	fn := func(runs *int, linger time.Duration) func(context.Context, q) error {
		return func(ctx context.Context, tx q) error {
			*runs++
			if err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil || *runs > 1 {
				return err
			}
			<-ctx.Done()
			time.Sleep(linger)
			return nil
		}
	}
	cut := sqlretry.WithRetryOptions(retry.AttemptTimeout(100 * time.Millisecond))
	for _, c := range []struct {
		name   string
		linger time.Duration
		run    func(ctx context.Context, fn func(context.Context, q) error) error
	}{
		{"PgxTx on a pool", 0, func(ctx context.Context, fn func(context.Context, q) error) error {
			return sqlretry.PgxTx(ctx, p, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, againAtOnce(), cut)
		}},
		{"PgxTx on a *pgx.Conn", 0, func(ctx context.Context, fn func(context.Context, q) error) error {
			return sqlretry.PgxTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxQ{tx}) }, againAtOnce(), cut)
		}},
		{"Tx", 50 * time.Millisecond, func(ctx context.Context, fn func(context.Context, q) error) error {
			return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlQ{tx}) }, againAtOnce(), cut)
		}},
	} {
		exec(t, "TRUNCATE "+table)
		runs := 0
		if err := c.run(t.Context(), fn(&runs, c.linger)); err != nil || runs != 2 {
			t.Fatalf("%s: %d runs, err %v: want 2, success", c.name, runs, err)
		}
		if n := queryInt(t, "SELECT count(*) FROM "+table); n != 1 {
			t.Fatalf("%s: %d rows, want 1", c.name, n)
		}
		if n := queries.open(); n != 0 {
			t.Fatalf("%s: the tracer saw %d queries begin and not end", c.name, n)
		}
	}
}

// A COMMIT that fails for a reason of its own (a deferred unique
// constraint) says nothing of the fast path: the connection keeps it.
// Before, any error at COMMIT put the connection on the statement for good.
func TestCommitsOwnErrorKeepsTheFastPath(t *testing.T) {
	needServer(t)
	const table = "commit_error_fast_path"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i := range 2 { // the statement's commit, then the fast path tried
		if err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	oid, ok := conn.PgConn().CustomData()[idFuncKey].(uint32)
	if !ok {
		t.Fatalf("the connection keeps %v, want the function's OID", conn.PgConn().CustomData()[idFuncKey])
	}
	err = sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1), (1)")
		return err
	})
	if !isCode(err, "23505") {
		t.Fatalf("err %v, want COMMIT's unique violation", err)
	}
	if got := conn.PgConn().CustomData()[idFuncKey]; got != oid {
		t.Fatalf("after COMMIT's own error the connection keeps %v, want OID %d", got, oid)
	}
}

// A proxy that drops the fast-path call without a word (pgcat does) costs
// nothing: the connection's one try of the fast path, followed by a Sync
// that the proxy lets through, learns of the drop from the Sync's answer at
// once, and the connection is kept and reads the id with the statement.
// One that starts dropping after the connection learned the fast path
// costs no transaction either: COMMIT's answers, read where the call's
// were awaited, say so, and the call succeeds. Before, the try held the
// call a second and closed the connection, every new connection's first
// commit alike; and a COMMIT after a dropped call was taken for lost: in
// doubt, its connection closed.
func TestFastPathDroppedOnTheWay(t *testing.T) {
	needServer(t)
	const table = "fast_path_dropped"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	insert := inserting(table)
	t.Run("from the start", func(t *testing.T) {
		var (
			calls atomic.Int64
			first atomic.Value
		)
		cfg := dialingThrough(t, func(c net.Conn) net.Conn {
			return &refusingProxy{Conn: commitWriteConn{c, &first}, drops: true, calls: &calls}
		})
		conn := connect(t, cfg)
		for i := range 3 {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond) // half the try's bound: it must not wait for it
			err := sqlretry.PgxTx(ctx, conn, insert)
			cancel()
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
			if first.Load() != byte('Q') {
				t.Fatalf("call %d's COMMIT began with %q, want 'Q' (the statement)", i+1, first.Load())
			}
		}
		if !refusedFastPath(conn) || conn.IsClosed() || calls.Load() != 1 {
			t.Fatalf("the connection keeps %v, closed %v, %d calls dropped: want refused, open, 1",
				conn.PgConn().CustomData()[idFuncKey], conn.IsClosed(), calls.Load())
		}
	})
	t.Run("once the fast path was learned", func(t *testing.T) {
		var (
			calls    atomic.Int64
			dropping atomic.Bool
		)
		cfg := dialingThrough(t, func(c net.Conn) net.Conn {
			return &refusingProxy{Conn: c, dropping: &dropping, calls: &calls}
		})
		conn := connect(t, cfg)
		for range 2 { // the statement, then the fast path learned
			if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := conn.PgConn().CustomData()[idFuncKey].(uint32); !ok {
			t.Fatalf("the connection keeps %v, want the function's OID", conn.PgConn().CustomData()[idFuncKey])
		}
		exec(t, "TRUNCATE "+table)
		dropping.Store(true)
		runs := 0
		if err := sqlretry.PgxTx(t.Context(), conn, func(ctx context.Context, tx pgx.Tx) error { runs++; return insert(ctx, tx) }); err != nil || runs != 1 {
			t.Fatalf("the call whose fast-path call was dropped: %v after %d runs, want success after 1", err, runs)
		}
		if n := queryInt(t, "SELECT count(*) FROM "+table); n != 1 {
			t.Fatalf("%d rows, want 1", n)
		}
		if !refusedFastPath(conn) || conn.IsClosed() || conn.PgConn().TxStatus() != 'I' {
			t.Fatalf("the connection keeps %v, closed %v, status %q: want refused, open, idle",
				conn.PgConn().CustomData()[idFuncKey], conn.IsClosed(), conn.PgConn().TxStatus())
		}
		if err := sqlretry.PgxTx(t.Context(), conn, insert); err != nil || calls.Load() != 1 {
			t.Fatalf("the next call: %v, %d calls dropped; want success by the statement, 1", err, calls.Load())
		}
	})
}

// A COMMIT whose answer the call gave up on, its context ended, sends no
// cancel request: the resolution that would wait for it has no time left.
// Before, the cancel request, whose dial to a server that had become
// unreachable hung, held the call 5 s past its deadline.
func TestLostCommitAfterTheCallsEndHoldsItNoLonger(t *testing.T) {
	needSyncStandby(t)
	endSyncRepWaits(t)
	const table = "lost_commit_call_end"
	accounts(t, table)
	var dials atomic.Int64
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) > 1 { // the server has become unreachable
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return dial(ctx, network, addr)
	}
	conn := connect(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	runs := 0
	err = sqlretry.PgxTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+table+"_log VALUES (1)")
		return err
	})
	wantInDoubt(t, err, runs, true)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the call took %v, its deadline was 300ms", took)
	}
}

// A proxy that hands its server connection back to its pool at the first
// ReadyForQuery that says no transaction is open (transaction pooling, as
// Supavisor does) and passes fast-path calls on: the connection's try of
// the fast path learns it, and is kept. The try's messages are answered
// with no idle ReadyForQuery but the last: a try answered with two (the
// call's, then a Sync's) would lose the second to the pool, and wait for it
// until it gave up and closed the connection.
func TestFastPathTriedThroughTransactionPooling(t *testing.T) {
	needServer(t)
	const table = "fast_path_pooled"
	exec(t, "DROP TABLE IF EXISTS "+table, "CREATE TABLE "+table+" (k int)")
	cfg := dialingThrough(t, func(c net.Conn) net.Conn { return &idleReleasingProxy{Conn: c} })
	conn := connect(t, cfg)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond) // half the try's bound
		err := sqlretry.PgxTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
			return err
		})
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if _, learned := conn.PgConn().CustomData()[idFuncKey].(uint32); !learned || conn.IsClosed() {
		t.Fatalf("the connection keeps %v, closed %v: want the function's OID, open", conn.PgConn().CustomData()[idFuncKey], conn.IsClosed())
	}
	if n := queryInt(t, "SELECT count(*) FROM "+table); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

// idleReleasingProxy stands for a transaction-pooling proxy: once it has
// passed on a ReadyForQuery that says no transaction is open, the server's
// connection is another client's, and what the server sends on it after
// that, until this client writes again, does not reach this client.
type idleReleasingProxy struct {
	net.Conn
	mu       sync.Mutex
	released bool
	server   messageReader
	out      []byte
}

func (p *idleReleasingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.released = false
	p.mu.Unlock()
	return p.Conn.Write(b)
}

func (p *idleReleasingProxy) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.out) == 0 {
		p.mu.Unlock()
		msgs, err := p.server.read(p.Conn)
		p.mu.Lock()
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			if !p.released {
				p.out = append(p.out, m...)
				p.released = m[0] == 'Z' && m[5] == 'I'
			}
		}
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

// connect connects with cfg, closing the connection when t ends.
func connect(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// inserting is fn inserting the row 1 into table.
func inserting(table string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)")
		return err
	}
}

// refusingProxy stands for a proxy between the client and the server that
// refuses the protocol's FunctionCall messages, which it counts in calls,
// as an auditing proxy may: it drops one without a word (drops, or while
// dropping is true), closes the session (closes), or answers it with an
// error and a ReadyForQuery, in its place among the server's answers (after
// those to the queries sent before it), with the status the server's last
// ReadyForQuery had. It reads the client's messages as pgx writes them,
// whole, after the startup message, and the server's as they come.
type refusingProxy struct {
	net.Conn
	closes   bool         // close the session, not answer with an error
	drops    bool         // drop the message without a word
	dropping *atomic.Bool // if set, drop it while true, else pass it on
	lying    *atomic.Bool // if set, refuse it while true, as the backend would, else pass it on
	calls    *atomic.Int64

	mu      sync.Mutex
	started bool
	sent    int   // queries passed on to the server
	refusal []int // for each refusal owed, the queries answered before it
	relayed int   // the server's ReadyForQuery messages read
	status  byte  // the last one's
	server  messageReader
	out     []byte // what the client reads next
}

func (p *refusingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started { // the startup message has no type byte
		p.started = true
		p.sent = 1 // the server's ReadyForQuery once the session starts
		return p.Conn.Write(b)
	}
	var pass []byte
	for rest := b; len(rest) >= 5; {
		n := 1 + int(binary.BigEndian.Uint32(rest[1:5]))
		switch {
		case rest[0] != 'F' || p.dropping != nil && !p.dropping.Load() || p.lying != nil && !p.lying.Load():
			if rest[0] == 'Q' || rest[0] == 'F' || rest[0] == 'S' {
				p.sent++
			}
			pass = append(pass, rest[:n]...)
		case p.drops || p.dropping != nil:
			p.calls.Add(1)
		case p.closes:
			p.calls.Add(1)
			p.Conn.Close()
			return len(b), nil
		default:
			p.calls.Add(1)
			p.refusal = append(p.refusal, p.sent) // due once the queries before it are answered
			p.sent++                              // it takes a query's place among the answers
		}
		rest = rest[n:]
	}
	if len(pass) > 0 {
		if _, err := p.Conn.Write(pass); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func (p *refusingProxy) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		p.owe()
		if len(p.out) > 0 {
			n := copy(b, p.out)
			p.out = p.out[n:]
			return n, nil
		}
		p.mu.Unlock()
		msgs, err := p.server.read(p.Conn)
		p.mu.Lock()
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			p.out = append(p.out, m...)
			if m[0] == 'Z' {
				p.relayed++
				p.status = m[5]
				p.owe()
			}
		}
	}
}

// owe writes the refusals due, those whose queries before them are all
// answered, after what the client is to read.
func (p *refusingProxy) owe() {
	for len(p.refusal) > 0 && p.refusal[0] <= p.relayed {
		p.refusal = p.refusal[1:]
		p.relayed++
		status := p.status
		if status == 0 {
			status = 'I'
		}
		refusal := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: "fast-path function calls are not supported"}
		if p.lying != nil { // a backend's refusal, by its look: a routine, and a failed transaction
			refusal = &pgproto3.ErrorResponse{Severity: "ERROR", Code: "42501", Message: "permission denied for function", Routine: "aclcheck_error"}
			status = 'E'
		}
		p.out, _ = refusal.Encode(p.out)
		p.out, _ = (&pgproto3.ReadyForQuery{TxStatus: status}).Encode(p.out)
	}
}

// messageReader reads a server's messages whole: its read returns those
// that one read of the connection completes.
type messageReader struct{ raw []byte }

func (r *messageReader) read(c net.Conn) ([][]byte, error) {
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	r.raw = append(r.raw, buf[:n]...)
	var msgs [][]byte
	for len(r.raw) >= 5 {
		m := 1 + int(binary.BigEndian.Uint32(r.raw[1:5]))
		if len(r.raw) < m {
			break
		}
		msgs = append(msgs, r.raw[:m:m])
		r.raw = r.raw[m:]
	}
	return msgs, nil
}

// poolAndDB returns a pool and a *sql.DB (pgx's stdlib) of cfg, closed when
// t ends.
func poolAndDB(t *testing.T, cfg *pgxpool.Config) (*pgxpool.Pool, *sql.DB) {
	t.Helper()
	p, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	db := stdlib.OpenDB(*cfg.ConnConfig)
	t.Cleanup(func() { db.Close() })
	return p, db
}

// dialingThrough returns the connection config of the tests' server, whose
// connections are wrap's of the server's.
func dialingThrough(t *testing.T, wrap func(net.Conn) net.Conn) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	return cfg
}

// countingConn counts the writes to a connection: each is one request that
// waits for its answer, a round trip.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// The transaction's id is read in the same write as its COMMIT: a short
// transaction (BEGIN, one statement, COMMIT) makes three writes, as it did
// before the id was read, through Tx and PgxTx alike; its connection is
// kept (one backend for every call) and COMMIT is sent once (no warning of
// a COMMIT or ROLLBACK outside a transaction, which the driver's own
// Commit after sqlretry's would cause).
func TestIDReadCostsNoRoundTrip(t *testing.T) {
	needServer(t)
	var writes atomic.Int64
	cfg := dialingThrough(t, func(c net.Conn) net.Conn { return countingConn{c, &writes} })
	var notices atomic.Int64
	cfg.OnNotice = func(*pgconn.PgConn, *pgconn.Notice) { notices.Add(1) }
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn := connect(t, cfg)
	exec(t, "DROP TABLE IF EXISTS id_read_cost", "CREATE TABLE id_read_cost (k int)")
	backends := map[int64]bool{}
	for _, r := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"Tx", func(ctx context.Context) error {
			return sqlretry.Tx(ctx, db, func(ctx context.Context, tx *sql.Tx) error {
				var pid int64
				err := tx.QueryRowContext(ctx, "INSERT INTO id_read_cost VALUES (1) RETURNING pg_backend_pid()").Scan(&pid)
				backends[pid] = true
				return err
			})
		}},
		{"PgxTx", func(ctx context.Context) error {
			return sqlretry.PgxTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
				var pid int64
				err := tx.QueryRow(ctx, "INSERT INTO id_read_cost VALUES (1) RETURNING pg_backend_pid()").Scan(&pid)
				backends[pid] = true
				return err
			})
		}},
	} {
		clear(backends)
		// The first calls connect, and database/sql pings a connection
		// on its first reuse (pgx's stdlib: after 1 s idle).
		for range 2 {
			if err := r.run(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			before := writes.Load()
			if err := r.run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := writes.Load() - before; n != 3 {
				t.Errorf("%s: %d writes for BEGIN, INSERT, COMMIT; want 3", r.name, n)
			}
		}
		if len(backends) != 1 || notices.Load() != 0 {
			t.Errorf("%s: %d backends, %d notices: want 1, none", r.name, len(backends), notices.Load())
		}
	}
	if n := queryInt(t, "SELECT count(*) FROM id_read_cost"); n != 10 {
		t.Fatalf("%d rows committed, want 10", n)
	}
}

// commitWriteConn keeps the first byte (a message's type) of each write
// that sends COMMIT as a query.
type commitWriteConn struct {
	net.Conn
	first *atomic.Value
}

func (c commitWriteConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("COMMIT\x00")) {
		c.first.Store(b[0])
	}
	return c.Conn.Write(b)
}
