package redisquota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
	b      *retry.Breaker
	h      sharedcircuit.Breaker
	run    redis.Scripter
	name   string
	opts   Options
	logger *slog.Logger

	shared atomic.Bool
	wake   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // the background loop
	calls  sync.WaitGroup // goroutines of calls to Redis
	busy   atomic.Bool    // a sync call given up on is still running

	gate   sync.RWMutex // Close holds it to stop new calls; calls read closed under it
	closed bool

	mu       sync.Mutex // guards what follows
	scopes   map[string]*fleetScope
	failures int       // failed calls in a row
	retryAt  time.Time // while fallen back: when to try Redis again
	gen      uint64    // counts syncs: scopes not seen in the last are dropped
	once     sync.Once
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
	if rdb == nil {
		return nil, errors.New("redisquota: NewFleetBreaker: nil Redis client")
	}
	if name == "" {
		return nil, errors.New("redisquota: NewFleetBreaker: empty name")
	}
	o = o.withDefaults()
	f := &FleetBreaker{
		b:      retry.NewBreaker(opts),
		run:    bounded(rdb, o.Timeout),
		name:   name,
		opts:   o,
		logger: o.Logger,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		scopes: map[string]*fleetScope{},
	}
	f.h = sharedcircuit.Bind(f.b, f)
	f.shared.Store(true)
	f.wg.Add(1)
	go f.loop()
	return f, nil
}

// Breaker returns the breaker whose circuits the fleet shares. After Close
// it goes on as a breaker of the process's own.
func (f *FleetBreaker) Breaker() *retry.Breaker { return f.b }

// Shared reports whether the breaker is using the fleet's circuits in
// Redis, as opposed to its own while Redis cannot be reached.
func (f *FleetBreaker) Shared() bool { return f.shared.Load() }

// Close stops the background goroutine and waits for the calls to Redis
// under way, which a *redis.Client ends within Timeout (see New). The
// breaker then goes on with its own circuits. Close returns nil; it may be
// called more than once.
func (f *FleetBreaker) Close() error {
	f.once.Do(func() {
		f.gate.Lock()
		f.closed = true
		f.shared.Store(false)
		f.gate.Unlock()
		close(f.done)
		f.wg.Wait()
		f.calls.Wait()
	})
	return nil
}

// call runs script on a goroutine of its own and waits for its answer for
// at most Timeout, whatever the client does with deadlines; ok is false
// after Close. after, if not nil, runs when the goroutine is done, answered
// in time or not.
func (f *FleetBreaker) call(script *redis.Script, keys []string, args []any, after func()) (v []int64, err error, ok bool) {
	f.gate.RLock()
	if f.closed {
		f.gate.RUnlock()
		return nil, nil, false
	}
	type answer struct {
		v   []int64
		err error
	}
	c := make(chan answer, 1)
	f.calls.Add(1)
	f.gate.RUnlock()
	start := time.Now()
	go func() {
		defer f.calls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		defer cancel()
		v, err := script.Run(ctx, f.run, keys, args...).Int64Slice()
		if after != nil {
			after()
		}
		c <- answer{v, err}
	}()
	t := time.NewTimer(f.opts.Timeout)
	defer t.Stop()
	select {
	case a := <-c:
		return a.v, a.err, true
	case <-t.C:
		return nil, fmt.Errorf("no answer within %v", time.Since(start).Round(time.Millisecond)), true
	}
}

