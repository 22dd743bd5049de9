package sqlretry

import "strings"

// endsTransaction reports whether sql, a query string fn sends, may end the
// transaction it runs in: whether one of its statements is COMMIT, END,
// ABORT, ROLLBACK other than ROLLBACK TO a savepoint, or PREPARE
// TRANSACTION, AND CHAIN or not. A query string of the simple protocol
// (pgx's Exec without arguments) may hold several statements, and pgx
// returns only the last one's command tag, so the text is read, not the
// answers: before it is sent, so that a COMMIT whose answer never comes is
// seen too.
//
// It splits sql at its semicolons as PostgreSQL's lexer does (scan.l):
// outside string constants, quoted identifiers, dollar quotes and comments.
// A string constant's backslashes depend on the server's
// standard_conforming_strings, so sql is read both ways, and an end found
// either way counts: a mistake may only say that a statement ends the
// transaction when it does not (a BEGIN ATOMIC function body's END does),
// which costs a give-up, never a run again. Text the server cannot parse
// (an unterminated quote) runs nothing, whatever this says of it.
func endsTransaction(sql string) bool {
	if strings.IndexByte(sql, ';') < 0 { // one statement
		return endsHere(sql, skipSpace(sql, 0))
	}
	// Without a backslash both readings are one.
	return endsSomewhere(sql, false) || strings.IndexByte(sql, '\\') >= 0 && endsSomewhere(sql, true)
}

// endsSomewhere reports whether a statement of sql ends the transaction,
// reading backslashes in plain string constants as escapes or not
// (standard_conforming_strings off or on).
func endsSomewhere(s string, backslashes bool) bool {
	start := true // at the start of a statement
	for i := 0; i < len(s); {
		if start {
			if i = skipSpace(s, i); i >= len(s) {
				return false
			}
			if endsHere(s, i) {
				return true
			}
			start = false
		}
		c := s[i]
		switch {
		case c == ';':
			start = true
			i++
		case c == '\'':
			i = skipQuoted(s, i+1, '\'', backslashes)
		case c == '"':
			i = skipQuoted(s, i+1, '"', false)
		case c == '-' && i+1 < len(s) && s[i+1] == '-', c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = skipSpace(s, i)
		case c == '$':
			i = skipDollarQuote(s, i)
		case identStart(c):
			i = skipWord(s, i, backslashes)
		case '0' <= c && c <= '9':
			// A number (1e5, 0x1F, 1_000) does not take a '$' in: 1$a$ is
			// 1 and a dollar quote.
			for i++; i < len(s) && (identStart(s[i]) || '0' <= s[i] && s[i] <= '9' || s[i] == '.'); i++ {
			}
		default:
			i++
		}
	}
	return false
}

// skipWord skips the identifier or keyword at s[i], and the string constant
// it prefixes when it is one: E'…' (backslash escapes always), B'…' and
// X'…' (none), N'…' (as a plain one), U&'…' and U&"…" (none).
func skipWord(s string, i int, backslashes bool) int {
	j := i + 1
	for j < len(s) && identCont(s[j]) {
		j++
	}
	if j-i != 1 || j >= len(s) {
		return j
	}
	switch p, next := s[i]|0x20, s[j]; {
	case next == '\'' && p == 'e':
		return skipQuoted(s, j+1, '\'', true)
	case next == '\'' && (p == 'b' || p == 'x'):
		return skipQuoted(s, j+1, '\'', false)
	case next == '\'' && p == 'n':
		return skipQuoted(s, j+1, '\'', backslashes)
	case next == '&' && p == 'u' && j+1 < len(s) && (s[j+1] == '\'' || s[j+1] == '"'):
		return skipQuoted(s, j+2, s[j+1], false)
	}
	return j
}

// skipQuoted skips to after the quote q that closes what starts at s[i]; a
// doubled quote is one inside, and so is one after a backslash when
// backslashes escape. Unterminated, it returns len(s).
func skipQuoted(s string, i int, q byte, backslashes bool) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if backslashes {
				i++
			}
		case q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(s)
}

// skipDollarQuote skips the dollar-quoted string constant at s[i] ($$…$$,
// $tag$…$tag$), or the '$' alone when none starts there ($1, a parameter).
func skipDollarQuote(s string, i int) int {
	j := i + 1
	if j < len(s) && identStart(s[j]) {
		for j++; j < len(s) && identCont(s[j]) && s[j] != '$'; j++ {
		}
	}
	if j >= len(s) || s[j] != '$' {
		return i + 1
	}
	delim := s[i : j+1]
	if k := strings.Index(s[j+1:], delim); k >= 0 {
		return j + 1 + k + len(delim)
	}
	return len(s)
}

// skipSpace skips white space and comments (-- to the end of the line,
// /* … */ nested) from s[i].
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == ' ' || '\t' <= c && c <= '\r': // \t \n \v \f \r
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			if k := strings.IndexAny(s[i:], "\n\r"); k >= 0 {
				i += k + 1
			} else {
				i = len(s)
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			for depth := 0; i < len(s); {
				switch {
				case s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
					depth++
					i += 2
				case s[i] == '*' && i+1 < len(s) && s[i+1] == '/':
					depth--
					i += 2
				default:
					i++
				}
				if depth == 0 {
					break
				}
			}
		default:
			return i
		}
	}
	return i
}

// endsHere reports whether the statement that starts at s[i] may end the
// transaction.
func endsHere(s string, i int) bool {
	w, i := word(s, i)
	switch {
	case keyword(w, "commit"), keyword(w, "end"), keyword(w, "abort"):
		return true
	case keyword(w, "rollback"): // but not ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name
		w, i = word(s, skipSpace(s, i))
		if keyword(w, "work") || keyword(w, "transaction") {
			w, _ = word(s, skipSpace(s, i))
		}
		return !keyword(w, "to")
	case keyword(w, "prepare"): // PREPARE TRANSACTION 'id', not PREPARE name AS …
		w, _ = word(s, skipSpace(s, i))
		return keyword(w, "transaction")
	}
	return false
}

// word returns the identifier or keyword at s[i] ("" if none), and where it
// ends.
func word(s string, i int) (string, int) {
	j := i
	for j < len(s) && identCont(s[j]) {
		j++
	}
	return s[i:j], j
}

// keyword reports whether w is kw, a lower-case keyword, in any case of
// ASCII letters, as PostgreSQL folds keywords.
func keyword(w, kw string) bool {
	if len(w) != len(kw) {
		return false
	}
	for i := range len(w) {
		if w[i]|0x20 != kw[i] {
			return false
		}
	}
	return true
}

// identStart and identCont are PostgreSQL's ident_start and ident_cont:
// ASCII letters, '_', any byte of a non-ASCII character, and then digits and
// '$'.
func identStart(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || c == '_' || c >= 0x80
}

func identCont(c byte) bool {
	return identStart(c) || '0' <= c && c <= '9' || c == '$'
}
