package retry

import "time"

// classified is an error with a classification attached by one of the helpers
// (WithInfo, Permanent, Transient, Throttled, RetryAfter).
type classified struct {
	err  error
	info Info
}

func (m *classified) Error() string   { return m.err.Error() }
func (m *classified) Unwrap() error   { return m.err }
func (m *classified) RetryInfo() Info { return m.info }

// WithInfo returns an error that wraps err and classifies as info, whatever
// err itself says. It returns nil if err is nil.
func WithInfo(err error, info Info) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, info: info}
}

// Permanent marks err as never to be retried (Unsafe). The rest of err's
// classification is kept. It returns nil if err is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	info := Classify(err)
	info.Safety = Unsafe
	return &classified{err: err, info: info}
}

// Transient marks err as safe to retry: the failure is expected to pass and
// repeating the request is harmless. The rest of err's classification is kept.
// It returns nil if err is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	info := Classify(err)
	info.Safety = Safe
	return &classified{err: err, info: info}
}

// Throttled marks err as a throttling error that is safe to retry: the service
// asked the client to slow down. Strategies use their throttling backoff for
// it. It returns nil if err is nil.
func Throttled(err error) error {
	if err == nil {
		return nil
	}
	info := Classify(err)
	info.Safety = Safe
	info.Throttle = true
	return &classified{err: err, info: info}
}

// RetryAfter marks err as safe to retry no sooner than d from now, as a
// service's Retry-After hint says. A strategy waits at least d, or refuses the
// retry if d is beyond its own limit. A d of zero or less means no hint. It
// returns nil if err is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	info := Classify(err)
	info.Safety = Safe
	info.RetryAfter = max(d, 0)
	return &classified{err: err, info: info}
}