// Claim asks Redis for a probe's place in scope; see sharedcircuit.Store.
func (f *FleetBreaker) Claim(scope string) (sharedcircuit.Claim, bool) {
	if !f.shared.Load() {
		return sharedcircuit.Claim{}, false
	}
	grace := f.opts.FlushInterval + f.opts.Timeout
	v, err, ok := f.call(circuitClaimScript, []string{CircuitKey(f.name, scope)},
		[]any{f.h.Probes(), grace.Milliseconds(), f.opts.KeyTTL.Milliseconds()}, nil)
	if !ok {
		return sharedcircuit.Claim{}, false
	}
	if err == nil && len(v) != 7 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		f.fail(err)
		return sharedcircuit.Claim{}, false
	}
	return sharedcircuit.Claim{
		Granted: v[0] == 1,
		Round:   uint64(v[5]),
		RetryIn: max(ms(v[6]), f.opts.FlushInterval),
		State:   sharedcircuit.State{Epoch: uint64(v[1]), Open: v[2] == 1, Left: ms(v[3]), Spell: ms(v[4])},
	}, true
}

// Verdict records a probe's verdict, sent in the background at once.
func (f *FleetBreaker) Verdict(scope string, round uint64, v sharedcircuit.Verdict) {
	f.mu.Lock()
	s := f.scope(scope)
	s.probes.Add(round, v)
	f.mu.Unlock()
	f.nudge()
}

func (f *FleetBreaker) scope(name string) *fleetScope {
	s := f.scopes[name]
	if s == nil {
		s = &fleetScope{}
		f.scopes[name] = s
	}
	return s
}

func (f *FleetBreaker) nudge() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// loop syncs in the background until Close.
func (f *FleetBreaker) loop() {
	defer f.wg.Done()
	t := time.NewTimer(f.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-f.wake:
		case <-t.C:
		}
		t.Reset(f.tick(time.Now()))
	}
}

// tick makes the background call if one is due, and returns when to look
// again.
func (f *FleetBreaker) tick(now time.Time) time.Duration {
	f.mu.Lock()
	if !f.shared.Load() && now.Before(f.retryAt) {
		defer f.mu.Unlock()
		return f.retryAt.Sub(now)
	}
	f.mu.Unlock()
	if f.busy.Load() {
		return f.opts.FlushInterval // a call given up on is still running: one at a time
	}
	if again := f.sync(now); again {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.shared.Load() {
		return max(f.retryAt.Sub(time.Now()), 0)
	}
	return f.opts.FlushInterval
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
	sharing := f.shared.Load()
	var (
		keys    []string
		entries []entry
		args    = []any{max(window/10, time.Millisecond).Milliseconds(), f.h.Probes(), f.opts.KeyTTL.Milliseconds()}
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
		keys = append(keys, CircuitKey(f.name, name))
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
			keys = []string{CircuitKey(f.name, "")} // ask about the unscoped circuit: is Redis back?
			args = append(args, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		} else {
			return false
		}
	}
	f.busy.Store(true)
	v, err, ok := f.call(circuitSyncScript, keys, args, func() { f.busy.Store(false) })
	if !ok {
		f.busy.Store(false)
		return false
	}
	if err == nil && len(v) != 7*len(keys) {
		err = fmt.Errorf("unexpected reply of %d values for %d scopes", len(v), len(keys))
	}
	if err != nil {
		f.fail(err)
		return false
	}
	f.rejoin()
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

// fail falls back to the breaker's own circuits after a failed call,
// logging once per outage, and schedules the next try.
func (f *FleetBreaker) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures++
	f.retryAt = time.Now().Add(f.opts.reconnectDelay(f.failures))
	f.gate.RLock()
	closed := f.closed
	f.gate.RUnlock()
	if f.shared.Swap(false) && !closed {
		f.logger.Warn("redisquota: Redis is unavailable; the breaker's circuits go on on their own",
			"name", f.name, "error", fmt.Errorf("redisquota: circuits of %s: %w", f.name, err))
	}
	f.nudge()
}

// rejoin takes the fleet's circuits back after an answer.
func (f *FleetBreaker) rejoin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = 0
	f.gate.RLock()
	defer f.gate.RUnlock()
	if !f.closed && !f.shared.Swap(true) {
		f.logger.Info("redisquota: Redis is back; rejoined the fleet's circuits", "name", f.name)
	}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
