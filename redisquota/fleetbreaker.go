package redisquota

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/sharedcircuit"
)

// A FleetBreaker is a circuit breaker whose circuits are shared by every
// process that uses the same name on the same Redis: the counted attempts
// of the whole fleet open and close one circuit per scope, and while it is
// open, Probes attempts pass per spell in the whole fleet, not in each
// process. Its Breaker is a *retry.Breaker like any other, taken unchanged
// by retry.WithBreaker and every integration's Breaker option; its rules
// (what counts, MinAttempts, FailureRate's test, the spells) are
// retry.Breaker's, applied to the fleet's counts.
//
// The request path answers from the process's own copy of each circuit and
// does not wait on Redis, but for one case: when an open spell has ended,
// the attempt that finds it so asks Redis for a probe's place, for at most
// the Timeout (100 ms), and the process asks again no sooner than Redis's
// answer says a place may be free. A background goroutine sends, every
// FlushInterval (100 ms), each scope's counts and probe verdicts in
// one script call, and takes in the circuits' states; when the fleet's
// window meets the rule it asks Redis to open the circuit at once, so that
// every process sees it open within two FlushIntervals of the failures
// that tripped it being counted.
//
// Redis unreachable, slow or paused: no call waits on it for longer than
// Timeout; the process logs one Warn record and its breaker carries on
// with its own circuits, from the state they were in, as an unbound
// retry.Breaker does (it counts on its own, opens on its own and probes on
// its own). It tries Redis again with the quota's jittered backoff, and on
// the first answer rejoins the fleet's circuits and logs one Info record;
// what it counted meanwhile is not sent. A probe's place held by a process
// that died (or never reports) is free again after the spell and a grace of
// FlushInterval plus Timeout.
type FleetBreaker struct {
	b  *retry.Breaker
	h  sharedcircuit.Breaker
	fs fleetSync

	mu     sync.Mutex // guards what follows
	scopes map[string]*fleetScope
	gen    uint64 // counts syncs: scopes not seen in the last are dropped
}

// fleetScope is what a process has sent of one scope's circuit, and what
// it has to send.
type fleetScope struct {
	attempts, successes uint64 // the circuit's counts when last sent
	open                time.Duration
	openEpoch           uint64
	probes              sharedcircuit.Tally // the verdicts to send
	spell               time.Duration       // the fleet's spell, as last seen
	gen                 uint64              // the last sync that saw the scope
}

var _ sharedcircuit.Store = (*FleetBreaker)(nil)

// NewFleetBreaker returns a FleetBreaker with opts, whose circuits are
// shared by every process that calls it with the same name on the same
// Redis, and starts its background goroutine; call Close when done.
// Processes sharing a name should use the same options. The client may be
// a standalone, Sentinel or Cluster client: the circuits' keys share the
// hash tag {name} (see CircuitKey). NewFleetBreaker does not contact
// Redis; it fails only for a nil client or an empty name.
func NewFleetBreaker(rdb redis.UniversalClient, name string, opts retry.BreakerOptions) (*FleetBreaker, error) {
	return newFleetBreaker(rdb, name, opts, Options{})
}

func newFleetBreaker(rdb redis.UniversalClient, name string, opts retry.BreakerOptions, o Options) (*FleetBreaker, error) {
	if isNil(rdb) {
		return nil, errors.New("redisquota: NewFleetBreaker: nil Redis client")
	}
	if name == "" {
		return nil, errors.New("redisquota: NewFleetBreaker: empty name")
	}
	o = o.withDefaults()
	f := &FleetBreaker{
		b:      retry.NewBreaker(opts),
		scopes: map[string]*fleetScope{},
	}
	f.fs = fleetSync{
		run: bounded(rdb, o.Timeout), name: name, opts: o, logger: o.Logger, sync: f.sync,
		down: "the breaker's circuits go on on their own", up: "rejoined the fleet's circuits", of: "circuits of",
	}
	f.h = sharedcircuit.Bind(f.b, f)
	f.fs.start()
	return f, nil
}

// Breaker returns the breaker whose circuits the fleet shares. After Close
// it goes on as a breaker of the process's own.
func (f *FleetBreaker) Breaker() *retry.Breaker { return f.b }

// Shared reports whether the breaker is using the fleet's circuits in
// Redis, as opposed to its own while Redis cannot be reached.
func (f *FleetBreaker) Shared() bool { return f.fs.shared.Load() }

// Close stops the background goroutine and waits for the calls to Redis
// under way, which a *redis.Client ends within Timeout (see New). The
// breaker then goes on with its own circuits. Close returns nil; it may be
// called more than once.
func (f *FleetBreaker) Close() error {
	f.fs.close()
	return nil
}

