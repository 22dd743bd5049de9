package sqlretry

import "testing"

// TestEndsTransaction: the statements that end a transaction are found in a
// query string of several, and only outside constants, quoted identifiers,
// dollar quotes and comments; a savepoint's ROLLBACK TO is no end.
func TestEndsTransaction(t *testing.T) {
	for _, c := range []struct {
		sql  string
		ends bool
	}{
		{"COMMIT", true},
		{"commit and chain", true},
		{"  /* a */ -- b\n End", true},
		{"END TRANSACTION", true},
		{"ABORT", true},
		{"ROLLBACK", true},
		{"ROLLBACK AND CHAIN", true},
		{"rollback work", true},
		{"ROLLBACK TRANSACTION AND NO CHAIN", true},
		{"PREPARE TRANSACTION 'x'", true},
		{"PREPARE /* c */ transaction 'x'", true},
		{"UPDATE t SET a = 1; COMMIT AND CHAIN; SELECT 1/0", true},
		{"UPDATE t SET a = 1;COMMIT", true},
		{"SELECT 1;\n-- x\nEND;", true},
		{"SELECT 1; /* a /* nested */ b */ COMMIT", true},
		{"SELECT 'a'';b'; COMMIT", true},
		{`SELECT 'a\'; COMMIT; --'`, true}, // standard_conforming_strings on: the COMMIT runs
		{`SELECT E'a\'; COMMIT'`, false},
		{`SELECT E'a\\'; COMMIT`, true},
		{`SELECT B'1\'; COMMIT; --'`, true}, // no escapes in a bit string
		{`SELECT U&'a\'; COMMIT; --'`, true},
		{`SELECT "a;""; COMMIT"`, false},
		{"SELECT $$; COMMIT$$", false},
		{"SELECT $a$ $$; COMMIT $$ $a$", false},
		{"SELECT $a$; COMMIT $b$; $a$; COMMIT", true},
		{"SELECT a$b$; COMMIT; SELECT $b$", true}, // a$b$ is an identifier
		{"SELECT 1$a$; COMMIT $a$", false},
		{"SELECT $1; COMMIT", true},
		{"SELECT 1 -- ; COMMIT", false},
		{"SELECT 1 /* ; COMMIT */", false},
		{"SELECT 1 /* /* */ ; COMMIT */", false},
		{"SELECT x'1'; COMMIT", true},
		{"SELECT 'x' ; commitment", false},
		{"COMMITTED", false},
		{"SELECT 1; ROLLBACK TO SAVEPOINT s", false},
		{"ROLLBACK TO s", false},
		{"ROLLBACK WORK TO SAVEPOINT s", false},
		{"rollback /* c */ transaction to s", false},
		{"PREPARE p AS SELECT 1", false},
		{"SELECT 'end'; SELECT CASE WHEN true THEN 1 END", false},
		{"UPDATE t SET a = 1; UPDATE t SET b = 2", false},
		{"INSERT INTO end_log VALUES (1)", false},
		{"", false},
		{";;", false},
		{"SELECT 'unterminated; COMMIT", false}, // the server runs none of it
		{"SELECT n'a\\'; COMMIT; --'", true},
	} {
		if got := endsTransaction(c.sql); got != c.ends {
			t.Errorf("endsTransaction(%q) = %v, want %v", c.sql, got, c.ends)
		}
	}
}

func BenchmarkEndsTransaction(b *testing.B) {
	for _, c := range []struct{ name, sql string }{
		{"one", "UPDATE accounts SET balance = balance - $1 WHERE id = $2"},
		{"several", "UPDATE accounts SET balance = balance - 10 WHERE id = 1; UPDATE accounts SET balance = balance + 10 WHERE id = 2"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				endsTransaction(c.sql)
			}
		})
	}
}
