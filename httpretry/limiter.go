package httpretry

import (
	"net/http"
	"slices"
)

// Failure is one failed attempt, as a Limiter sees it.
type Failure struct {
	Attempt  int            // 1 for the first attempt
	Kind     Kind           // how it failed
	Response *http.Response // the response, for KindStatus; do not read its body
	Err      error          // the transport error, for KindConnect and KindRead
}

// StatusCode returns the response's status, or 0 for a transport error.
func (f Failure) StatusCode() int {
	if f.Response == nil {
		return 0
	}
	return f.Response.StatusCode
}

// A Limiter decides, after a failure that may be retried, whether the
// request is tried again, and may change the next attempt's request. It is
// the HXEP-0001 RetryLimiter: it answers "whether" with HTTP knowledge (the
// kinds of failures, their statuses, the request), where the Strategy answers
// with attempts and a quota. Both must agree for a retry to happen.
//
// Allow receives every failure of the request so far, the latest last, and
// the request for the next attempt, a fresh clone whose headers it may set.
// It must not keep either after it returns. A Limiter is shared by every
// request of a Transport, so it must be safe for concurrent use; the history
// it needs travels in failures.
type Limiter interface {
	Allow(failures []Failure, next *http.Request) bool
}

// LimiterFunc adapts a function to Limiter.
type LimiterFunc func(failures []Failure, next *http.Request) bool

// Allow calls f.
func (f LimiterFunc) Allow(failures []Failure, next *http.Request) bool { return f(failures, next) }

// MaxErrors allows at most n retries, whatever the failures (urllib3's
// total). MaxErrors(0) never retries.
func MaxErrors(n int) Limiter {
	return LimiterFunc(func(failures []Failure, _ *http.Request) bool { return len(failures) <= n })
}

// MaxConnectErrors allows at most n retries after connection failures
// (urllib3's connect); it does not limit other failures.
func MaxConnectErrors(n int) Limiter { return maxKind(KindConnect, n) }

// MaxReadErrors allows at most n retries after failures to read a response
// (urllib3's read); it does not limit other failures.
func MaxReadErrors(n int) Limiter { return maxKind(KindRead, n) }

func maxKind(k Kind, n int) Limiter {
	return LimiterFunc(func(failures []Failure, _ *http.Request) bool {
		if failures[len(failures)-1].Kind != k {
			return true
		}
		return count(failures, func(f Failure) bool { return f.Kind == k }) <= n
	})
}

// MaxErrorResponses allows at most n retries after failed responses
// (urllib3's status). Given status codes, it retries only responses with one
// of those codes, as HXEP-0001's MaxErrorResponses(5, {502, 503}) does; the
// codes must also be failures the Transport retries (see Transport.Statuses).
// It does not limit transport errors.
func MaxErrorResponses(n int, statuses ...int) Limiter {
	statuses = slices.Clone(statuses)
	match := func(f Failure) bool {
		return f.Kind == KindStatus && (len(statuses) == 0 || slices.Contains(statuses, f.StatusCode()))
	}
	return LimiterFunc(func(failures []Failure, _ *http.Request) bool {
		last := failures[len(failures)-1]
		if last.Kind != KindStatus {
			return true
		}
		return match(last) && count(failures, match) <= n
	})
}

// All allows a retry only when every one of limiters does: limits combine,
// and the strictest wins. It is how HXEP-0001 composes limiters
// (MaxErrors(3) | MaxErrorResponses(5, {502, 503}) there):
//
//	httpretry.All(httpretry.MaxErrors(3), httpretry.MaxErrorResponses(5, 502, 503))
//
// Each limiter sees the request after the ones before it changed it. All()
// allows every retry.
func All(limiters ...Limiter) Limiter {
	limiters = slices.Clone(limiters)
	return LimiterFunc(func(failures []Failure, next *http.Request) bool {
		for _, l := range limiters {
			if !l.Allow(failures, next) {
				return false
			}
		}
		return true
	})
}

func count(failures []Failure, match func(Failure) bool) int {
	n := 0
	for _, f := range failures {
		if match(f) {
			n++
		}
	}
	return n
}
