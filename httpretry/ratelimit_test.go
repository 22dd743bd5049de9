package httpretry

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// Expected values are derived by hand from RFC 8941 (Structured Field
// Values: lists, items, parameters) and draft-ietf-httpapi-ratelimit-headers
// (RateLimit: "policy";r=remaining;t=seconds-to-reset).

func ptRL(policy string, r int64, t time.Duration) RateLimit {
	return RateLimit{Policy: policy, Remaining: r, Reset: t}
}

var ptRateLimitValid = []struct {
	name  string
	value string
	want  []RateLimit
}{
	{"draft example", `"default";r=50;t=30`, []RateLimit{ptRL("default", 50, 30*time.Second)}},
	{"token item", `default;r=0;t=10`, []RateLimit{ptRL("default", 0, 10*time.Second)}},
	{"two items", `"a";r=0;t=10, "b";r=5;t=60`, []RateLimit{ptRL("a", 0, 10*time.Second), ptRL("b", 5, time.Minute)}},
	{"params in any order", `"a";t=10;r=0`, []RateLimit{ptRL("a", 0, 10*time.Second)}},
	{"other params ignored", `"x";q=100;w=60;r=1;t=2`, []RateLimit{ptRL("x", 1, 2*time.Second)}},
	{"spaces after semicolons", `"x"; r=1;  t=2`, []RateLimit{ptRL("x", 1, 2*time.Second)}},
	{"OWS around comma", `"a";t=1 ,  "b";t=2`, []RateLimit{ptRL("a", -1, time.Second), ptRL("b", -1, 2*time.Second)}},
	{"no OWS around comma", `"a";t=1,"b";t=2`, []RateLimit{ptRL("a", -1, time.Second), ptRL("b", -1, 2*time.Second)}},
	{"tabs in OWS and trailing", "\"a\";t=1\t,\t\"b\";t=2 \t", []RateLimit{ptRL("a", -1, time.Second), ptRL("b", -1, 2*time.Second)}},
	{"leading spaces", `   "a";t=1`, []RateLimit{ptRL("a", -1, time.Second)}},
	{"boolean param", `"x";flag;t=3`, []RateLimit{ptRL("x", -1, 3*time.Second)}},
	{"explicit booleans", `"x";f=?1;g=?0;t=3`, []RateLimit{ptRL("x", -1, 3*time.Second)}},
	{"escaped quote", `"a\"b";t=1`, []RateLimit{ptRL(`a"b`, -1, time.Second)}},
	{"escaped backslash", `"a\\b";t=1`, []RateLimit{ptRL(`a\b`, -1, time.Second)}},
	{"empty string item", `"";t=1`, []RateLimit{ptRL("", -1, time.Second)}},
	{"decimal and bytes ignored", `"x";d=1.5;b=:aGk=:;t=4`, []RateLimit{ptRL("x", -1, 4*time.Second)}},
	{"empty bytes", `"x";b=::;t=1`, []RateLimit{ptRL("x", -1, time.Second)}},
	{"largest decimal", `"x";d=-123456789012.123;t=1`, []RateLimit{ptRL("x", -1, time.Second)}},
	{"negative r and t are absent", `"x";r=-1;t=-5`, []RateLimit{ptRL("x", -1, -1)}},
	{"no params", `"x"`, []RateLimit{ptRL("x", -1, -1)}},
	{"boolean r is absent", `"x";r;t=3`, []RateLimit{ptRL("x", -1, 3*time.Second)}},
	{"boolean values are absent", `"x";r=?1;t=?0`, []RateLimit{ptRL("x", -1, -1)}},
	{"string and token values are absent", `"x";r="5";t=tok`, []RateLimit{ptRL("x", -1, -1)}},
	{"decimal values are absent", `"x";r=1.0;t=2.5`, []RateLimit{ptRL("x", -1, -1)}},
	{"zero", `"x";r=0;t=0`, []RateLimit{ptRL("x", 0, 0)}},
	{"minus zero is zero", `"x";t=-0`, []RateLimit{ptRL("x", -1, 0)}},
	{"duplicate key: last wins", `"x";t=1;t=7`, []RateLimit{ptRL("x", -1, 7*time.Second)}},
	{"token characters", `*tok/en:x;t=1`, []RateLimit{ptRL("*tok/en:x", -1, time.Second)}},
	{"key characters", `"x";*=1;a-b_c.d*9=2;t=3`, []RateLimit{ptRL("x", -1, 3*time.Second)}},
	{"large t that fits", `"x";t=999999999`, []RateLimit{ptRL("x", -1, 999999999*time.Second)}},
	{"largest integer r", `"x";r=999999999999999`, []RateLimit{ptRL("x", 999999999999999, -1)}},
	{"15 digits with leading zeros", `"x";t=000000000000001`, []RateLimit{ptRL("x", -1, time.Second)}},
	{"largest negative integer", `"x";r=-999999999999999`, []RateLimit{ptRL("x", -1, -1)}},
	{"three items", `a;t=1, b;t=2, c;r=3`, []RateLimit{ptRL("a", -1, time.Second), ptRL("b", -1, 2*time.Second), ptRL("c", 3, -1)}},
}

