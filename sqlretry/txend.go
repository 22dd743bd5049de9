package sqlretry

import (
	"bytes"
	"database/sql"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// endWatch is how Tx learns that fn ended the transaction with a statement
// of its own, through pgx's stdlib driver. database/sql shows fn's
// statements to no one, and an end that leaves the connection in a
// transaction again (COMMIT AND CHAIN, ROLLBACK AND CHAIN, COMMIT; BEGIN in
// one string) shows nothing in the connection's status, so while fn runs it
// reads the messages of fn's connection as pgx writes and reads them, from
// pgproto3's trace of the connection (Frontend.Trace, pgx's counterpart of
// libpq's PQtrace), which pgx calls with each message, one Write per
// message: the text of each query and statement prepared (the same reading
// as PgxTx's, endsTransaction), and the server's answers, a command tag
// COMMIT or PREPARE TRANSACTION (the answers to COMMIT [AND CHAIN], END and
// PREPARE TRANSACTION, by whatever text or prepared name they were sent,
// in a string of several statements too) or a ReadyForQuery that says no
// transaction is open. It costs no round trip: the server's answers are
// read as they come.
//
// It writes to ended atomically: database/sql's own rollback, when the
// call's context ends during fn, is traced on another goroutine (and reads
// as an end, which Tx ignores once the context has ended).
type endWatch struct {
	pc      *pgconn.PgConn
	ended   atomic.Bool
	stopped bool // by done, the first time
	// untraced: WithoutStatementWatch; only the connection's state at
	// fn's end is read.
	untraced bool
}

// watchEnds starts watching pconn, the connection of pgx under conn. With
// none (conn's driver is not pgx's stdlib) it returns nil, and Tx falls back
// to its probe. Without trace (WithoutStatementWatch) it reads only the
// connection's state when fn ends. It sets the trace while database/sql holds conn's lock, as
// fn's statements will, so that no statement is in flight.
func watchEnds(conn *sql.Conn, pconn *pgx.Conn, trace bool) *endWatch {
	if pconn == nil || pconn.PgConn() == nil {
		return nil
	}
	pc := pconn.PgConn()
	w := &endWatch{pc: pc, untraced: !trace}
	if !trace {
		return w // the connection's state at fn's end still tells a plain end
	}
	_ = conn.Raw(func(any) error {
		pc.Frontend().Trace(w, pgproto3.TracerOptions{SuppressTimestamps: true})
		return nil
	})
	return w
}

// done stops the trace, and reports whether fn ended the transaction: a
// message said so, or the connection's last ReadyForQuery says that no
// transaction is open (fn ended it, and its connection may have been lost
// or busy with a later query since). It may be called again, after Tx's
// own COMMIT or ROLLBACK, and then reports what it did the first time.
func (w *endWatch) done(conn *sql.Conn) bool {
	if w == nil || w.stopped {
		return w != nil && w.ended.Load()
	}
	w.stopped = true
	_ = conn.Raw(func(any) error {
		if !w.untraced {
			w.pc.Frontend().Untrace()
		}
		if w.pc.TxStatus() == 'I' {
			w.ended.Store(true)
		}
		return nil
	})
	return w.ended.Load()
}

// The trace's lines that matter (pgproto3's format, without timestamps): the
// sender (F, the client; B, the server), the message's type, its length and
// its details, tab-separated, one line per Write.
var (
	traceQuery    = []byte("F\tQuery\t")
	traceParse    = []byte("F\tParse\t")
	traceComplete = []byte("B\tCommandComplete\t")
	traceReady    = []byte("B\tReadyForQuery\t")
	traceDetails  = []byte("\t \"") // a quoted string's start
	traceEndQuote = []byte("\" ")
)

// Write reads one traced message. It never fails: an error would make pgx
// log nothing and stop nothing, but a failed Write is not what a trace is
// for.
func (w *endWatch) Write(p []byte) (int, error) {
	if w.ended.Load() {
		return len(p), nil
	}
	line := bytes.TrimSuffix(p, []byte("\n"))
	switch {
	case bytes.HasPrefix(line, traceComplete):
		// "COMMIT" answers COMMIT and END, with or without AND CHAIN, in a
		// transaction that did not fail (one that did answers ROLLBACK, and
		// committed nothing).
		if bytes.HasSuffix(line, []byte("\t \"COMMIT\"")) || bytes.HasSuffix(line, []byte("\t \"PREPARE TRANSACTION\"")) {
			w.ended.Store(true)
		}
	case bytes.HasPrefix(line, traceReady):
		if bytes.HasSuffix(line, []byte("\t I")) {
			w.ended.Store(true)
		}
	case bytes.HasPrefix(line, traceQuery):
		// "F\tQuery\t<length>\t \"<text>\"": the text is not escaped.
		if text, ok := quoted(line[len(traceQuery):]); ok && endsTransaction(string(bytes.TrimSuffix(text, []byte("\"")))) {
			w.ended.Store(true)
		}
	case bytes.HasPrefix(line, traceParse):
		// "F\tParse\t<length>\t \"<name>\" \"<text>\" <n> <oid>...": the
		// name is pgx's (no quote in it), and the text ends at the last
		// quote followed by a space.
		rest, ok := quoted(line[len(traceParse):])
		if !ok {
			break
		}
		_, text, ok := bytes.Cut(rest, []byte("\" \""))
		if i := bytes.LastIndex(text, traceEndQuote); ok && i >= 0 && endsTransaction(string(text[:i])) {
			w.ended.Store(true)
		}
	}
	return len(p), nil
}

// quoted returns what follows the start of the message's first quoted detail.
func quoted(details []byte) ([]byte, bool) {
	i := bytes.Index(details, traceDetails)
	if i < 0 {
		return nil, false
	}
	return details[i+len(traceDetails):], true
}
