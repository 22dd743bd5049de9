package retry

import "time"

// tell updates sc's limiter with an answer at now, a throttle or not,
// starts it limiting on a throttle, and stops it once the throttling has
// been over for a while.
func (a *Adaptive) tell(sc *adaptiveScope, now int64, throttled bool) {
	t := seconds(now)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	a.startLimiter(sc, t)
	if throttled && !sc.limiter.enabled {
		// The limiter did not hear the successes while it was off: take
		// what the client sent since the latency probes before last, a
		// tenth of a second or two. The window's counts over the whole
		// window would measure a client younger than the window, or one
		// that just ramped up, at a fraction of its rate, and the cut
		// would take it to a fraction of that. Without a probe yet, the
		// window's attempts over the window.
		rate, ok := sc.latency.sendRate(now, uint32(sc.outcomes.total.Load()>>32))
		if !ok {
			attempts, _ := sc.outcomes.count(now, a.window())
			rate = attempts / a.window().Seconds()
		}
		sc.limiter.measured = rate
	}
	sc.limiter.update(t, throttled)
	switch {
	case sc.limiter.enabled && !sc.limiting.Load():
		sc.limiting.Store(true)
	case !throttled:
		settle(sc, t)
	}
}

// settle stops sc's limiter at t, a reading in seconds, if the throttling
// has been over long enough, and reports whether it is off. Callers hold
// sc.mu.
func settle(sc *adaptiveScope, t float64) bool {
	if sc.limiter.settled(t, quietSeconds) {
		sc.limiter.enabled = false
		sc.limiting.Store(false)
	}
	return !sc.limiter.enabled
}

// quietSeconds is the least time without a throttle after which the
// limiter stops limiting.
const quietSeconds = 2

// reserve takes a limiter token for an attempt now and returns its wait,
// and false if the limiter has stopped limiting instead: the throttling
// has been over long enough, and no answer since has said so (a client
// quiet since it was throttled would otherwise find it still limiting,
// and its next burst would wait).
func (a *Adaptive) reserve(sc *adaptiveScope) (time.Duration, bool) {
	t := seconds(a.now())
	limit := orDuration(a.opts.MaxWait, DefaultAdaptiveMaxWait)
	sc.mu.Lock()
	a.startLimiter(sc, t)
	if settle(sc, t) {
		sc.mu.Unlock()
		return 0, false
	}
	wait := sc.limiter.reserve(t, limit.Seconds()) * float64(time.Second)
	sc.mu.Unlock()
	if wait >= float64(limit) {
		// float64(limit) may round up past the largest Duration, and a
		// conversion that overflows gives a negative one.
		return limit, true
	}
	return time.Duration(wait), true
}

func (a *Adaptive) startLimiter(sc *adaptiveScope, t float64) {
	if !sc.started {
		sc.limiter.start(t, a.opts.MinRate, a.opts.Beta, a.opts.Scale)
		sc.started = true
	}
}

// seconds is a reading of the strategy's clock in seconds, the limiter's
// unit.
func seconds(t int64) float64 { return float64(t) / 1e9 }
