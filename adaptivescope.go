package retry

import (
	"math"
	"sync"
	"sync/atomic"
)

// adaptiveScope is what an Adaptive keeps per scope. It is the Quota the
// scope's tokens carry (its methods reach the scope's quota, if any), so
// that a token leads back to its scope.
type adaptiveScope struct {
	bucket   TokenBucket // the scope's own quota, when it has one
	quota    Quota       // the quota retries pay: &bucket, a shared one, or nil
	outcomes outcomes
	limiting atomic.Bool // the limiter is enabled: consult it on every attempt
	mu       sync.Mutex  // guards limiter; never held while waiting
	limiter  cubic
	started  bool         // limiter has its clock
	streak   atomic.Int64 // failed attempts since the last success
	// alone: the scope's own window showed it healthy when last read (see
	// healthy), so that it is judged by that alone and its attempts stay
	// out of the strategy's counts of every scope, where a healthy
	// service's successes would vouch for a failing one reached under
	// other names.
	alone    atomic.Bool
	worked   atomic.Int64 // when a retry last succeeded, a reading of the strategy's clock
	timeouts rolling      // attempts that timed out, over the window
	latency  latency      // of successful attempts, probed
	fleet    *fleetScope  // a bound strategy's: see sharedadaptive.go
}

func (sc *adaptiveScope) init(cfg scopeConfig) {
	// A scope's first attempt is timed: the baseline its timeouts are
	// judged by starts with its first success, not its second, which a
	// process that sends seldom makes a window later (and a fleet of such
	// processes would have no baseline before an incident).
	sc.latency.due.Store(true)
	if cfg.clock != nil {
		sc.outcomes.placed.begin(cfg.clock.read(cfg.now))
	}
	if cfg.fleet {
		sc.fleet = new(fleetScope)
	}
	switch {
	case cfg.shared != nil:
		sc.quota = cfg.shared
	case cfg.capacity > 0:
		sc.bucket.fill(cfg.capacity)
		sc.quota = &sc.bucket
	}
}

func (sc *adaptiveScope) idle() bool {
	return !sc.limiting.Load() && sc.streak.Load() == 0 && (sc.quota != &sc.bucket || sc.bucket.idle())
}

func (sc *adaptiveScope) inherit(old any) {
	o, ok := old.(*adaptiveScope)
	if !ok {
		return
	}
	sc.bucket.inherit(&o.bucket)
	// The window's counts and the limiter go with the name's replacement:
	// a drained, throttled scope dropped for room comes back no better.
	o.mu.Lock()
	sc.limiter, sc.started = o.limiter, o.started
	o.mu.Unlock()
	sc.limiting.Store(o.limiting.Load())
	sc.streak.Store(o.streak.Load())
	sc.alone.Store(o.alone.Load())
	sc.worked.Store(o.worked.Load())
	for i := range sc.timeouts.slots {
		sc.timeouts.slots[i].Store(o.timeouts.slots[i].Load())
	}
	sc.outcomes.total.Store(o.outcomes.total.Load())
	sc.outcomes.taken.Store(o.outcomes.taken.Load())
	sc.outcomes.placed.at.Store(o.outcomes.placed.at.Load())
	for i := range sc.outcomes.attempts.slots {
		sc.outcomes.attempts.slots[i].Store(o.outcomes.attempts.slots[i].Load())
		sc.outcomes.accepts.slots[i].Store(o.outcomes.accepts.slots[i].Load())
	}
	if sc.fleet != nil {
		sc.fleet.inherit(sc)
	}
}

// Take, Refund and Available reach the scope's quota; a scope without one
// takes anything.
func (sc *adaptiveScope) Take(n int) bool {
	if sc.quota == nil {
		return true
	}
	return sc.quota.Take(n)
}

func (sc *adaptiveScope) Refund(n int) {
	if sc.quota != nil {
		refund(sc.quota, n)
	}
}

func (sc *adaptiveScope) Available() int {
	if sc.quota == nil {
		return math.MaxInt
	}
	return sc.quota.Available()
}
