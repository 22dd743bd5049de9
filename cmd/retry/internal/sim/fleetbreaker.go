package sim

import (
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/sharedcircuit"
)

// The rows "Adaptive + fleet breaker" give each client (a process of a
// fleet) a retry.Breaker bound, through the real sharedcircuit binding, to
// one store that every client shares: redisquota's FleetBreaker, with the
// store, its Lua scripts (circuitSyncScript, circuitClaimScript) and each
// process's background loop written out in memory on the run's clock, and
// nothing else changed. As with Redis, a client's counts reach the store,
// and the store's state reaches the client, only at the client's syncs,
// every sync interval (FleetBreaker's FlushInterval) and at once after a
// probe's verdict; the store keeps the fleet's window, the client judges
// its sums by the breaker's rule and asks the store to open, and a probe's
// place is claimed from the store when a client's open spell ends. A call
// to the store takes no virtual time (a Redis round trip is well below
// the model's resolution), and the store never fails: the fallback to a
// process's own circuit is redisquota's to test, against real Redis.

// FleetBreaker names the rows of the default strategy with a circuit
// breaker shared by the fleet through a store (redisquota.FleetBreaker).
const FleetBreaker = "Adaptive + fleet breaker"

// fleetBreaker returns the breakers of a fleet breaker's row: each
// client's is made on its first request and synced with one store for
// the run every sync interval.
func fleetBreaker(sync time.Duration) func(env Env) func(int) *retry.Breaker {
	return func(env Env) func(int) *retry.Breaker {
		if env.After == nil {
			panic("sim: a fleet breaker's row needs a run with timers (Env.After)")
		}
		store := &circuitStore{circuits: map[string]*storeCircuit{}}
		byClient := map[int]*retry.Breaker{}
		return func(c int) *retry.Breaker {
			b, ok := byClient[c]
			if !ok {
				b = retry.NewBreaker(retry.BreakerOptions{Now: env.Now})
				p := &storeProcess{store: store, env: env, flush: sync, scopes: map[string]*processScope{}}
				p.h = sharedcircuit.Bind(b, p)
				p.schedule(sync) // as NewFleetBreaker starts its loop
				byClient[c] = b
			}
			return b
		}
	}
}

// storeTimeout is redisquota's Timeout: a probe's place held by a process
// that never reports is free again a sync interval and this after its spell.
const storeTimeout = 100 * time.Millisecond

// circuitStore is the shared store: a circuit per scope, as Redis keeps
// them (redisquota.CircuitKey's hashes).
type circuitStore struct {
	circuits map[string]*storeCircuit
}

func (s *circuitStore) circuit(scope string) *storeCircuit {
	k := s.circuits[scope]
	if k == nil {
		k = &storeCircuit{}
		s.circuits[scope] = k
	}
	return k
}

// storeSlots is how many tenths of the window the store keeps: the
// window and up to a tenth more, as circuitSyncScript's eleven slots.
const storeSlots = 11

// storeCircuit is one scope's circuit in the store: the hash of
// circuitscript.go, its times on the run's clock.
type storeCircuit struct {
	epoch  uint64                // e: counts every transition
	open   bool                  // st: open, or half-open once until has passed
	until  time.Duration         // u: when the open spell ends
	spell  time.Duration         // sp: the open spell's length
	round  uint64                // r: the round of probes
	out    int                   // o: the round's places out
	passed int                   // p: its probes that succeeded
	grant  time.Duration         // g: when its last place was granted
	slots  [storeSlots]storeSlot // the window while closed
}

// storeSlot is a tenth of the window as the store counts it.
type storeSlot struct {
	tenth               int64 // the tenth counted: the time over the slot's width
	attempts, successes uint64
}

// openFor opens (or reopens) the circuit at now for spell: the script's
// open.
func (k *storeCircuit) openFor(now, spell time.Duration) {
	k.epoch, k.open, k.round = k.epoch+1, true, k.round+1
	k.until, k.spell, k.out, k.passed, k.grant = now+spell, spell, 0, 0, 0
	k.slots = [storeSlots]storeSlot{}
}

// processSync is one scope's part of a process's sync call.
type processSync struct {
	seen                uint64        // the epoch the counts were made in
	attempts, successes uint64        // counted since the last sync
	open                time.Duration // a spell to open the circuit with, if closed in seen; 0 = none
	round               uint64        // the round of the verdicts
	pass, fail, free    int           // probes of round that succeeded, failed, freed their places
	next                time.Duration // the spell to reopen with after a failure
}

// sync is circuitSyncScript for one scope at now: it counts a process's
// attempts in the window of the epoch they were made in, opens the
// circuit if asked, applies the verdicts of the current round's probes,
// and answers the circuit's state and, closed, the window's sums.
func (k *storeCircuit) sync(now, width time.Duration, probes int, a processSync) (st sharedcircuit.State, attempts, successes uint64) {
	cur := int64(now / width)
	if !k.open && k.epoch == a.seen {
		if a.attempts > 0 {
			s := &k.slots[cur%storeSlots]
			if s.tenth != cur {
				s.attempts, s.successes = 0, 0
			}
			s.tenth, s.attempts, s.successes = cur, s.attempts+a.attempts, s.successes+a.successes
		}
		if a.open > 0 {
			k.openFor(now, a.open)
		}
	}
	if k.open && a.round == k.round && a.pass+a.fail+a.free > 0 {
		k.out = max(k.out-a.pass-a.fail-a.free, 0)
		if a.fail > 0 {
			k.openFor(now, a.next)
		} else if k.passed += a.pass; k.passed >= probes {
			k.epoch, k.open, k.round, k.out, k.passed = k.epoch+1, false, k.round+1, 0, 0
			k.slots = [storeSlots]storeSlot{}
		}
	}
	if !k.open {
		for t := max(cur-storeSlots+1, 0); t <= cur; t++ {
			if s := k.slots[t%storeSlots]; s.tenth == t {
				attempts, successes = attempts+s.attempts, successes+s.successes
			}
		}
	}
	st = sharedcircuit.State{Epoch: k.epoch, Open: k.open, Spell: k.spell}
	if k.open {
		st.Left = max(k.until-now, 0)
	}
	return st, attempts, successes
}