// Claim asks Redis for a probe's place in scope; see sharedcircuit.Store.
func (f *FleetBreaker) Claim(scope string) (sharedcircuit.Claim, bool) {
	if !f.fs.shared.Load() {
		return sharedcircuit.Claim{}, false
	}
	grace := f.fs.opts.FlushInterval + f.fs.opts.Timeout
	v, err, ok := f.fs.call(circuitClaimScript, []string{CircuitKey(f.fs.name, scope)},
		[]any{f.h.Probes(), grace.Milliseconds(), f.fs.opts.KeyTTL.Milliseconds()}, nil)
	if !ok {
		return sharedcircuit.Claim{}, false
	}
	if err == nil && len(v) != 7 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		f.fs.fail(err)
		return sharedcircuit.Claim{}, false
	}
	return sharedcircuit.Claim{
		Granted: v[0] == 1,
		Round:   uint64(v[5]),
		RetryIn: max(ms(v[6]), f.fs.opts.FlushInterval),
		State:   sharedcircuit.State{Epoch: uint64(v[1]), Open: v[2] == 1, Left: ms(v[3]), Spell: ms(v[4])},
	}, true
}

// Verdict records a probe's verdict, sent in the background at once.
func (f *FleetBreaker) Verdict(scope string, round uint64, v sharedcircuit.Verdict) {
	f.mu.Lock()
	s := f.scope(scope)
	s.probes.Add(round, v)
	f.mu.Unlock()
	f.fs.nudge()
}

func (f *FleetBreaker) scope(name string) *fleetScope {
	s := f.scopes[name]
	if s == nil {
		s = &fleetScope{}
		f.scopes[name] = s
	}
	return s
}

// entry is one scope of a sync call.
type entry struct {
	c sharedcircuit.Circuit
	s *fleetScope
}

// sync makes one call for every active scope, and reports whether another
// is wanted at once (a circuit to open).
func (f *FleetBreaker) sync(now time.Time) (again bool) {
	window := f.h.Window()
	sharing := f.fs.shared.Load()
	var (
		keys    []string
		entries []entry
		args    = []any{max(window/10, time.Millisecond).Milliseconds(), f.h.Probes(), f.fs.opts.KeyTTL.Milliseconds()}
	)
	f.mu.Lock()
	f.gen++
	f.h.Circuits(func(name string, c sharedcircuit.Circuit) bool {
		epoch, attempts, successes := c.Counts()
		s := f.scope(name)
		s.gen = f.gen
		da, ds := attempts-s.attempts, successes-s.successes
		if attempts < s.attempts || successes < s.successes {
			da, ds = attempts, successes // a scope dropped and made again: its counts start over
		}
		s.attempts, s.successes = attempts, successes
		if !sharing {
			da, ds = 0, 0 // counted on its own while Redis was away: not the fleet's
		}
		var open time.Duration
		if s.open > 0 && s.openEpoch == epoch {
			open = s.open
		}
		next := f.h.NextSpell(s.spell)
		args = append(args, epoch, da, ds, open.Milliseconds(), s.probes.Round, s.probes.Pass, s.probes.Fail, s.probes.Free, next.Milliseconds())
		s.open = 0
		s.probes.Sent()
		keys = append(keys, CircuitKey(f.fs.name, name))
		entries = append(entries, entry{c, s})
		return true
	})
	for name, s := range f.scopes {
		if s.gen != f.gen {
			delete(f.scopes, name) // the breaker dropped the scope
		}
	}
	f.mu.Unlock()
	if len(keys) == 0 {
		if !sharing {
			keys = []string{CircuitKey(f.fs.name, "")} // ask about the unscoped circuit: is Redis back?
			args = append(args, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		} else {
			return false
		}
	}
	v, err, ok := f.fs.syncCall(circuitSyncScript, keys, args)
	if !ok {
		return false
	}
	if err == nil && len(v) != 7*len(keys) {
		err = fmt.Errorf("unexpected reply of %d values for %d scopes", len(v), len(keys))
	}
	if err != nil {
		f.fs.fail(err)
		return false
	}
	f.fs.rejoin()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range entries {
		r := v[7*i : 7*i+7]
		st := sharedcircuit.State{Epoch: uint64(r[0]), Open: r[1] == 1, Left: ms(r[2]), Spell: ms(r[3])}
		e.c.Apply(st)
		e.s.spell = st.Spell
		if !st.Open && f.h.Trips(float64(r[5]), float64(r[6])) {
			e.s.open, e.s.openEpoch = f.h.FirstSpell(float64(r[5])), st.Epoch
			again = true
		}
	}
	return again
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
