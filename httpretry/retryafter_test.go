package httpretry

import (
	"math/big"
	"strings"
	"testing"
	"time"
)

// Expected values below are derived by hand from RFC 9110 (section 10.2.3,
// Retry-After; section 5.6.7, HTTP-date), never from the code's output.
//
// ptNow is the fixed "now" of most cases: 37 seconds before the RFC's own
// example date, Sun, 06 Nov 1994 08:49:37 GMT.
var ptNow = time.Date(1994, time.November, 6, 8, 49, 0, 0, time.UTC)

// ptMaxWholeSeconds is the largest whole number of seconds a time.Duration
// holds: floor((2^63-1) / 10^9) = floor(9223372036.854775807).
const ptMaxWholeSeconds = 9223372036

func TestParseRetryAfterDelaySeconds(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"zero", "0", 0, true},
		{"double zero", "00", 0, true},
		{"one", "1", time.Second, true},
		{"RFC example 120", "120", 2 * time.Minute, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"many leading zeros", "0000000000000000000000001", time.Second, true},
		{"largest that fits", "9223372036", ptMaxWholeSeconds * time.Second, true},
		{"surrounding space and tab", " 5\t", 5 * time.Second, true},
		{"surrounding tabs and spaces", "\t\t5  ", 5 * time.Second, true},

		// RFC 9110 sets no bound on delay-seconds: a wait too long to
		// represent saturates to the longest Duration, longer than any cap.
		{"one past the largest", "9223372037", ptMaxDuration, true},
		{"19 digits within int64", "9223372036854775807", ptMaxDuration, true},
		{"19 digits beyond int64", "9999999999999999999", ptMaxDuration, true},
		{"beyond int64", "99999999999999999999", ptMaxDuration, true},
		{"huge digit string", strings.Repeat("9", 1000), ptMaxDuration, true},
		{"huge with leading zeros", "000" + strings.Repeat("9", 30), ptMaxDuration, true},
		{"empty", "", 0, false},
		{"only space", " ", 0, false},
		{"only tab", "\t", 0, false},
		{"negative", "-1", 0, false},
		{"negative zero", "-0", 0, false},
		{"plus sign", "+1", 0, false},
		{"decimal", "1.0", 0, false},
		{"exponent", "1e3", 0, false},
		{"trailing letter", " 1x", 0, false},
		{"hex", "0x10", 0, false},
		{"underscore", "1_000", 0, false},
		{"arabic-indic digit", "١", 0, false},
		{"fullwidth digit", "５", 0, false},
		{"two numbers", "1 2", 0, false},
		{"comma list", "1,2", 0, false},
		{"infinity", "∞", 0, false},
		{"leading newline is not OWS", "\n5", 0, false},
		{"trailing newline is not OWS", "5\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.value, ptNow)
			if ok != tt.ok || (ok && d != tt.want) {
				t.Errorf("ParseRetryAfter(%q) = (%v, %v), want (%v, %v)", tt.value, d, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRetryAfterHTTPDate(t *testing.T) {
	newYearsEve := time.Date(1999, time.December, 31, 23, 59, 59, 0, time.UTC)
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  time.Duration
		ok    bool
	}{
		// The RFC's example date in its three forms, 37 s after ptNow.
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", ptNow, 37 * time.Second, true},
		{"RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", ptNow, 37 * time.Second, true},
		{"asctime", "Sun Nov  6 08:49:37 1994", ptNow, 37 * time.Second, true},
		// date3 = month SP ( 2DIGIT / ( SP DIGIT ) )
		{"asctime two-digit day", "Sun Nov 06 08:49:37 1994", ptNow, 37 * time.Second, true},
		{"IMF-fixdate with OWS", "  Sun, 06 Nov 1994 08:49:37 GMT\t", ptNow, 37 * time.Second, true},
		// now in another zone is the same instant: the date is GMT.
		{"now in another zone", "Sun, 06 Nov 1994 08:49:37 GMT", ptNow.In(time.FixedZone("EST", -5*3600)), 37 * time.Second, true},

		// The next day (Monday 7 November 1994), exactly 24 h after ptNow.
		{"IMF-fixdate next day", "Mon, 07 Nov 1994 08:49:00 GMT", ptNow, 24 * time.Hour, true},
		{"RFC 850 next day", "Monday, 07-Nov-94 08:49:00 GMT", ptNow, 24 * time.Hour, true},
		{"asctime next day", "Mon Nov  7 08:49:00 1994", ptNow, 24 * time.Hour, true},
		// Thu 1 Dec 1994 00:00: 15h11m left of 6 Nov, then 7..30 Nov = 24 days.
		{"IMF-fixdate next month", "Thu, 01 Dec 1994 00:00:00 GMT", ptNow, 24*24*time.Hour + 15*time.Hour + 11*time.Minute, true},
		// Across a year (and century) boundary: 23:59:59 -> 00:00:01 is 2 s.
		{"IMF-fixdate new year", "Sat, 01 Jan 2000 00:00:01 GMT", newYearsEve, 2 * time.Second, true},
		{"RFC 850 new year", "Saturday, 01-Jan-00 00:00:01 GMT", newYearsEve, 2 * time.Second, true},
		{"asctime new year", "Sat Jan  1 00:00:01 2000", newYearsEve, 2 * time.Second, true},

		// Now or in the past: no wait, but valid.
		{"exactly now", "Sun, 06 Nov 1994 08:49:00 GMT", ptNow, 0, true},
		{"one second ago", "Sun, 06 Nov 1994 08:48:59 GMT", ptNow, 0, true},
		{"RFC 850 in the past", "Sunday, 06-Nov-94 08:49:37 GMT", ptNow.Add(time.Hour), 0, true},
		{"asctime in the past", "Sun Nov  6 08:49:37 1994", ptNow.Add(time.Hour), 0, true},
		{"epoch", "Thu, 01 Jan 1970 00:00:00 GMT", ptNow, 0, true},

		// Malformed.
		{"wrong month name", "Sun, 06 Foo 1994 08:49:37 GMT", ptNow, 0, false},
		{"IMF-fixdate without GMT", "Sun, 06 Nov 1994 08:49:37", ptNow, 0, false},
		{"IMF-fixdate with UTC", "Sun, 06 Nov 1994 08:49:37 UTC", ptNow, 0, false},
		{"ISO 8601", "2024-01-01T00:00:00Z", ptNow, 0, false},
		{"truncated time", "Sun, 06 Nov 1994 08:49", ptNow, 0, false},
		{"truncated date", "Sun, 06 Nov 1994", ptNow, 0, false},
		{"day name only", "Sun,", ptNow, 0, false},
		// One value: a field line that holds several is read by
		// retryAfterLine, which takes the longest.
		{"a date joined with seconds", "Fri, 01 Jan 2100 00:00:00 GMT, 1", ptNow, 0, false},
		{"RFC 850 truncated", "Sunday, 06-Nov-94", ptNow, 0, false},
		{"asctime without year", "Sun Nov  6 08:49:37", ptNow, 0, false},
		{"asctime with zone", "Sun Nov  6 08:49:37 1994 GMT", ptNow, 0, false},
		{"IMF-fixdate one-digit day", "Sun, 6 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"IMF-fixdate two-digit year", "Sun, 06 Nov 94 08:49:37 GMT", ptNow, 0, false},
		{"IMF-fixdate long day name", "Sunday, 06 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"RFC 850 short day name", "Sun, 06-Nov-94 08:49:37 GMT", ptNow, 0, false},
		{"hour 25", "Sun, 06 Nov 1994 25:49:37 GMT", ptNow, 0, false},
		{"30 November has no 31st", "Wed, 31 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"2100 is not a leap year", "Mon, 29 Feb 2100 00:00:00 GMT", time.Date(2100, time.February, 28, 0, 0, 0, 0, time.UTC), 0, false},
		{"no 30 February", "Wed, 30 Feb 2000 00:00:00 GMT", ptNow, 0, false},
		{"day 00", "Sun, 00 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"minute 60", "Sun, 06 Nov 1994 08:60:37 GMT", ptNow, 0, false},
		{"second 61", "Sun, 06 Nov 1994 08:49:61 GMT", ptNow, 0, false},
		{"asctime one-digit day not space-padded", "Sun Nov 6 08:49:37 1994", ptNow, 0, false},
		{"asctime day padded on the right", "Sun Nov 6  08:49:37 1994", ptNow, 0, false},
		{"IMF-fixdate double space", "Sun,  06 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"RFC 850 four-digit year", "Sunday, 06-Nov-1994 08:49:37 GMT", ptNow, 0, false},
		{"RFC 850 without GMT", "Sunday, 06-Nov-94 08:49:37", ptNow, 0, false},
		{"signed day", "Sun, +6 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"unknown day name", "Sux, 06 Nov 1994 08:49:37 GMT", ptNow, 0, false},
		{"unknown long day name", "Sundae, 06-Nov-94 08:49:37 GMT", ptNow, 0, false},

		// Leap days: 1996 and 2000 (divisible by 400) are leap years.
		{"29 February 1996", "Thu, 29 Feb 1996 00:00:00 GMT", time.Date(1996, time.February, 28, 0, 0, 0, 0, time.UTC), 24 * time.Hour, true},
		{"29 February 2000", "Tue, 29 Feb 2000 00:00:00 GMT", time.Date(2000, time.February, 28, 0, 0, 0, 0, time.UTC), 24 * time.Hour, true},
		{"1 March 2100 after 28 February", "Mon, 01 Mar 2100 00:00:00 GMT", time.Date(2100, time.February, 28, 0, 0, 0, 0, time.UTC), 24 * time.Hour, true},
		// RFC 850 two-digit year less than 50 years ahead stays ahead:
		// 2000-06-01 to 2050-01-01 is 50*365 + 12 leap days - 151 = 18111 days.
		{"RFC 850 year 49.6 years ahead", "Saturday, 01-Jan-50 00:00:00 GMT", time.Date(2000, time.June, 1, 0, 0, 0, 0, time.UTC), 18111 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.value, tt.now)
			if ok != tt.ok || (ok && d != tt.want) {
				t.Errorf("ParseRetryAfter(%q, %v) = (%v, %v), want (%v, %v)", tt.value, tt.now, d, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestParseRetryAfterFormatRoundTrip formats many instants, with the time
// package, in the three HTTP-date forms (RFC 9110 section 5.6.7) and checks
// that each one reads back as exactly the time from now to it (0 if past).
func TestParseRetryAfterFormatRoundTrip(t *testing.T) {
	forms := []struct {
		name, layout string
	}{
		{"IMF-fixdate", "Mon, 02 Jan 2006 15:04:05 GMT"},
		{"RFC 850", "Monday, 02-Jan-06 15:04:05 GMT"},
		{"asctime", "Mon Jan _2 15:04:05 2006"},
	}
	now := time.Date(2024, time.February, 28, 12, 34, 56, 0, time.UTC)
	var offsets []time.Duration
	for k := -400; k <= 400; k++ { // about 400 days either way, in steps of 1 day 13 s
		offsets = append(offsets, time.Duration(k)*86413*time.Second)
	}
	for k := -40; k <= 40; k++ { // about 40 years either way
		offsets = append(offsets, time.Duration(k)*31536011*time.Second)
	}
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			for _, off := range offsets {
				at := now.Add(off)
				value := at.Format(form.layout)
				want := max(off, 0)
				if d, ok := ParseRetryAfter(value, now); !ok || d != want {
					t.Errorf("ParseRetryAfter(%q, %v) = (%v, %v), want (%v, true)", value, now, d, ok, want)
				}
			}
		})
	}
}

// TestParseRetryAfterStrictHTTPDate holds the HTTP-date rules of RFC 9110
// section 5.6.7 that a lenient date parser misses.
func TestParseRetryAfterStrictHTTPDate(t *testing.T) {
	y2k := time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  time.Duration
		ok    bool
		rule  string
	}{
		{
			"RFC 850 with a zone other than GMT", "Sunday, 06-Nov-94 08:49:37 PST", ptNow, 0, false,
			`rfc850-date = day-name-l "," SP date2 SP time-of-day SP GMT`,
		},
		{
			"fractional seconds", "Sun, 06 Nov 1994 08:49:37.5 GMT", ptNow, 0, false,
			`second = 2DIGIT`,
		},
		{
			"upper-case day and month names", "SUN, 06 NOV 1994 08:49:37 GMT", ptNow, 0, false,
			`day-name = %s"Mon" / ... ; month = %s"Jan" / ... (case-sensitive)`,
		},
		{
			// Read as 2055 the date is 55 years ahead of now (2000), so it
			// is 1955: in the past.
			"RFC 850 two-digit year more than 50 years ahead", "Saturday, 01-Jan-55 00:00:00 GMT", y2k, 0, true,
			"Recipients of a timestamp value in rfc850-date format, which uses a two-digit year, MUST interpret " +
				"a timestamp that appears to be more than 50 years in the future as representing the most recent " +
				"year in the past that had the same last two digits.",
		},
		{
			// Read as 2050 the date is 50 years and 6 months ahead: more than
			// 50 years, so it is 1950, in the past.
			"RFC 850 two-digit year 50.5 years ahead", "Friday, 01-Dec-50 00:00:00 GMT", time.Date(2000, time.June, 1, 0, 0, 0, 0, time.UTC), 0, true,
			"Recipients of a timestamp value in rfc850-date format, which uses a two-digit year, MUST interpret " +
				"a timestamp that appears to be more than 50 years in the future as representing the most recent " +
				"year in the past that had the same last two digits.",
		},
		{
			// 2000-02-29 exists; 2100-02-29 does not (2100 is not a leap
			// year). Read from 2090 the only real date is in the past.
			"RFC 850 29 February of a two-digit year", "Tuesday, 29-Feb-00 00:00:00 GMT", time.Date(2090, time.January, 1, 0, 0, 0, 0, time.UTC), 0, true,
			"A recipient that parses a timestamp value in an HTTP field MUST accept all three HTTP-date formats.",
		},
		{
			"leap second", "Sat, 31 Dec 2016 23:59:60 GMT", time.Date(2016, time.December, 31, 23, 59, 0, 0, time.UTC), time.Minute, true,
			`time-of-day = hour ":" minute ":" second ; 00:00:00 - 23:59:60 (leap second)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.value, tt.now)
			if ok != tt.ok || (ok && d != tt.want) {
				t.Errorf("ParseRetryAfter(%q, %v) = (%v, %v), want (%v, %v); RFC 9110 5.6.7: %s",
					tt.value, tt.now, d, ok, tt.want, tt.ok, tt.rule)
			}
		})
	}
}

// ptRetryAfterSeeds is the fuzz seed corpus: every value of the tables above.
var ptRetryAfterSeeds = []string{
	"0", "00", "1", "120", "007", "0000000000000000000000001", "9223372036", " 5\t", "\t\t5  ",
	"9223372037", "99999999999999999999", strings.Repeat("9", 1000), "", " ", "\t", "-1", "-0", "+1",
	"1.0", "1e3", " 1x", "0x10", "1_000", "١", "５", "1 2", "1,2", "∞", "\n5", "5\n",
	"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
	"Sun Nov 06 08:49:37 1994", "  Sun, 06 Nov 1994 08:49:37 GMT\t", "Mon, 07 Nov 1994 08:49:00 GMT",
	"Monday, 07-Nov-94 08:49:00 GMT", "Mon Nov  7 08:49:00 1994", "Thu, 01 Dec 1994 00:00:00 GMT",
	"Sat, 01 Jan 2000 00:00:01 GMT", "Saturday, 01-Jan-00 00:00:01 GMT", "Sat Jan  1 00:00:01 2000",
	"Thu, 01 Jan 1970 00:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37",
	"Sun, 06 Nov 1994 08:49:37 UTC", "2024-01-01T00:00:00Z", "Sun, 06 Nov 1994 08:49", "Sun, 06 Nov 1994",
	"Sun,", "Sunday, 06-Nov-94", "Sun Nov  6 08:49:37", "Sun Nov  6 08:49:37 1994 GMT",
	"Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT",
	"Sun, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "Wed, 31 Nov 1994 08:49:37 GMT",
	"Sunday, 06-Nov-94 08:49:37 PST", "Sun, 06 Nov 1994 08:49:37.5 GMT", "SUN, 06 NOV 1994 08:49:37 GMT",
	"Saturday, 01-Jan-55 00:00:00 GMT", "Sat, 31 Dec 2016 23:59:60 GMT", "Mon, 29 Feb 2100 00:00:00 GMT",
	"Wed, 30 Feb 2000 00:00:00 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:60:37 GMT",
	"Sun, 06 Nov 1994 08:49:61 GMT", "Sun Nov 6 08:49:37 1994", "Sun Nov 6  08:49:37 1994",
	"Sun,  06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37",
	"Sun, +6 Nov 1994 08:49:37 GMT", "Sux, 06 Nov 1994 08:49:37 GMT", "Sundae, 06-Nov-94 08:49:37 GMT",
	"Thu, 29 Feb 1996 00:00:00 GMT", "Tue, 29 Feb 2000 00:00:00 GMT", "Mon, 01 Mar 2100 00:00:00 GMT",
	"Saturday, 01-Jan-50 00:00:00 GMT", "Friday, 01-Dec-50 00:00:00 GMT", "Tuesday, 29-Feb-00 00:00:00 GMT",
	"Fri, 01 Jan 2100 00:00:00 GMT, 1",
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range ptRetryAfterSeeds {
		f.Add(s, ptNow.Unix())
	}
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(-1<<63))
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(1<<63-1))
	f.Add("1", int64(0))
	maxSecs := big.NewInt(ptMaxWholeSeconds)
	f.Fuzz(func(t *testing.T, value string, nowUnix int64) {
		d, ok := ParseRetryAfter(value, time.Unix(nowUnix, 0))
		if ok && d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = (%v, true): negative", value, d)
		}
		trimmed := strings.Trim(value, " \t")
		if trimmed == "" {
			if ok {
				t.Fatalf("ParseRetryAfter(%q) = (%v, true) for a blank value", value, d)
			}
			return
		}
		if !ptAllDigits(trimmed) {
			if ok && '0' <= trimmed[0] && trimmed[0] <= '9' {
				t.Fatalf("ParseRetryAfter(%q) = (%v, true): starts with a digit but is not 1*DIGIT", value, d)
			}
			return
		}
		// delay-seconds: always valid; exact when the number fits, else
		// saturated to the longest Duration, so that it exceeds any cap.
		if !ok {
			t.Fatalf("ParseRetryAfter(%q) = (_, false) for delay-seconds", value)
		}
		n, _ := new(big.Int).SetString(trimmed, 10)
		if n.Cmp(maxSecs) <= 0 {
			if d%time.Second != 0 || int64(d/time.Second) != n.Int64() {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v seconds", value, d, n)
			}
		} else if d != ptMaxDuration {
			t.Fatalf("ParseRetryAfter(%q) = %v, want the longest Duration for %v seconds", value, d, n)
		}
		// Monotonic: ten times the seconds, plus one, is never a shorter wait.
		if longer, ok := ParseRetryAfter(trimmed+"1", time.Unix(nowUnix, 0)); !ok || longer <= d && d != ptMaxDuration {
			t.Fatalf("ParseRetryAfter(%q1) = (%v, %v), not longer than %v", trimmed, longer, ok, d)
		}
	})
}

func ptAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