var ptRateLimitInvalid = []struct {
	name  string
	value string
}{
	{"empty", ""},
	{"only spaces", "   "},
	{"trailing comma", `"a";t=1,`},
	{"trailing comma and space", `"a";t=1, `},
	{"leading comma", `,"a";t=1`},
	{"empty member", `"a";t=1,,"b";t=2`},
	{"unterminated string", `"unterminated`},
	{"bad escape", `"a\x"`},
	{"escape at end", `"a\`},
	{"tab in string", "\"a\tb\""},
	{"control char in string", "\"a\x01b\""},
	{"DEL in string", "\"a\x7fb\""},
	{"non-ASCII in string", `"é"`},
	{"upper-case key", `"x";T=3`},
	{"key starting with a digit", `"x";1=3`},
	{"inner list", `("a" "b")`},
	{"integer with 16 digits", `"x";t=1234567890123456`},
	{"16 digits, leading zeros included", `"x";t=0000000000000001`},
	{"negative integer with 16 digits", `"x";r=-0000000000000001`},
	{"decimal with 4 fractional digits", `"x";d=1.2345`},
	{"decimal with 13 integer digits", `"x";d=1234567890123.5`},
	{"decimal without fraction", `"x";d=1.`},
	{"two dots", `"x";d=1.2.3`},
	{"minus alone", `"x";t=-`},
	{"equals without value", `"x";t=`},
	{"equals without value, then more", `"x";t=;r=1`},
	{"equals without key", `"x";=3`},
	{"trailing semicolon", `"x";t=1;`},
	{"double semicolon", `"x";;t=1`},
	{"space before semicolon", `"a" ;t=1`},
	{"space after equals", `"x";t= 3`},
	{"two items without comma", `"a" "b"`},
	{"item after params without comma", `"a";t=1 "b"`},
	{"junk after key", `"x";t!`},
	{"bad boolean", `"x";t=?2`},
	{"bad byte sequence char", `"x";b=:a*b:`},
	{"unterminated byte sequence", `"x";b=:abc`},
	{"number then letters", `1abc;t=1`},
	{"garbage", `%%%`},
}

func TestParseRateLimitValid(t *testing.T) {
	for _, tt := range ptRateLimitValid {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRateLimit(tt.value)
			if !ok || !slices.Equal(got, tt.want) {
				t.Errorf("ParseRateLimit(%q) = (%+v, %v), want (%+v, true)", tt.value, got, ok, tt.want)
			}
		})
	}
}

func TestParseRateLimitInvalid(t *testing.T) {
	for _, tt := range ptRateLimitInvalid {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := ParseRateLimit(tt.value); ok {
				t.Errorf("ParseRateLimit(%q) = (%+v, true), want ok = false", tt.value, got)
			}
		})
	}
}

// TestParseRateLimitDuplicateParams: RFC 8941 section 4.2.3.2 (Parsing
// Parameters): "If parameters already contains a key param_name (comparing
// character for character), overwrite its value with param_value." So a
// later r or t that is not a non-negative integer replaces an earlier valid
// one, and the parameter is then treated as absent.
func TestParseRateLimitDuplicateParams(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  RateLimit
	}{
		{"integer then decimal t", `"x";t=5;t=1.5`, ptRL("x", -1, -1)},
		{"integer then boolean t", `"x";t=5;t`, ptRL("x", -1, -1)},
		{"zero then negative r", `"x";r=0;r=-1;t=3`, ptRL("x", -1, 3*time.Second)},
		{"integer then string r", `"x";r=0;r="0";t=3`, ptRL("x", -1, 3*time.Second)},
		{"decimal then integer t", `"x";t=1.5;t=5`, ptRL("x", -1, 5*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRateLimit(tt.value)
			if !ok || len(got) != 1 || got[0] != tt.want {
				t.Errorf("ParseRateLimit(%q) = (%+v, %v), want ([%+v], true)", tt.value, got, ok, tt.want)
			}
		})
	}
}

// TestParseRateLimitHugeReset: t is any RFC 8941 Integer up to 15 digits,
// seconds; most of those do not fit a time.Duration (at most 9223372036 whole
// seconds). Such a reset must never come out shorter than the server asked
// (a wrapped-around multiplication), negative, or treated as absent: it
// saturates to the longest Duration, longer than any cap, as a Retry-After
// too long to represent does.
func TestParseRateLimitHugeReset(t *testing.T) {
	tests := []struct {
		name  string
		value string
	}{
		{"one past the largest Duration", `"x";r=0;t=9223372037`},
		{"wraps to 0.29 s", `"x";r=0;t=18446744074`},
		{"largest Integer", `"x";r=0;t=999999999999999`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRateLimit(tt.value)
			if !ok || len(got) != 1 {
				t.Fatalf("ParseRateLimit(%q) = (%+v, %v), want one item", tt.value, got, ok)
			}
			if r := got[0].Reset; r != ptMaxDuration {
				t.Errorf("ParseRateLimit(%q) Reset = %v (%d ns), want the longest Duration", tt.value, r, int64(r))
			}
			h := http.Header{}
			h.Add("RateLimit", tt.value)
			if d, ok := rateLimitWait(h); !ok || d != ptMaxDuration {
				t.Errorf("rateLimitWait(RateLimit: %s) = (%v, %v), want the longest Duration", tt.value, d, ok)
			}
		})
	}
}

func TestRateLimitWait(t *testing.T) {
	tests := []struct {
		name    string
		headers [][2]string
		want    time.Duration
		ok      bool
	}{
		// A policy with quota left asks for no wait, however long its window
		// (a daily policy must not make a client give up on a 503).
		{"single policy with quota left", [][2]string{{"RateLimit", `"default";r=50;t=30`}}, 0, false},
		{"single exhausted policy", [][2]string{{"RateLimit", `"default";r=0;t=30`}}, 30 * time.Second, true},
		{"exhausted policy wins over a longer one", [][2]string{{"RateLimit", `"a";r=0;t=10, "b";r=5;t=60`}}, 10 * time.Second, true},
		{"longest exhausted policy", [][2]string{{"RateLimit", `"a";r=0;t=10, "b";r=0;t=20, "c";r=1;t=99`}}, 20 * time.Second, true},
		{"none exhausted: no wait", [][2]string{{"RateLimit", `"a";r=3;t=10, "b";r=5;t=60`}}, 0, false},
		{"exhausted without t: no wait known", [][2]string{{"RateLimit", `"a";r=0, "b";r=2;t=40`}}, 0, false},
		{"exhausted with t=0", [][2]string{{"RateLimit", `"a";r=0;t=0, "b";r=2;t=40`}}, 0, true},
		{"two header lines combine", [][2]string{{"RateLimit", `"a";r=5;t=60`}, {"RateLimit", `"b";r=0;t=15`}}, 15 * time.Second, true},
		{"lower-case field name", [][2]string{{"ratelimit", `"a";r=0;t=12`}}, 12 * time.Second, true},
		// The older drafts' RateLimit-Reset is a wait only with a
		// RateLimit-Remaining of 0; the longest reset of either form governs.
		{"longest of RateLimit and RateLimit-Reset", [][2]string{{"RateLimit", `"a";r=0;t=10`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"longest of RateLimit-Reset and RateLimit", [][2]string{{"RateLimit", `"a";r=0;t=40`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 40 * time.Second, true},
		{"old form alone", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"old form, remaining 00", [][2]string{{"RateLimit-Remaining", "00"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"old form beside an invalid RateLimit", [][2]string{{"RateLimit", `%%%`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"old form: one invalid line invalidates RateLimit", [][2]string{{"RateLimit", `"a";r=0;t=40`}, {"RateLimit", `%%%`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}, 30 * time.Second, true},
		{"old form: no t in RateLimit", [][2]string{{"RateLimit", `"a";r=0`}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "7"}}, 7 * time.Second, true},
		{"old form with OWS", [][2]string{{"RateLimit-Remaining", "\t0 "}, {"RateLimit-Reset", " 30\t"}}, 30 * time.Second, true},
		{"old form: longest of two resets", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}, {"RateLimit-Reset", "90"}}, 90 * time.Second, true},
		{"old form: too long to represent", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "9223372037"}}, ptMaxDuration, true},
		{"old form: remaining absent", [][2]string{{"RateLimit-Reset", "30"}}, 0, false},
		{"old form: quota left", [][2]string{{"RateLimit-Remaining", "5"}, {"RateLimit-Reset", "30"}}, 0, false},
		{"old form: remaining not a number", [][2]string{{"RateLimit-Remaining", "none"}, {"RateLimit-Reset", "30"}}, 0, false},
		{"old form: remaining negative", [][2]string{{"RateLimit-Remaining", "-0"}, {"RateLimit-Reset", "30"}}, 0, false},
		{"old form: remaining blank", [][2]string{{"RateLimit-Remaining", " "}, {"RateLimit-Reset", "30"}}, 0, false},
		{"RateLimit with quota left, old form too", [][2]string{{"RateLimit", `"a";r=3;t=10`}, {"RateLimit-Remaining", "1"}, {"RateLimit-Reset", "30"}}, 0, false},
		{"nothing", nil, 0, false},
		{"invalid RateLimit only", [][2]string{{"RateLimit", `"a";r=0;t=10,`}}, 0, false},
		{"one invalid line, no fallback", [][2]string{{"RateLimit", `"a";r=0;t=10`}, {"RateLimit", `("x")`}}, 0, false},
		{"no t and no fallback", [][2]string{{"RateLimit", `"a";r=0`}}, 0, false},
		{"negative RateLimit-Reset", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "-1"}}, 0, false},
		{"decimal RateLimit-Reset", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "1.5"}}, 0, false},
		{"date RateLimit-Reset", [][2]string{{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "Sun, 06 Nov 1994 08:49:37 GMT"}}, 0, false},
		{"unrelated headers", [][2]string{{"Retry-After", "5"}, {"X-RateLimit-Reset", "9"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h.Add(kv[0], kv[1])
			}
			d, ok := rateLimitWait(h)
			if ok != tt.ok || (ok && d != tt.want) {
				t.Errorf("rateLimitWait(%v) = (%v, %v), want (%v, %v)", h, d, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, tt := range ptRateLimitValid {
		f.Add(tt.value)
	}
	for _, tt := range ptRateLimitInvalid {
		f.Add(tt.value)
	}
	for _, s := range []string{
		`"x";t=5;t=1.5`, `"x";t=5;t`, `"x";r=0;r=-1;t=3`, `"x";r=0;r="0";t=3`, `"x";t=1.5;t=5`,
		`"x";r=0;t=9223372037`, `"x";r=0;t=18446744074`, `"x";r=0;t=999999999999999`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		limits, ok := ParseRateLimit(value)
		again, ok2 := ParseRateLimit(value)
		if ok != ok2 || !slices.Equal(limits, again) {
			t.Fatalf("ParseRateLimit(%q) not deterministic: (%+v, %v) then (%+v, %v)", value, limits, ok, again, ok2)
		}
		if !ok {
			return
		}
		if len(limits) == 0 {
			t.Fatalf("ParseRateLimit(%q) = ([], true)", value)
		}
		for _, l := range limits {
			if l.Remaining < -1 {
				t.Fatalf("ParseRateLimit(%q): Remaining %d < -1", value, l.Remaining)
			}
			if l.Reset < -1 {
				t.Fatalf("ParseRateLimit(%q): Reset %v (%d ns) < -1", value, l.Reset, int64(l.Reset))
			}
			if l.Reset != -1 && l.Reset != ptMaxDuration && l.Reset%time.Second != 0 {
				t.Fatalf("ParseRateLimit(%q): Reset %v is neither a whole number of seconds nor saturated", value, l.Reset)
			}
		}
	})
}
