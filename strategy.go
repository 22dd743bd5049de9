package retry

import "time"

// Strategy decides whether a failed request is retried and how long to wait
// first. It keeps each request's state in the tokens it hands out, as the
// retry strategies of the Smithy retry guide do: the loop asks for a token
// before the first attempt, trades it for a new one after each failure, and
// gives it back after a success.
//
// Implementations must be safe for concurrent use, must reject a token that
// was already refreshed or recorded, or that another strategy issued, with an
// error wrapping ErrInvalidToken, and must explain every refusal with an error
// wrapping ErrMaxAttempts, ErrQuotaExhausted, ErrNotRetryable or another
// documented reason.
type Strategy interface {
	// AcquireInitialToken returns the token for a request's first attempt.
	// Scopes separate quotas: a storm in one scope does not starve another.
	// If it fails, the request is still attempted once, without retries.
	AcquireInitialToken(scope string) (Token, error)
	// RefreshToken spends the token of a failed attempt and returns the
	// token for the next one, or an error saying why there is none.
	RefreshToken(t Token, err error) (Token, error)
	// RecordSuccess spends the token of a successful attempt.
	RecordSuccess(t Token) error
}

// A Releaser is a Strategy that can take back a token its loop will not use:
// the retry it granted will not be made, because its wait would end past the
// deadline or the caller gave up during it, so what the retry cost returns to
// the quota. Do calls ReleaseToken when the strategy has it; so should other
// loops. Without it, a retry that never happened still drains the quota, and
// a burst of requests with short deadlines could empty it without a single
// retry reaching the service. ReleaseToken spends the token like the other
// methods.
type Releaser interface {
	ReleaseToken(t Token) error
}

// Defaults shared by the strategies of this package.
const (
	defaultMaxAttempts   = 3
	defaultMaxRetryAfter = 5 * time.Minute
)

// defaultBackoff is the backoff of AWS retry behavior 2.1: 50 ms base (1 s for
// throttling errors), 20 s cap, full jitter.
func defaultBackoff(throttle bool) Exponential {
	if throttle {
		return Exponential{Base: time.Second, Max: 20 * time.Second, Jitter: FullJitter}
	}
	return Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: FullJitter}
}

// policy is the part of a decision that every strategy of this package shares:
// is the error retryable, is an attempt left, how long to wait.
type policy struct {
	maxAttempts     int
	backoff         Backoff // nil = defaultBackoff(false)
	throttleBackoff Backoff // nil = defaultBackoff(true)
	maxRetryAfter   time.Duration
}

func newPolicy(maxAttempts int, backoff, throttle Backoff, maxRetryAfter time.Duration) policy {
	switch {
	case maxAttempts == 0:
		maxAttempts = defaultMaxAttempts
	case maxAttempts < 0:
		maxAttempts = 1
	}
	if maxRetryAfter <= 0 {
		maxRetryAfter = defaultMaxRetryAfter
	}
	return policy{maxAttempts, backoff, throttle, maxRetryAfter}
}

// decide checks, in order, that err may be retried, that an attempt is left
// and that the wait is within the strategy's limits, and returns err's
// classification and the wait before the next attempt of st.
func (p *policy) decide(st *state, err error) (Info, time.Duration, error) {
	if err == nil {
		return Info{}, 0, errNilError
	}
	info := Classify(err)
	switch {
	case info.Safety == Unsafe:
		return info, 0, errUnsafe
	case info.Safety == MaybeSafe && info.Fault == FaultClient:
		return info, 0, errClientFault
	case info.Safety == MaybeSafe && info.Fault != FaultServer:
		return info, 0, errMaybeSafe
	case st.retries+1 >= p.maxAttempts:
		return info, 0, errNoMoreTries
	case info.RetryAfter > p.maxRetryAfter:
		return info, 0, &RetryAfterError{RetryAfter: info.RetryAfter, Max: p.maxRetryAfter}
	}
	d := p.delay(info.Throttle, st.retries+1, st.delay)
	if info.Exact {
		return info, max(info.RetryAfter, 0), nil
	}
	// Never sooner than the service asked, never negative.
	return info, max(d, info.RetryAfter, 0), nil
}

// delay is the backoff before retry n, prev being the wait before the last one.
func (p *policy) delay(throttle bool, n int, prev time.Duration) time.Duration {
	b := p.backoff
	if throttle {
		b = p.throttleBackoff
	}
	if b == nil {
		return defaultBackoff(throttle).Delay(n, prev)
	}
	return b.Delay(n, prev)
}
