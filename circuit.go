package retry

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// breakerScope is a Breaker's circuit for one scope.
type breakerScope struct {
	state     atomic.Uint32 // a BreakerState; only the half-open transition is made lazily
	until     atomic.Int64  // when open: the end of the open spell, a reading of the breaker's clock
	successes atomic.Uint64 // successes counted while closed (wrapping); placed in window now and then
	taken     atomic.Uint64 // successes when they were last placed
	step      atomic.Uint64 // successes pending that ask for a placement (see place): 1 to breakerPlaceEvery
	born      atomic.Int64  // when the scope was first consulted, a reading of the breaker's clock
	closings  atomic.Uint64 // how often the circuit closed: which closed spell an attempt began in
	failures  atomic.Uint64 // failures counted while closed (wrapping): a shared circuit's store sends them
	name      string        // the scope's name, for a shared circuit's store

	mu      sync.Mutex    // guards what follows and every change of state
	window  breakerWindow // counted attempts and successes while closed
	out     []pass        // the probes of this round whose verdict is pending
	grants  uint64        // probes let through so far: each probe's pass is its number
	passed  int           // probes of this round that succeeded
	granted int64         // when this round's last probe was let through
	openFor time.Duration // the current open spell; 0 = OpenFor
	fleet   fleetCircuit  // the shared circuit's part, for a bound breaker (see sharedbreaker.go)
}

func (sc *breakerScope) init(cfg scopeConfig) { sc.name = cfg.name }

// idle: a closed circuit loses at most a window of counts when dropped.
func (sc *breakerScope) idle() bool { return BreakerState(sc.state.Load()) == BreakerClosed }

// inherit takes nothing: a new scope starts closed (see Breaker).
func (sc *breakerScope) inherit(any) {}

// pass is what the loop holds for an attempt a breaker let through, to
// report its verdict with: the probe's number in its scope (from 1), so that
// a probe decides once, and only in its own round, or, for an attempt
// through a closed circuit, closedPass and the closed spell it began in, so
// that a verdict that comes after the circuit opened and closed again counts
// in no later spell; 0 without a breaker; refused if the breaker refused it.
type pass uint64

const (
	closedPass = pass(1) << 63
	refused    = ^pass(0)
)

// probe reports whether p is a probe's.
func (p pass) probe() bool { return p != 0 && p&closedPass == 0 }

// verdict is what an attempt says of the service, as a breaker counts it.
type verdict uint8

const (
	verdictNone    verdict = iota // neither: nothing about the service
	verdictSuccess                // the service served the attempt
	verdictFailure                // the service failed it
)

// breakerAt is a breaker and its circuit for a call's scope, as the loop
// holds them. The zero value is no breaker: every method lets everything
// through at the cost of a nil check.
type breakerAt struct {
	b  *Breaker
	sc *breakerScope
}

// at returns b's circuit for scope, creating it if needed; a nil b gives
// the zero breakerAt.
func (b *Breaker) at(scope string) breakerAt {
	if b == nil {
		return breakerAt{}
	}
	sc := b.scopes.get(scope, scopeConfig{name: scope}, defaultMaxScopes)
	if sc.born.Load() == 0 {
		// A new scope: its first successes are spread from now (see place).
		sc.born.CompareAndSwap(0, max(b.now(), 1))
	}
	return breakerAt{b, sc}
}

// refuses reports whether the circuit is open and stays open for at least
// after: an attempt that would start then is refused, so the loop need not
// wait for it. It takes no probe place (allow does).
func (a breakerAt) refuses(after time.Duration) bool {
	return a.sc != nil && a.sc.state.Load() == uint32(BreakerOpen) && a.openPast(after)
}

// openPast reports whether an open circuit is open still after from now.
func (a breakerAt) openPast(after time.Duration) bool {
	return later(a.b.now(), after) < a.sc.until.Load()
}

