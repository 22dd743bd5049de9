package retry

import "math"

// Numbers of AWS's adaptive retry mode, from the AWS SDKs' shared design,
// which takes its rate-control curve from TCP CUBIC (RFC 9438).
const (
	cubicBeta        = 0.7 // the rate is multiplied by this on a throttle
	cubicScale       = 0.4 // how fast the rate grows back
	cubicSmooth      = 0.8 // weight of the newest measurement of the send rate
	cubicBucket      = 0.5 // seconds per measurement of the send rate
	cubicMinRate     = 0.5 // attempts per second, however hard the throttling
	cubicMinCapacity = 1.0 // tokens the limiter holds at least
)

// cubic is a client-side send-rate limiter: a token bucket whose fill rate
// follows the CUBIC curve. A throttle cuts the rate to beta times the rate
// sent at the time; successes grow it back, slowly near that rate and then
// faster, to probe for more capacity. The rate is never more than twice the
// measured send rate, so an idle client cannot bank a burst. Times are in
// seconds. The zero value, after start, is a limiter that has not yet been
// throttled and limits nothing. It is not safe for concurrent use.
type cubic struct {
	minRate, beta, scale float64

	enabled  bool    // throttled at least once: the bucket limits sends
	fillRate float64 // tokens per second
	maxCap   float64 // tokens held at most
	tokens   float64 // tokens now; negative when attempts are reserved ahead
	refilled float64 // when tokens were last refilled; 0 = never

	measured   float64 // smoothed send rate, attempts per second
	lastBucket float64 // start of the current measurement bucket
	count      float64 // responses in the current bucket

	lastMaxRate  float64 // the rate when last throttled
	lastThrottle float64 // when last throttled
	k            float64 // seconds from a throttle until the rate is back to lastMaxRate
}

// start sets the limiter's clock and dials; zero dials take AWS's numbers.
func (c *cubic) start(now, minRate, beta, scale float64) {
	c.minRate = positiveOr(minRate, cubicMinRate)
	c.beta = positiveOr(beta, cubicBeta)
	if c.beta >= 1 {
		c.beta = cubicBeta // a cut must cut
	}
	c.scale = positiveOr(scale, cubicScale)
	// The first measurement bucket starts now, not at the last boundary:
	// a limiter started mid-bucket (at a client's first throttle) would
	// otherwise spread that bucket's few answers over the whole of it, and
	// its first measurement would halve the rate it had just been given.
	c.lastBucket = now
	c.lastThrottle = now
}

// positiveOr returns v if it is a positive finite number, else def.
func positiveOr(v, def float64) float64 {
	if v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return def
}

// update records the answer to an attempt at time now: a throttle, or any
// other answer. It returns the new rate the curve asked for, before the
// minimum rate is applied.
func (c *cubic) update(now float64, throttled bool) float64 {
	c.measure(now)
	var rate float64
	if throttled {
		base := c.measured
		if c.enabled {
			base = min(base, c.fillRate)
		}
		c.lastMaxRate = base
		c.window()
		c.lastThrottle = now
		rate = base * c.beta
		c.enabled = true
	} else {
		c.window()
		rate = c.curve(now)
	}
	rate = min(rate, 2*c.measured)
	c.refill(now)
	c.fillRate = max(rate, c.minRate)
	c.maxCap = max(rate, cubicMinCapacity)
	c.tokens = min(c.tokens, c.maxCap)
	return rate
}

// curve is the CUBIC rate at time now, after the last throttle.
func (c *cubic) curve(now float64) float64 {
	d := now - c.lastThrottle - c.k
	return c.scale*d*d*d + c.lastMaxRate
}

// window sets k, the time the curve takes to climb back to lastMaxRate.
func (c *cubic) window() {
	c.k = math.Cbrt(c.lastMaxRate * (1 - c.beta) / c.scale)
}

// measure counts an answer and, at the end of each measurement bucket,
// folds the bucket's rate into the smoothed send rate.
func (c *cubic) measure(now float64) {
	c.count++
	bucket := math.Floor(now/cubicBucket) * cubicBucket
	if bucket > c.lastBucket {
		current := c.count / (bucket - c.lastBucket)
		c.measured = current*cubicSmooth + c.measured*(1-cubicSmooth)
		c.count = 0
		c.lastBucket = bucket
	}
}

// refill adds the tokens earned since the last refill.
func (c *cubic) refill(now float64) {
	if c.refilled == 0 || now < c.refilled {
		c.refilled = now // first use, or a clock that went back
		return
	}
	c.tokens = min(c.maxCap, c.tokens+(now-c.refilled)*c.fillRate)
	c.refilled = now
}

// reserve takes a token for an attempt at time now and returns how long the
// attempt must wait for it: 0 while the limiter has never been throttled or
// holds a token. A token not yet earned is reserved (the bucket goes below
// zero) rather than waited for, so that no caller waits while holding the
// lock that guards the limiter.
//
// A wait is fixed when it is handed out, at the rate of that moment, so a
// long one would keep the pace of the worst moment of a throttling episode
// long after it ended, and a queue of them would go out in a burst. So no
// wait exceeds maxWait seconds, and the bucket owes at most maxWait seconds
// of tokens: beyond that the limiter only spaces attempts, and the
// caller's deadline, and the retry rules, do the rest.
func (c *cubic) reserve(now, maxWait float64) float64 {
	if !c.enabled {
		return 0
	}
	c.refill(now)
	c.tokens--
	if c.tokens >= 0 {
		return 0
	}
	if wait := -c.tokens / c.fillRate; wait <= maxWait {
		return wait
	}
	c.tokens = -maxWait * c.fillRate
	return maxWait
}

// cancel gives back a token reserved for an attempt that will not be made.
func (c *cubic) cancel() {
	if c.enabled {
		c.tokens = min(c.tokens+1, c.maxCap)
	}
}

// settled reports whether a limiter that was throttled has heard no
// throttle for long enough that the service has recovered: twice the time
// the curve takes to climb back to the rate of the last throttle, and at
// least quiet seconds. It then stops limiting until the next throttle (the
// AWS SDKs' limiter, once throttled, limits for the life of the client).
func (c *cubic) settled(now, quiet float64) bool {
	return c.enabled && now-c.lastThrottle > max(2*c.k, quiet)
}
