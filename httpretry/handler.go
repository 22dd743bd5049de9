package httpretry

import (
	"net/http"
	"strconv"

	"github.com/retrykit/retry"
)

// Handler serves h, and marks the context of a request that says it is a
// retry (a Retry-Attempt of 2 or more, as a Transport sends) with
// retry.WithCallerRetries until h returns: its caller retries, so the calls h
// makes through retrykit (a Transport, a forrst.Client, the gRPC
// interceptors) make one attempt for a failure they would return to h anyway,
// and leave its retries to the caller, instead of multiplying them.
//
// What a caller claims reaches no further than that one request's calls, and
// can only make them retry less, never more: a missing, malformed or
// out-of-range value marks nothing. First attempts carry no header, so the
// calls made for them retry as usual.
func Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Resent(r) {
			h.ServeHTTP(w, r)
			return
		}
		ctx, done := retry.WithCallerRetries(r.Context())
		defer done()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Resent reports whether r says it is a retry: one Retry-Attempt value, a
// whole number of at most ten digits, 2 or more.
func Resent(r *http.Request) bool {
	v := r.Header.Values(RetryAttemptHeader)
	if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > 10 || v[0][0] < '0' || v[0][0] > '9' {
		return false
	}
	n, err := strconv.Atoi(v[0])
	return err == nil && n >= 2
}