// later is the reading of a breaker's clock d after now, saturated: an open
// spell of centuries, or a wait as long, must not wrap into the past.
func later(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

// openLeft is how long the circuit stays open from now; 0 if it is not
// open, or lets probes through already.
func (a breakerAt) openLeft() time.Duration {
	if a.sc == nil || BreakerState(a.sc.state.Load()) != BreakerOpen {
		return 0
	}
	return time.Duration(max(a.sc.until.Load()-a.b.now(), 0))
}

// refusedFor is how long a caller the circuit refused waits before it may
// be let through: until the open spell ends or, half-open with every probe
// place taken, until those places are handed out again if no probe has
// decided by then (see consult); 0 if the circuit lets an attempt through.
func (a breakerAt) refusedFor() time.Duration {
	if wait := a.openLeft(); wait > 0 || a.sc == nil {
		return wait
	}
	sc := a.sc
	now := a.b.now()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if a.b.sharing() && sc.fleet.claimAfter > now {
		return time.Duration(sc.fleet.claimAfter - now)
	}
	if BreakerState(sc.state.Load()) != BreakerHalfOpen || len(sc.out)+sc.passed < a.b.probes() {
		return 0
	}
	return time.Duration(max(later(sc.granted, a.b.spell(sc))-now, 0))
}

// allow is the consultation before an attempt: refused, or the pass to
// report its verdict with. A closed circuit (or none) costs a load.
func (a breakerAt) allow() pass {
	if p, ok := a.closed(); ok {
		return p
	}
	return a.consult()
}

// closed reports whether the circuit is closed, or there is none, and the
// pass of an attempt that begins now in it.
func (a breakerAt) closed() (pass, bool) {
	if a.sc == nil {
		return 0, true
	}
	spell := a.sc.closings.Load() // before the state: a spell read late would pass for a later one
	if a.sc.state.Load() != uint32(BreakerClosed) {
		return 0, false
	}
	return closedPass | pass(spell), true
}

// consult is allow for a circuit that was not closed.
func (a breakerAt) consult() pass {
	sc := a.sc
	now := a.b.now()
	if BreakerState(sc.state.Load()) == BreakerOpen && now < sc.until.Load() {
		return refused
	}
	if p, ok := a.consultShared(now); ok {
		return p
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch BreakerState(sc.state.Load()) {
	case BreakerClosed:
		return closedPass | pass(sc.closings.Load())
	case BreakerOpen:
		if now < sc.until.Load() {
			return refused
		}
		sc.state.Store(uint32(BreakerHalfOpen))
		sc.newRound()
	}
	if len(sc.out)+sc.passed >= a.b.probes() {
		if now-sc.granted < int64(a.b.spell(sc)) {
			return refused
		}
		// Every place is taken and none has decided for OpenFor: the
		// probes were abandoned (a panic, a hang). A new round starts;
		// the old probes' verdicts no longer count.
		sc.newRound()
	}
	sc.grants++
	p := pass(sc.grants)
	sc.out = append(sc.out, p)
	sc.granted = now
	return p
}

// newRound starts a round of probes. Callers hold mu.
func (sc *breakerScope) newRound() {
	sc.out, sc.passed = sc.out[:0], 0
}

// reportSuccess reports the success of an attempt made with p. In a closed
// circuit it costs an atomic add.
func (a breakerAt) reportSuccess(p pass) {
	if a.sc != nil {
		a.countSuccess(p)
	}
}

func (a breakerAt) countSuccess(p pass) {
	if p.probe() {
		a.report(p, verdictSuccess)
		return
	}
	sc := a.sc
	if sc.successes.Add(1)-sc.taken.Load() >= max(sc.step.Load(), 1) {
		a.report(p, verdictSuccess)
	}
}

// reportFailure reports the failure of an attempt made with p, with err, in ctx,
// the call's context.
func (a breakerAt) reportFailure(ctx context.Context, p pass, err error) {
	if a.sc != nil {
		a.countFailure(ctx, p, err)
	}
}

func (a breakerAt) countFailure(ctx context.Context, p pass, err error) {
	v := verdictOf(ctx, err)
	a.report(p, v)
	if v == verdictFailure {
		counted(ctx, a.b)
	}
}

// report is the verdict v of an attempt made with p, but for the common
// success (see reportSuccess): a success to place in the window, a failure, a
// probe's verdict.
func (a breakerAt) report(p pass, v verdict) {
	sc := a.sc
	if !p.probe() {
		switch v {
		case verdictSuccess:
			// Place the successes now and then, so that they leave the
			// window as they age rather than all at once.
			now := a.b.now()
			sc.mu.Lock()
			a.place(now, true)
			sc.mu.Unlock()
		case verdictFailure:
			a.trip(p)
		}
		return
	}
	if p.shared() {
		a.reportShared(p, v)
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	i := slices.Index(sc.out, p)
	if BreakerState(sc.state.Load()) != BreakerHalfOpen || i < 0 {
		// A probe of a round that has ended, or one reported already (a
		// Release deferred after its Done): it decides nothing.
		return
	}
	sc.out = slices.Delete(sc.out, i, i+1)
	switch v {
	case verdictSuccess:
		if sc.passed++; sc.passed >= a.b.probes() {
			a.close()
		}
	case verdictFailure:
		sc.openFor = a.b.nextSpell(a.b.spell(sc))
		a.open(a.b.now())
	}
}

// trip counts the failure of an attempt made with p, through a circuit
// that was closed when the attempt began, in its window, and opens it if
// the window says so.
func (a breakerAt) trip(p pass) {
	sc := a.sc
	now := a.b.now()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if BreakerState(sc.state.Load()) != BreakerClosed {
		return // opened meanwhile: a fresh window starts when it closes
	}
	if p&closedPass != 0 && uint64(p&^closedPass) != sc.closings.Load() {
		// The attempt began before the circuit last opened: a verdict on
		// the service as it was then, which must not reopen the circuit
		// its probes closed since (an attempt that timed out late).
		return
	}
	a.place(now, false)
	sc.failures.Add(1)
	slot := now / a.b.slotWidth()
	sc.window.add(slot, 1, 0)
	if a.b.sharing() {
		return // the shared circuit opens, on every process's counts
	}
	if attempts, successes := sc.window.sum(slot); a.b.trips(attempts, successes) {
		sc.openFor = a.b.firstSpell(attempts)
		a.open(now)
	}
}

// open opens the circuit at now for the current spell. Callers hold mu.
func (a breakerAt) open(now int64) {
	sc := a.sc
	sc.until.Store(later(now, a.b.spell(sc)))
	sc.state.Store(uint32(BreakerOpen))
	sc.newRound()
}

// close closes the circuit with a fresh window and the first spell.
// Callers hold mu.
func (a breakerAt) close() {
	sc := a.sc
	sc.openFor = 0
	sc.window = breakerWindow{placed: a.b.now()}
	sc.taken.Store(sc.successes.Load())
	sc.closings.Add(1)
	sc.state.Store(uint32(BreakerClosed))
	sc.newRound()
}

// verdictOf judges a failed attempt: a failure if the service is at fault,
// the attempt timed out, or it failed in a way marked retryable (Safe) that
// nobody blamed on the client, as a failed dial is or an error marked
// Transient; neither for an answer that blames the client, a throttle, the
// caller's own cancellation or deadline, or an error that says nothing
// about retrying.
func verdictOf(ctx context.Context, err error) verdict {
	if ctx.Err() != nil {
		return verdictNone // the caller gave up: nothing about the service
	}
	info := Classify(err)
	switch {
	case info.Throttle:
		return verdictNone
	case info.Fault != FaultServer && callerGaveUp(err):
		return verdictNone
	case info.Fault == FaultServer || info.Timeout:
		return verdictFailure
	case info.Fault == FaultUnknown && info.Safety == Safe:
		return verdictFailure
	}
	return verdictNone
}

// spell is the scope's current open spell.
func (b *Breaker) spell(sc *breakerScope) time.Duration {
	if sc.openFor > 0 {
		return sc.openFor
	}
	return b.firstSpell(0)
}

// firstSpell is the open spell of a circuit that opens with attempts
// counted in its window: OpenFor if set; otherwise the time the scope
// takes to make breakerProbeEvery attempts at the rate of its window, from
// breakerMinSpell to DefaultBreakerOpenFor.
func (b *Breaker) firstSpell(attempts float64) time.Duration {
	if b.opts.OpenFor > 0 {
		return b.opts.OpenFor
	}
	d := DefaultBreakerOpenFor
	if attempts > 0 {
		d = min(time.Duration(float64(b.window())*breakerProbeEvery/attempts), d)
	}
	return max(d, breakerMinSpell)
}

// nextSpell is the open spell after a failed probe ended one of spell:
// twice as long, up to MaxOpenFor, for a breaker whose OpenFor or
// MaxOpenFor is set; the same for one at its defaults.
func (b *Breaker) nextSpell(spell time.Duration) time.Duration {
	most := b.opts.MaxOpenFor
	if most <= 0 {
		if b.opts.OpenFor <= 0 {
			return spell
		}
		most = DefaultBreakerMaxOpenFor
	}
	most = max(most, spell)
	if spell < most/2 { // twice spell, without overflowing
		return 2 * spell
	}
	return most
}

// An open circuit at its defaults lets about one attempt in
// breakerProbeEvery through as a probe (see firstSpell), and probes at
// most every breakerMinSpell.
const (
	breakerProbeEvery = 5
	breakerMinSpell   = 10 * time.Millisecond
)

func (b *Breaker) probes() int { return orDefault(b.opts.Probes, DefaultBreakerProbes) }
