package httpretry

import (
	"net/http"
	"strings"
	"time"
)

// responseWait reads the wait a failed response asks for, and whether it asks
// for one at all. Hints are monotonic: a longer hint never yields a sooner
// retry. So every Retry-After field line counts and the longest governs (RFC
// 9110 makes Retry-After a single value, but a server or proxy may send it
// twice), a wait too long to represent saturates rather than being dropped
// as invalid (ParseRetryAfter), and the rate-limit fields' reset, a wait
// only when no quota is left (rateLimitWait), lengthens a shorter
// Retry-After: the longer of the two governs.
func responseWait(h http.Header, now time.Time) (time.Duration, bool) {
	wait, found := retryAfterWait(h, now)
	if d, ok := rateLimitWait(h); ok {
		wait, found = max(wait, d), true
	}
	return wait, found
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
// an intermediary joined with commas. Only delay-seconds can be told apart
// that way (an HTTP-date holds a comma of its own); the longest valid one
// governs.
func retryAfterLine(v string, now time.Time) (time.Duration, bool) {
	if d, ok := ParseRetryAfter(v, now); ok || strings.IndexByte(v, ',') < 0 {
		return d, ok
	}
	wait, found := time.Duration(0), false
	for part := range strings.SplitSeq(v, ",") {
		if d, ok := parseDelaySeconds(strings.Trim(part, " \t")); ok {
			wait, found = max(wait, d), true
		}
	}
	return wait, found
}
