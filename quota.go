package retry

// Quota is what a strategy takes retry tokens from: a retry quota in the
// sense of the Smithy retry guide. A retry must take its cost from the quota
// before it is made; a success puts tokens back. *TokenBucket is the
// in-process Quota; other implementations share one quota between processes
// (see the module github.com/retrykit/retry/redisquota).
//
// Implementations must be safe for concurrent use, and must not block: a
// Quota is consulted on the request path, so one backed by a remote store
// answers from local state and synchronises in the background.
type Quota interface {
	// Take removes n tokens if the quota holds at least n and reports
	// whether it did. When it reports false nothing was taken. Taking zero
	// or fewer tokens always succeeds.
	Take(n int) bool
	// Refund puts n tokens back, never beyond the quota's capacity.
	// Refunding zero or fewer changes nothing.
	Refund(n int)
	// Available returns the tokens the quota holds now, as far as the
	// caller can know (a shared quota may report a recent local view).
	Available() int
}

var _ Quota = (*TokenBucket)(nil)

// refund puts n tokens back into q. The built-in bucket is called directly:
// the success path refunds on every request, and a call through the
// interface there costs more than the refund of a full bucket itself.
func refund(q Quota, n int) {
	if b, ok := q.(*TokenBucket); ok {
		b.Refund(n)
		return
	}
	q.Refund(n)
}
