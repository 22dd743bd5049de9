package retry

import (
	"slices"
	"time"

	"github.com/retrykit/retry/internal/sharedcircuit"
)

// A Breaker bound to a shared circuit (redisquota's FleetBreaker binds
// one, through internal/sharedcircuit, so that the binding adds nothing to
// this package's API) keeps its circuits as an unbound one does, with
// three differences while its store can be reached: its own counts never
// open a circuit, the shared counts do, which the store applies (see
// sharedcircuit.Circuit.Apply); an open spell's end is followed by a
// probe only where the store grants the place, so that Probes attempts
// pass per spell in the whole fleet; and a probe's verdict goes to the
// store, which closes or reopens the shared circuit. When the store
// cannot be reached, each circuit goes on from where it stands on its own.

func init() {
	sharedcircuit.Bind = func(b any, s sharedcircuit.Store) sharedcircuit.Breaker {
		br := b.(*Breaker)
		br.shared = s
		return sharedBreaker{br}
	}
}

// fleetCircuit is a scope's part of a shared circuit, under its mu.
type fleetCircuit struct {
	epoch      uint64 // the shared circuit's epoch last applied
	claiming   bool   // a claim of a probe's place is under way
	claimAfter int64  // no claim before this reading of the clock: the store said the places were taken
}

// sharedProbe marks the pass of a probe whose place the store granted: its
// round in bits 20 to 61, a number of the scope's own in the low 20, so
// that two probes of one round in a process are told apart.
const sharedProbe = pass(1) << 62

func (p pass) shared() bool { return p.probe() && p&sharedProbe != 0 }

// sharing reports whether b is bound to a store that can be reached.
func (b *Breaker) sharing() bool { return b.shared != nil && b.shared.Shared() }

// consultShared is consult for a bound breaker, and ok is false when the
// store cannot be reached: the circuit then decides on its own. An open
// circuit whose spell has ended asks the store for a probe's place, one
// attempt at a time, and none while the store's last answer says the
// places are taken.
func (a breakerAt) consultShared(now int64) (p pass, ok bool) {
	s := a.b.shared
	if s == nil || !s.Shared() {
		return 0, false
	}
	sc := a.sc
	sc.mu.Lock()
	switch st := BreakerState(sc.state.Load()); {
	case st == BreakerClosed:
		p = closedPass | pass(sc.closings.Load())
	case st == BreakerOpen && now < sc.until.Load(), sc.fleet.claiming, now < sc.fleet.claimAfter:
		p = refused
	}
	if p != 0 {
		sc.mu.Unlock()
		return p, true
	}
	sc.fleet.claiming = true
	sc.mu.Unlock()
	c, ok := s.Claim(sc.name)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.fleet.claiming = false
	if !ok {
		return 0, false
	}
	a.applyShared(c.State)
	now = a.b.now()
	switch {
	case c.Granted:
		sc.state.Store(uint32(BreakerHalfOpen))
		sc.grants++
		p = sharedProbe | pass(c.Round)<<20 | pass(sc.grants)&(1<<20-1)
		sc.out = append(sc.out, p)
		sc.granted = now
		return p, true
	case !c.State.Open:
		return closedPass | pass(sc.closings.Load()), true
	}
	sc.fleet.claimAfter = later(now, c.RetryIn)
	return refused, true
}

// reportShared sends the verdict v of a probe whose place the store
// granted, once.
func (a breakerAt) reportShared(p pass, v verdict) {
	sc := a.sc
	sc.mu.Lock()
	i := slices.Index(sc.out, p)
	if i >= 0 {
		sc.out = slices.Delete(sc.out, i, i+1)
	}
	sc.mu.Unlock()
	if i >= 0 && a.b.shared != nil {
		a.b.shared.Verdict(sc.name, uint64(p&^sharedProbe)>>20, sharedcircuit.Verdict(v))
	}
}

// applyShared sets the circuit to the shared state st, unless it is in it
// (an open circuit keeps its own spell's end and probes). Callers hold mu.
func (a breakerAt) applyShared(st sharedcircuit.State) {
	sc := a.sc
	closed := BreakerState(sc.state.Load()) == BreakerClosed
	if st.Epoch == sc.fleet.epoch && closed != st.Open {
		return
	}
	sc.fleet.epoch = st.Epoch
	sc.fleet.claimAfter = 0
	if !st.Open {
		if !closed {
			a.close()
		}
		return
	}
	sc.openFor = st.Spell
	sc.until.Store(later(a.b.now(), max(st.Left, 0)))
	sc.state.Store(uint32(BreakerOpen))
	sc.newRound()
}

// sharedBreaker is a bound breaker as its store sees it.
type sharedBreaker struct{ b *Breaker }

func (s sharedBreaker) Circuits(yield func(string, sharedcircuit.Circuit) bool) {
	s.b.scopes.each(func(name string, sc *breakerScope) bool {
		return yield(name, sharedScope{breakerAt{s.b, sc}})
	})
}

func (s sharedBreaker) Trips(attempts, successes float64) bool {
	return s.b.trips(attempts, successes)
}

func (s sharedBreaker) FirstSpell(attempts float64) time.Duration { return s.b.firstSpell(attempts) }
func (s sharedBreaker) NextSpell(d time.Duration) time.Duration   { return s.b.nextSpell(d) }
func (s sharedBreaker) Probes() int                               { return s.b.probes() }
func (s sharedBreaker) Window() time.Duration                     { return s.b.window() }

// sharedScope is a scope's circuit as the store sees it.
type sharedScope struct{ a breakerAt }

func (s sharedScope) Counts() (epoch, attempts, successes uint64) {
	sc := s.a.sc
	sc.mu.Lock()
	epoch = sc.fleet.epoch
	sc.mu.Unlock()
	successes = sc.successes.Load()
	return epoch, sc.failures.Load() + successes, successes
}

func (s sharedScope) Closed() bool {
	return BreakerState(s.a.sc.state.Load()) == BreakerClosed
}

func (s sharedScope) Apply(st sharedcircuit.State) {
	s.a.sc.mu.Lock()
	defer s.a.sc.mu.Unlock()
	s.a.applyShared(st)
}