// claim is circuitClaimScript at now: a probe's place in an open circuit
// whose spell has ended, if its round has one free; a round whose places
// have all been out for longer than its spell and grace starts afresh.
func (k *storeCircuit) claim(now time.Duration, probes int, grace time.Duration) (c sharedcircuit.Claim) {
	c.State = sharedcircuit.State{Epoch: k.epoch, Open: k.open}
	c.Round = k.round
	switch {
	case !k.open:
		return c
	case now < k.until:
		c.State.Left, c.State.Spell, c.RetryIn = k.until-now, k.spell, k.until-now
		return c
	}
	c.State.Spell = k.spell
	if k.out+k.passed >= probes {
		if free := k.grant + k.spell + grace; now < free {
			c.RetryIn = free - now
			return c
		}
		k.round, k.out, k.passed = k.round+1, 0, 0
	}
	k.out++
	k.grant = now
	c.Granted, c.Round = true, k.round
	return c
}

// storeProcess is a process's side of the store, as FleetBreaker is: the
// sharedcircuit.Store its breaker is bound to, and its background loop.
type storeProcess struct {
	store  *circuitStore
	env    Env
	flush  time.Duration // the sync interval
	h      sharedcircuit.Breaker
	scopes map[string]*processScope
	due    uint64 // counts schedule calls: a sync scheduled before the last is dropped
}

// processScope is fleetScope: what a process has sent of one scope's
// circuit, and what it has to send.
type processScope struct {
	attempts, successes uint64 // the circuit's counts when last sent
	open                time.Duration
	openEpoch           uint64
	probes              sharedcircuit.Tally // the verdicts to send
	spell               time.Duration       // the fleet's spell, as last seen
}

var _ sharedcircuit.Store = (*storeProcess)(nil)

func (p *storeProcess) now() time.Duration { return p.env.Now().Sub(Epoch) }

func (p *storeProcess) scope(name string) *processScope {
	s := p.scopes[name]
	if s == nil {
		s = &processScope{}
		p.scopes[name] = s
	}
	return s
}

// Shared: the store is always there.
func (p *storeProcess) Shared() bool { return true }

// Claim asks the store for a probe's place, as FleetBreaker.Claim does.
func (p *storeProcess) Claim(scope string) (sharedcircuit.Claim, bool) {
	c := p.store.circuit(scope).claim(p.now(), p.h.Probes(), p.flush+storeTimeout)
	c.RetryIn = max(c.RetryIn, p.flush)
	return c, true
}

// Verdict records a probe's verdict and syncs at once, as
// FleetBreaker.Verdict nudges its loop.
func (p *storeProcess) Verdict(scope string, round uint64, v sharedcircuit.Verdict) {
	s := p.scope(scope)
	s.probes.Add(round, v)
	p.schedule(0)
}

// schedule sets the process's next sync d from now, in place of the one
// set before: FleetBreaker's loop resets its timer after each sync.
func (p *storeProcess) schedule(d time.Duration) {
	p.due++
	due := p.due
	p.env.After(d, func() {
		if p.due == due {
			p.sync()
		}
	})
}

// syncing is a scope of a sync under way.
type syncing struct {
	name string
	c    sharedcircuit.Circuit
	s    *processScope
	a    processSync
}

// sync is FleetBreaker.sync against the store, on the run's clock: it
// sends each scope's counts and verdicts, applies the states that come
// back, asks at once for a circuit to open where the fleet's window meets
// the rule, and sets the next sync.
func (p *storeProcess) sync() {
	now := p.now()
	var scopes []syncing
	p.h.Circuits(func(name string, c sharedcircuit.Circuit) bool {
		epoch, attempts, successes := c.Counts()
		s := p.scope(name)
		da, ds := attempts-s.attempts, successes-s.successes
		if attempts < s.attempts || successes < s.successes {
			da, ds = attempts, successes // a scope dropped and made again: its counts start over
		}
		s.attempts, s.successes = attempts, successes
		var open time.Duration
		if s.open > 0 && s.openEpoch == epoch {
			open = s.open
		}
		scopes = append(scopes, syncing{name, c, s, processSync{
			seen: epoch, attempts: da, successes: ds, open: open,
			round: s.probes.Round, pass: s.probes.Pass, fail: s.probes.Fail, free: s.probes.Free, next: p.h.NextSpell(s.spell),
		}})
		s.open = 0
		s.probes.Sent()
		return true
	})
	width := max(p.h.Window()/10, time.Millisecond)
	again := false
	for i := range scopes {
		e := &scopes[i]
		st, attempts, successes := p.store.circuit(e.name).sync(now, width, p.h.Probes(), e.a)
		e.c.Apply(st)
		e.s.spell = st.Spell
		if !st.Open && p.h.Trips(float64(attempts), float64(successes)) {
			e.s.open, e.s.openEpoch = p.h.FirstSpell(float64(attempts)), st.Epoch
			again = true
		}
	}
	if again {
		p.schedule(0)
		return
	}
	p.schedule(p.flush)
}
