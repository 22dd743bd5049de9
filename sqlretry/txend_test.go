package sqlretry

import (
	"bytes"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestEndWatchReadsPgxTrace: endWatch reads pgx's own trace of the messages
// (pgproto3's format, which a new pgx could change: this test would then
// fail rather than Tx stop seeing ends), and finds an end only in a
// statement's text, a COMMIT or PREPARE TRANSACTION command tag or a
// ReadyForQuery outside a transaction, never in a value or in a text that
// merely looks like another message's trace.
func TestEndWatchReadsPgxTrace(t *testing.T) {
	for _, c := range []struct {
		name string
		sent pgproto3.FrontendMessage // by the client, or
		got  pgproto3.BackendMessage  // from the server
		ends bool
	}{
		{"a query", &pgproto3.Query{String: "SELECT 1"}, nil, false},
		{"COMMIT AND CHAIN in a string", &pgproto3.Query{String: "SELECT '\" \"',\n\"a\"; commit and chain"}, nil, true},
		{"a query that looks like a tag", &pgproto3.Query{String: "SELECT 'x\nB\tCommandComplete\t11\t \"COMMIT\"'"}, nil, false},
		{"a query ending in a quote", &pgproto3.Query{String: `SELECT 1 AS "COMMIT"`}, nil, false},
		{"ROLLBACK TO", &pgproto3.Query{String: "ROLLBACK TO SAVEPOINT s"}, nil, false},
		{"ROLLBACK AND CHAIN", &pgproto3.Query{String: "ROLLBACK AND CHAIN"}, nil, true},
		{"a prepared COMMIT AND CHAIN", &pgproto3.Parse{Name: "stmt_0a", Query: "COMMIT AND CHAIN"}, nil, true},
		{"a prepared statement", &pgproto3.Parse{Name: "stmtcache_1", Query: `SELECT $1::text AS "x" `, ParameterOIDs: []uint32{25}}, nil, false},
		{"an unnamed prepared END", &pgproto3.Parse{Query: "END"}, nil, true},
		{"COMMIT's tag", nil, &pgproto3.CommandComplete{CommandTag: []byte("COMMIT")}, true},
		{"PREPARE TRANSACTION's tag", nil, &pgproto3.CommandComplete{CommandTag: []byte("PREPARE TRANSACTION")}, true},
		{"ROLLBACK's tag", nil, &pgproto3.CommandComplete{CommandTag: []byte("ROLLBACK")}, false},
		{"an UPDATE's tag", nil, &pgproto3.CommandComplete{CommandTag: []byte("UPDATE 1")}, false},
		{"no transaction", nil, &pgproto3.ReadyForQuery{TxStatus: 'I'}, true},
		{"in a transaction", nil, &pgproto3.ReadyForQuery{TxStatus: 'T'}, false},
		{"in a failed transaction", nil, &pgproto3.ReadyForQuery{TxStatus: 'E'}, false},
		{"a row", nil, &pgproto3.DataRow{Values: [][]byte{[]byte("COMMIT"), []byte("\t \"COMMIT\"")}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in []byte
			if c.got != nil {
				var err error
				if in, err = c.got.Encode(nil); err != nil {
					t.Fatal(err)
				}
			}
			f := pgproto3.NewFrontend(bytes.NewReader(in), io.Discard)
			w := &endWatch{}
			f.Trace(w, pgproto3.TracerOptions{SuppressTimestamps: true})
			if c.sent != nil {
				f.Send(c.sent)
				if err := f.Flush(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := f.Receive(); err != nil {
				t.Fatal(err)
			}
			if got := w.ended.Load(); got != c.ends {
				t.Fatalf("ended %v, want %v", got, c.ends)
			}
		})
	}
}
