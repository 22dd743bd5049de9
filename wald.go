package retry

import "math"

// trips reports whether a closed window's counts open the circuit: at
// least MinAttempts, every one failed (an outage) or the failed share at
// least FailureRate and the evidence of a sequential test (see trusted).
func (b *Breaker) trips(attempts, successes float64) bool {
	rate := b.opts.FailureRate
	if rate <= 0 || math.IsNaN(rate) {
		rate = DefaultBreakerFailureRate
	}
	if attempts < float64(orDefault(b.opts.MinAttempts, DefaultBreakerMinAttempts)) {
		return false
	}
	// A hair of tolerance: successes are placed in fractions of slots.
	failures := attempts - successes
	if failures < rate*attempts-1e-6 {
		return false // above 1, never
	}
	return successes < 1e-6 || rate < 1 && trusted(failures, successes, rate)
}

// trusted reports whether failures and successes say, by Wald's
// sequential probability ratio test, that the service fails at rate+d
// rather than rate-d (d = breakerBand, or less near 0 and 1), with error
// rates of breakerRisk either way. A window is judged again at every
// failure, and one that only just reaches rate is as often chance: a
// client that calls once a second reaches MinAttempts only with the
// retries of its failures, and would open on a service failing 30 % of
// attempts. At 0.5 the test asks for six failures more than successes
// whatever the window's size, where a confidence bound on the share
// (Wilson's) asks for more the busier the window: an outage opens a busy
// circuit about as soon as the share alone did (in retry sim, a client
// calling ten times a second half a second later; with Wilson's bound at
// 95 %, a second, which its open spells then carry past the outage's
// end). A risk of 5 % would ask for eight.
func trusted(failures, successes, rate float64) bool {
	d := min(breakerBand, rate/2, (1-rate)/2)
	llr := failures*math.Log((rate+d)/(rate-d)) - successes*math.Log((1-rate+d)/(1-rate-d))
	return llr >= math.Log((1-breakerRisk)/breakerRisk)-1e-9
}

// The sequential test's half band of failure rates around FailureRate, and
// its error rate either way.
const (
	breakerBand = 0.1
	breakerRisk = 0.1
)
