package retry

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Backoff computes the wait before a retry.
type Backoff interface {
	// Delay before retry number n (n = 1 for the first retry); prev is the delay used before
	// the previous retry (0 before the first). Pure: safe for concurrent use.
	Delay(n int, prev time.Duration) time.Duration
}

// Jitter is the random spread applied to a backoff delay. Without it, clients
// that failed together retry together, and the load arrives in spikes.
type Jitter uint8

const (
	// NoJitter waits exactly the computed delay d. Use it only where a single
	// client retries; a fleet without jitter retries in lockstep.
	NoJitter Jitter = iota
	// FullJitter waits a uniformly random time in [0, d).
	FullJitter
	// EqualJitter waits d/2 plus a uniformly random time in [0, d/2).
	EqualJitter
	// DecorrelatedJitter waits min(Max, Base + r*3*prev), where prev is the
	// previous delay (Base before the first retry) and r is uniform in [0, 1).
	// It ignores the retry number: each delay grows from the last one.
	DecorrelatedJitter
)

// String returns "none", "full", "equal" or "decorrelated".
func (j Jitter) String() string {
	switch j {
	case NoJitter:
		return "none"
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case DecorrelatedJitter:
		return "decorrelated"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(math.MaxInt64)

// Exponential is exponential backoff: retry n waits d = min(Max, Base * 2^(n-1)),
// spread by Jitter. The arithmetic saturates instead of overflowing, so every
// retry number, including a millionth retry, gets a delay in [0, Max]; zero or
// negative fields mean no delay (Base), no cap (Max).
type Exponential struct {
	Base, Max time.Duration // Max 0 = no cap; never overflows, never negative
	Jitter    Jitter
	Rand      func() float64 // nil = math/rand/v2; tests pin it
}

// Delay returns the wait before retry n. Retry numbers below 1 count as 1.
func (e Exponential) Delay(n int, prev time.Duration) time.Duration {
	limit := limitOf(e.Max)
	d := time.Duration(0)
	if e.Base > 0 {
		shift := max(n, 1) - 1
		if shift >= 63 || e.Base > limit>>shift {
			d = limit
		} else {
			d = e.Base << shift
		}
	}
	return e.Jitter.apply(d, e.Base, limit, prev, e.Rand)
}

// Linear is linear backoff: retry n waits d = min(Max, Base * n), spread by
// Jitter. Like Exponential it saturates instead of overflowing.
type Linear struct {
	Base, Max time.Duration // Max 0 = no cap
	Jitter    Jitter
	Rand      func() float64 // nil = math/rand/v2
}

// Delay returns the wait before retry n. Retry numbers below 1 count as 1.
func (l Linear) Delay(n int, prev time.Duration) time.Duration {
	limit := limitOf(l.Max)
	d := time.Duration(0)
	if l.Base > 0 {
		n = max(n, 1)
		if time.Duration(n) > limit/l.Base {
			d = limit
		} else {
			d = l.Base * time.Duration(n)
		}
	}
	return l.Jitter.apply(d, l.Base, limit, prev, l.Rand)
}

// Constant waits the same time before every retry; zero or negative means no
// wait. A fleet of clients with a constant delay retries in waves: prefer
// Exponential with jitter wherever more than one client calls a service.
type Constant time.Duration

// Delay returns c, or 0 if c is negative.
func (c Constant) Delay(int, time.Duration) time.Duration { return max(time.Duration(c), 0) }

// limitOf turns a Max field into the cap on delays.
func limitOf(m time.Duration) time.Duration {
	if m <= 0 {
		return maxDuration
	}
	return m
}

// apply spreads the delay d. base, limit and prev serve decorrelated jitter.
func (j Jitter) apply(d, base, limit, prev time.Duration, rnd func() float64) time.Duration {
	switch j {
	case FullJitter:
		return scale(d, random(rnd))
	case EqualJitter:
		half := d / 2
		return d - half + scale(half, random(rnd))
	case DecorrelatedJitter:
		base = max(base, 0)
		if prev <= 0 {
			prev = base
		}
		// base + r*3*prev, in floating point so that 3*prev cannot overflow.
		x := float64(base) + random(rnd)*3*float64(prev)
		if x >= float64(limit) {
			return limit
		}
		return time.Duration(x)
	}
	return d
}

// random draws r in [0, 1) from rnd, or from math/rand/v2 when rnd is nil.
// Values a caller's function returns outside [0, 1), NaN included, are
// clamped so that they cannot produce a negative or overlong delay.
func random(rnd func() float64) float64 {
	if rnd == nil {
		return rand.Float64()
	}
	r := rnd()
	if !(r > 0) { // also catches NaN
		return 0
	}
	if r >= 1 {
		return math.Nextafter(1, 0)
	}
	return r
}

// scale returns d*r for r in [0, 1) without overflow.
func scale(d time.Duration, r float64) time.Duration {
	x := float64(d) * r
	if x >= float64(d) {
		return d // float64(d) rounded up; never exceed d
	}
	return time.Duration(x)
}
