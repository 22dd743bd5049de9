package retry

import (
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/sharedevidence"
)

// An Adaptive bound to a fleet's evidence (redisquota's FleetAdaptive binds
// one, through internal/sharedevidence, so that the binding adds nothing to
// this package's API) keeps its signals as an unbound one does, and while
// a scope's fleet view is fresh its failures read the fleet's: the
// window's attempts, accepts and timeouts that client-side throttling and
// the timeout rule read are the fleet's plus what the process counted
// since its last report; its failures in a row are the fleet's, unless the
// process saw an attempt accepted since; a retry that worked anywhere in
// the fleet marks a brownout; and the latency of the fleet's successes
// judges a timeout. The request path never calls the store, and the
// success path is unchanged. The send-rate limiter stays the process's
// own: it paces what the process sends.

func init() {
	sharedevidence.Bind = func(a any) sharedevidence.Strategy {
		ad := a.(*Adaptive)
		ad.bound.Store(true)
		return sharedAdaptive{ad}
	}
}

// fleetScope is a bound strategy's scope's part in the fleet: what the
// reports need beyond the scope's own counts, and the fleet's latest view.
// It is kept apart, behind one pointer, so that an unbound scope is no
// larger.
type fleetScope struct {
	timedOut      atomic.Uint64 // attempts that timed out
	probes, nanos atomic.Uint64 // successes timed, and their latencies' sum
	view          atomic.Pointer[fleetView]
	// base is what the scope took over from the scope it replaced, a
	// scope of another name dropped for room (see scopes.create): its
	// counts go on locally, so that the name does not come back better,
	// but they are not this name's evidence, and its reports leave them
	// out. Set before the scope is used.
	base sharedevidence.Counts
}

// probed counts a timed success that took ns.
func (f *fleetScope) probed(ns int64) {
	f.probes.Add(1)
	f.nanos.Add(uint64(max(ns, 0)))
}

// inherit notes what sc, this fleetScope's scope, took over from the scope
// it replaced.
func (f *fleetScope) inherit(sc *adaptiveScope) {
	total := sc.outcomes.total.Load()
	f.base = sharedevidence.Counts{Attempts: uint32(total >> 32), Accepts: uint32(total), Streak: sc.streak.Load(), Worked: sc.worked.Load()}
}

// own returns sc's evidence as its reports count it: less what it took
// over from another scope, its streak included until an attempt of its
// own is accepted.
func (f *fleetScope) own(sc *adaptiveScope) sharedevidence.Counts {
	total := sc.outcomes.total.Load()
	c := sharedevidence.Counts{
		Attempts:   uint32(total>>32) - f.base.Attempts,
		Accepts:    uint32(total) - f.base.Accepts,
		Timeouts:   f.timedOut.Load(),
		Streak:     sc.streak.Load(),
		Worked:     sc.worked.Load(),
		Probes:     f.probes.Load(),
		ProbeNanos: f.nanos.Load(),
	}
	if c.Accepts == 0 {
		c.Streak = max(c.Streak-f.base.Streak, 0)
	}
	if c.Worked == f.base.Worked {
		c.Worked = 0
	}
	return c
}

// fleetView is a scope's fleet view, as a sync applied it.
type fleetView struct {
	v     sharedevidence.View
	sent  sharedevidence.Counts // what the process had counted when it reported
	at    int64                 // when it was applied, a reading of the strategy's clock
	until int64                 // fresh before this reading
}

// merge makes e, a failed or accepted attempt's local evidence at now,
// the fleet's.
func (f *fleetView) merge(sc *adaptiveScope, fs *fleetScope, e *evidence, now int64, window time.Duration) {
	c := fs.own(sc)
	newAttempts := c.Attempts - f.sent.Attempts
	newAccepts := c.Accepts - f.sent.Accepts
	e.attempts = f.v.Attempts + float64(newAttempts)
	e.accepts = f.v.Accepts + float64(newAccepts)
	if e.answer == answerFailed {
		e.timeouts = f.v.Timeouts + float64(c.Timeouts-f.sent.Timeouts)
		if newAccepts == 0 {
			// No attempt of the process's own was accepted since it
			// reported: its failures since add to the fleet's streak.
			e.streak = f.v.Streak + max(c.Streak-f.sent.Streak, 0)
		}
	}
	if f.v.WorkedAgo >= 0 {
		e.worked = max(e.worked, f.at-int64(f.v.WorkedAgo))
	}
	if f.v.Typical > 0 {
		e.latency = latencyClimbing
		if now-(f.at-int64(f.v.LatestAgo)) <= int64(window) && f.v.Latest <= climbFactor*f.v.Typical {
			e.latency = latencyHealthy
		}
	}
}

// sharedAdaptive is a bound Adaptive as a sync sees it.
type sharedAdaptive struct{ a *Adaptive }

func (s sharedAdaptive) Scopes(yield func(string, sharedevidence.Scope) bool) {
	s.a.scopes.each(func(name string, sc *adaptiveScope) bool {
		return yield(name, sharedAdaptiveScope{s.a, sc})
	})
}

func (s sharedAdaptive) Window() time.Duration { return s.a.window() }
func (s sharedAdaptive) Now() int64            { return s.a.now() }

// sharedAdaptiveScope is a bound Adaptive's scope as a sync sees it.
type sharedAdaptiveScope struct {
	a  *Adaptive
	sc *adaptiveScope
}

func (s sharedAdaptiveScope) Counts() sharedevidence.Counts {
	sc := s.sc
	if f := sc.fleet; f != nil {
		return f.own(sc)
	}
	// Made before the strategy was bound: no counts of its own beyond
	// the window's.
	total := sc.outcomes.total.Load()
	return sharedevidence.Counts{Attempts: uint32(total >> 32), Accepts: uint32(total), Streak: sc.streak.Load(), Worked: sc.worked.Load()}
}

func (s sharedAdaptiveScope) Apply(v sharedevidence.View, sent sharedevidence.Counts, fresh time.Duration) {
	if f := s.sc.fleet; f != nil {
		now := s.a.now()
		f.view.Store(&fleetView{v: v, sent: sent, at: now, until: later(now, fresh)})
	}
}
