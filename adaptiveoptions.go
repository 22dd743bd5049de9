package retry

import "time"

// Defaults of AdaptiveOptions.
const (
	DefaultAdaptiveStreak     = 3
	DefaultAdaptiveMultiplier = 2.0
	DefaultAdaptiveWindow     = 10 * time.Second
	DefaultAdaptiveMaxWait    = time.Second
)

// AdaptiveOptions configure an Adaptive strategy. The zero value is the
// recommended configuration; each zero field takes its default.
type AdaptiveOptions struct {
	// StandardOptions are the attempts, backoffs, the cap on a service's
	// Retry-After, the retry quota and an optional Budget, as for Standard.
	// Unlike Standard, Adaptive takes retry tokens from a quota only if one
	// is given (Bucket) or sized (Capacity): its failure streaks do the
	// quota's work, and unlike a quota that costs 14 tokens a retry they
	// keep retrying through a brownout that fails 30 % of attempts.
	StandardOptions

	// Streak is how many attempts in a row may fail in a scope before its
	// retries stop, until an attempt in it succeeds. While retries in the
	// scope are working (one succeeded within Window) it is 2·Streak+2,
	// except after throttling errors. 0 = 3; negative = no limit.
	Streak int
	// Multiplier is K in the client-side throttling of the Google SRE
	// book: when a scope's attempts over Window exceed K times those the
	// service accepted, a retry is refused with probability
	// (attempts − K·accepts) / (attempts + 1). 0 = 2; negative = off.
	Multiplier float64
	// Window is how long attempts and accepts count, and how recent a
	// successful retry must be to relax the streak. 0 = 10 s.
	Window time.Duration
	// RetryTimeouts retries attempts that timed out whatever the evidence.
	// By default a timeout is refused when the scope's evidence says the
	// service is overloaded: see Adaptive.
	RetryTimeouts bool

	// MaxWait is the longest wait the send-rate limiter imposes on an
	// attempt. 0 = 1 s.
	MaxWait time.Duration
	// MinRate is the send rate, in attempts per second per scope, that the
	// limiter never goes below. 0 = 0.5, AWS's number.
	MinRate float64
	// Beta is what a throttle multiplies the send rate by; 0 = 0.7.
	Beta float64
	// Scale is how fast the send rate grows back after a throttle (the
	// CUBIC curve's C); 0 = 0.4.
	Scale float64

	// Rand draws the probability of refusing a retry; nil = math/rand/v2.
	Rand func() float64
	// Now is the clock of the limiter and the windows; nil = time.Now.
	// Simulations and tests set it.
	Now func() time.Time
}
