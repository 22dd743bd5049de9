package httpretry

import (
	"net/http"
	"strings"
	"time"
)

// responseWait reads the wait a failed response asks for, whether it asks
// for one at all (found), and whether a valid Retry-After is among what asks
// (retryAfter). Hints are monotonic: a longer hint never yields a sooner
// retry. So every Retry-After field line counts and the longest governs (RFC
// 9110 makes Retry-After a single value, but a server or proxy may send it
// twice), a wait too long to represent saturates rather than being dropped
// as invalid (ParseRetryAfter), and the rate-limit fields' reset, a wait
// only when no quota is left (rateLimitWait), lengthens a shorter
// Retry-After: the longer of the two governs.
//
// retryAfter is told apart because only a Retry-After is the server saying
// when to send the request again (RFC 9110, section 10.2.3), which makes
// the failure retry.Info.Allowed; the rate-limit fields say when the
// client's quota comes back, which is a wait, not an invitation.
func responseWait(h http.Header, now time.Time) (wait time.Duration, found, retryAfter bool) {
	wait, retryAfter = retryAfterWait(h, now)
	found = retryAfter
	if d, ok := rateLimitWait(h); ok {
		wait, found = max(wait, d), true
	}
	return wait, found, retryAfter
}

// retryAfterWait is the longest valid wait of all the Retry-After lines.
func retryAfterWait(h http.Header, now time.Time) (time.Duration, bool) {
	wait, found := time.Duration(0), false
	for _, v := range h.Values("Retry-After") {
		if d, ok := retryAfterLine(v, now); ok {
			wait, found = max(wait, d), true
		}
	}
	return wait, found
}

// retryAfterLine reads one Retry-After field line: a single value, or values
// an intermediary joined with commas (RFC 9110, section 5.3), of which the
// longest valid one governs, as of separate lines. An HTTP-date holds a
// comma of its own, after its day name: a piece that is no value alone is
// read with the next as one, so that a date joined with other values is
// never dropped for a shorter one beside it.
func retryAfterLine(v string, now time.Time) (time.Duration, bool) {
	if d, ok := ParseRetryAfter(v, now); ok || strings.IndexByte(v, ',') < 0 {
		return d, ok
	}
	wait, found := time.Duration(0), false
	for v != "" {
		end := valueEnd(v, 0)
		d, ok := ParseRetryAfter(v[:end], now)
		if !ok && end < len(v) {
			// Maybe a date's own comma: the date runs to the next one. A
			// piece that is a value alone is never half of a date.
			next := valueEnd(v, end+1)
			if dd, isDate := ParseRetryAfter(v[:next], now); isDate {
				d, ok, end = dd, true, next
			}
		}
		if ok {
			wait, found = max(wait, d), true
		}
		v = v[min(end+1, len(v)):]
	}
	return wait, found
}

// valueEnd is the index of the first comma in v at or after from, or len(v).
func valueEnd(v string, from int) int {
	if i := strings.IndexByte(v[from:], ','); i >= 0 {
		return from + i
	}
	return len(v)
}
