package httpretry

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxDelaySeconds is the largest delay-seconds value that fits in a
// time.Duration.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// maxDuration is the longest time.Duration. A server's wait too long to
// represent saturates to it rather than being dropped as invalid, so that it
// counts as longer than any cap: a longer hint never yields a sooner retry.
const maxDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter reads a Retry-After value (delay-seconds or any RFC 9110 HTTP-date form)
// relative to now. ok is false for anything invalid.
//
// delay-seconds is one or more ASCII digits and nothing else: "-1", "+1",
// "1.0", "1x" and non-ASCII digits are invalid. RFC 9110 sets no upper bound
// on it: a number of seconds too large for a time.Duration (9223372037 and
// beyond, about 292 years) is valid and saturates to the longest Duration
// (math.MaxInt64 nanoseconds), longer than any cap a client sets. An
// HTTP-date may be an IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT"), the obsolete RFC 850 form ("Sunday,
// 06-Nov-94 08:49:37 GMT") or asctime ("Sun Nov  6 08:49:37 1994"); a date
// in the past means no wait (0, true), and one too far ahead saturates as
// delay-seconds do. Spaces and tabs around the value are ignored, as RFC
// 9110 says of field values.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.Trim(value, " \t")
	if value == "" {
		return 0, false
	}
	if isDigit(value[0]) {
		return parseDelaySeconds(value)
	}
	t, ok := parseHTTPDate(value, now)
	if !ok {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// parseHTTPDate parses an HTTP-date (RFC 9110 section 5.6.7) strictly:
// names are case-sensitive, every field has its exact width, and the zone is
// GMT. (http.ParseTime accepts other zones, fractional seconds and any case.)
// The day name is not checked against the date, as the RFC does not ask
// recipients to. A two-digit RFC 850 year more than 50 years ahead of now is
// taken as the most recent past year with those digits.
func parseHTTPDate(s string, now time.Time) (time.Time, bool) {
	var (
		day, month, year int
		clock            string
		twoDigit         bool // an RFC 850 year, in now's century for a start
	)
	switch comma := strings.IndexByte(s, ','); {
	case comma == 3 && len(s) == len("Sun, 06 Nov 1994 08:49:37 GMT"):
		// IMF-fixdate: day-name "," SP 2DIGIT SP month SP 4DIGIT SP time-of-day SP "GMT"
		if dayIndex(s[:3], shortDays) < 0 || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s[25:] != " GMT" {
			return time.Time{}, false
		}
		day, month, year, clock = digits(s[5:7]), monthIndex(s[8:11]), digits(s[12:16]), s[17:25]
	case comma > 3:
		// rfc850-date: day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time-of-day SP "GMT"
		rest := s[comma+1:]
		if dayIndex(s[:comma], longDays) < 0 || len(rest) != len(" 06-Nov-94 08:49:37 GMT") ||
			rest[0] != ' ' || rest[3] != '-' || rest[7] != '-' || rest[10] != ' ' || rest[19:] != " GMT" {
			return time.Time{}, false
		}
		day, month, clock = digits(rest[1:3]), monthIndex(rest[4:7]), rest[11:19]
		if year = digits(rest[8:10]); year >= 0 {
			year += now.Year() - now.Year()%100
			twoDigit = true
		}
	case comma < 0 && len(s) == len("Sun Nov  6 08:49:37 1994"):
		// asctime-date: day-name SP month SP ( 2DIGIT / ( SP 1DIGIT )) SP time-of-day SP 4DIGIT
		if dayIndex(s[:3], shortDays) < 0 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ' {
			return time.Time{}, false
		}
		month, clock, year = monthIndex(s[4:7]), s[11:19], digits(s[20:24])
		if s[8] == ' ' {
			day = digits(s[9:10])
		} else {
			day = digits(s[8:10])
		}
	default:
		return time.Time{}, false
	}
	if len(clock) != 8 || clock[2] != ':' || clock[5] != ':' {
		return time.Time{}, false
	}
	hour, minute, sec := digits(clock[0:2]), digits(clock[3:5]), digits(clock[6:8])
	if day < 1 || month < 1 || year < 0 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 60 {
		return time.Time{}, false
	}
	// time.Date normalises out-of-range values; a date that does not survive
	// the round trip (31 Nov) is invalid. A leap second, 60, is the next
	// minute's first second.
	date := func(year int) (time.Time, bool) {
		t := time.Date(year, time.Month(month), day, hour, minute, 0, 0, time.UTC)
		return t.Add(time.Duration(sec) * time.Second), t.Day() == day && int(t.Month()) == month
	}
	if !twoDigit {
		return date(year)
	}
	// RFC 9110: a two-digit year that puts the date more than 50 years
	// ahead means the most recent past year with those digits. Of the
	// readings in the centuries around now, take the latest real date that
	// is not more than 50 years ahead (29 Feb is real in some centuries only).
	limit := now.AddDate(50, 0, 0)
	for _, y := range []int{year + 100, year, year - 100} {
		if t, ok := date(y); ok && !t.After(limit) {
			return t, true
		}
	}
	return time.Time{}, false
}

var (
	shortDays = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	longDays  = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	months    = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

func dayIndex(s string, names []string) int { return slices.Index(names, s) }

// monthIndex returns 1 for "Jan" and so on, or -1.
func monthIndex(s string) int {
	if i := slices.Index(months, s); i >= 0 {
		return i + 1
	}
	return -1
}

// digits parses a fixed-width run of ASCII digits, or returns -1.
func digits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// parseDelaySeconds parses delay-seconds (1*DIGIT) as a Duration,
// saturating at maxDuration for a number of seconds too large to represent.
func parseDelaySeconds(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) { // strconv would accept a sign
			return 0, false
		}
	}
	// Only leading zeros can make a long value small; dropping them spares
	// strconv a copy of a huge string.
	if s = strings.TrimLeft(s, "0"); s == "" {
		return 0, true
	}
	if len(s) > 19 {
		return maxDuration, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // 19 digits beyond int64
		return maxDuration, true
	}
	return secondsToDuration(n), true
}

// secondsToDuration converts n >= 0 seconds, saturating at maxDuration: a
// server's wait is never shortened by overflow.
func secondsToDuration(n int64) time.Duration {
	if n > maxDelaySeconds {
		return maxDuration
	}
	return time.Duration(n) * time.Second
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
