package retry

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCircuitOpen is the Reason of the *Error that Do and DoValue return when
// a Breaker refused an attempt because its circuit was open: the service has
// been failing, and the operation was not called. A refused first attempt
// gives up after 0 attempts; a refused retry, after the attempts made.
var ErrCircuitOpen = errors.New("retry: circuit open, attempt not made")

// Defaults of BreakerOptions.
const (
	DefaultBreakerFailureRate = 0.5
	DefaultBreakerMinAttempts = 20
	DefaultBreakerWindow      = 10 * time.Second
	DefaultBreakerOpenFor     = time.Second
	DefaultBreakerMaxOpenFor  = time.Minute
	DefaultBreakerProbes      = 1
)

// BreakerOptions configure a Breaker. Each zero field takes its default.
type BreakerOptions struct {
	// FailureRate is the share of a scope's counted attempts over Window
	// that must have failed for the circuit to open. 0 (or less, or NaN)
	// = 0.5; above 1 the circuit never opens. Unless every attempt in the
	// window failed, reaching it is not enough: the window must also show,
	// by Wald's sequential probability ratio test (A. Wald, "Sequential
	// Tests of Statistical Hypotheses", Annals of Mathematical Statistics
	// 16(2), 1945), that the service fails at FailureRate+0.1 rather than
	// at FailureRate-0.1 (a narrower band near 0 and 1), with a 10 % risk
	// of error either way. At 0.5 that is six failures more than
	// successes: a window of 20 attempts opens on 13 failures, not 10, and
	// one of 100 on 53. The window is judged again at every failure, and a
	// small one that only just reaches the rate is often chance, as when a
	// client calling once a second fills its window with the retries of
	// its failures.
	FailureRate float64
	// MinAttempts is how many counted attempts the window must hold
	// before the circuit may open: a handful of attempts says too little.
	// 0 or less = 20.
	MinAttempts int
	// Window is how long counted attempts stay counted: at least Window,
	// and at most a tenth more, as the window slides a tenth at a time;
	// never longer, whatever the gaps between calls. At high rates the
	// breaker does not read the clock for every success (see Breaker):
	// when it cannot tell in which tenth a success came, it takes the
	// earliest, so that a success may leave the window early, never late.
	// 0 = 10 s.
	Window time.Duration
	// OpenFor is how long the circuit stays open before it lets probes
	// through. 0 = the time the scope takes to make five attempts, at the
	// rate its window saw when the circuit opened, from 10 ms to 1 s: an
	// open circuit then lets about one attempt in five through as a probe,
	// and sees a service that is back within five attempts' time, while
	// shedding four fifths of the load on one that is not. Set, each
	// failed probe doubles it, up to MaxOpenFor; closing the circuit
	// resets it.
	OpenFor time.Duration
	// MaxOpenFor caps OpenFor's doubling: 0 = 1 min when OpenFor is set;
	// never below OpenFor. With OpenFor at its default, spells double only
	// if MaxOpenFor is set: growing spells keep a recovered service
	// refused for up to the last of them (in retry sim, a 30 s outage cost
	// 18 points of success against no retries, where spells that do not
	// grow cost under one).
	MaxOpenFor time.Duration
	// Probes is how many attempts the half-open circuit lets through, all
	// of which must succeed for it to close. 0 or less = 1.
	Probes int
	// Now is the breaker's clock; nil = time.Now. Simulations and tests
	// set it.
	Now func() time.Time
}

// BreakerState is the state of a Breaker's circuit in one scope.
type BreakerState uint8

const (
	// BreakerClosed: attempts go through and are counted.
	BreakerClosed BreakerState = iota
	// BreakerOpen: attempts are refused with ErrCircuitOpen, without
	// calling the operation, until OpenFor has passed.
	BreakerOpen
	// BreakerHalfOpen: OpenFor has passed; the next Probes attempts go
	// through and decide, and the others are refused meanwhile.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(s)) + ")"
}

// A Breaker is a circuit breaker, the pattern of Michael Nygard's Release
// It! (2007; 2nd ed. 2018, "Circuit Breaker"): when most recent attempts
// at a service have failed, it stops calling the service for a while, so
// that callers fail at once instead of waiting on it and a service that is
// down is not kept down by the load of calls it cannot serve (what the
// Google SRE book, "Handling Overload" and "Addressing Cascading Failures",
// calls shedding load at the client). Pass it to Do and DoValue with
// WithBreaker: they consult it before every attempt, the first included,
// and tell it how each attempt went. A loop of the caller's own (one that
// does not call Do, a simulation) does the same with Allow, Done and Delay.
//
// Per scope (the call's Scope; "" by default), each independent of the
// others:
//
//   - Closed, it lets every attempt through and counts them over a sliding
//     Window (10 s). When the window holds at least MinAttempts (20)
//     counted attempts and either all of them failed (an outage) or the
//     share that failed reaches FailureRate (0.5) with a sequential test's
//     confidence (six failures more than successes at 0.5; see
//     FailureRate), it opens.
//   - Open, it refuses every attempt: the operation is not called, and the
//     call gives up with ErrCircuitOpen. After OpenFor (the time the scope
//     takes to make five attempts, at most 1 s) it is half-open.
//   - Half-open, it lets the next Probes (1) attempts through and refuses
//     the others. If all of them succeed, it closes, with a fresh window and
//     OpenFor back to its start; if one fails, it opens again for the same
//     spell (set OpenFor or MaxOpenFor for spells that double, up to
//     MaxOpenFor). The failure of an
//     attempt that began before the circuit last opened (one that hung while
//     the service stalled, and times out after it recovered) counts in no
//     later window.
//
// What counts is read from the same classification as retries (Classify).
// An attempt that failed for the service's fault counts as a failure: a
// server fault (Info.Fault == FaultServer), a timeout (an attempt's own
// deadline, met while its caller waits, is one), or a retryable
// failure nobody blamed on either side, such as a connection that could
// not be made or an error marked Transient. A success counts as a success.
// An answer that blames the client (an HTTP 404) shows a service at work, a
// throttle (an HTTP 429) is the service asking for less, not failing, the
// caller's own cancellation or deadline says nothing about the service, and
// an error nobody classified (the zero Info) may be the caller's own bug:
// these count as neither, so that a breaker does not trip against a healthy
// service because its callers give up, ask for what is not there or are
// asked to slow down. Each attempt is one verdict: a call's retries are
// attempts of their own. A probe that ends as neither frees its place for
// another probe without deciding anything. A probe whose verdict never
// comes (its operation panicked, or hangs) does not hold the circuit
// half-open for ever: once every probe place is taken and OpenFor has
// passed since the last was, the places are handed out afresh, and the
// late verdict decides nothing.
//
// The number of scopes is bounded (1024). Beyond it, the least recently
// used scope is dropped, a closed one first, and the new scope starts
// closed: a breaker fails open, as if it were not there, rather than
// refusing a scope for what another one did.
//
// A closed circuit costs an attempt a few atomic operations and no
// allocation; it reads the clock and takes a lock on a failure, and on a
// success only as often as its scope's rate needs to place successes in
// the right tenth of the window: each success while they come fewer than
// about 64 a tenth, one in up to 64 at high rates.
// A Breaker is safe for concurrent use, and should be shared by every
// caller of a service in a process. Its zero value uses the defaults;
// NewBreaker sets options. It must not be copied after first use.
type Breaker struct {
	opts   BreakerOptions
	scopes scopes[breakerScope, *breakerScope]
	clock  clock
}

// NewBreaker returns a Breaker with the given options.
func NewBreaker(opts BreakerOptions) *Breaker { return &Breaker{opts: opts} }

// State returns the state of scope's circuit now. A scope the breaker has
// not seen is closed, and State does not create it. An open circuit whose
// OpenFor has passed is half-open: its next attempts are probes.
func (b *Breaker) State(scope string) BreakerState {
	if b == nil {
		return BreakerClosed
	}
	sc := b.scopes.peek(scope)
	if sc == nil {
		return BreakerClosed
	}
	st := BreakerState(sc.state.Load())
	if st == BreakerOpen && b.now() >= sc.until.Load() {
		return BreakerHalfOpen
	}
	return st
}

// Allow is the breaker's consultation before an attempt in scope, for a
// loop of the caller's own: Do and DoValue make it before each of theirs.
// If the circuit refuses the attempt, Allow returns ErrCircuitOpen, and
// the attempt must not be made, with a refusal's ticket: its Done reports
// nothing, and WithTicket makes it the refusal of a loop's first attempt.
// Otherwise it returns the ticket whose Done reports how the attempt went;
// in a half-open circuit the attempt is a probe, and holds one of the
// Probes places until then. An attempt that will not be made after all
// hands its ticket back with Release. A nil b allows every attempt.
//
// A loop that also calls Delay before each wait, and asks nothing of its
// strategy for a first attempt while Delay is above zero, consults the
// breaker exactly as Do does:
//
//	if b.Delay(scope) > wait {
//		return retry.ErrCircuitOpen // refused after the wait: give up now
//	}
//	time.Sleep(wait)
//	t, err := b.Allow(scope)
//	if err != nil {
//		return err
//	}
//	err = attempt(ctx)
//	t.Done(ctx, err)
func (b *Breaker) Allow(scope string) (BreakerTicket, error) {
	a := b.at(scope)
	p := a.allow()
	if p == refused {
		return BreakerTicket{a, p}, ErrCircuitOpen
	}
	return BreakerTicket{a, p}, nil
}

// Delay returns how long from now the circuit of scope stays open: Allow
// refuses every attempt until then. It is 0 for a closed circuit, for one
// that lets probes through (Allow tells whether a probe's place is free),
// for a scope the breaker has not seen (which Delay does not create) and
// for a nil b. Do reads it before each wait: a retry whose wait would end
// sooner is refused at once rather than after the wait, and while it is
// above zero a call makes no first attempt and does not ask its strategy
// for one.
func (b *Breaker) Delay(scope string) time.Duration {
	if b == nil {
		return 0
	}
	sc := b.scopes.peek(scope)
	if sc == nil {
		return 0
	}
	return breakerAt{b, sc}.openLeft()
}

// A BreakerTicket is a Breaker's leave for one attempt, which Allow
// gives: its Done reports the attempt's outcome. The zero BreakerTicket
// reports to no breaker. A ticket is also Allow's record of a refusal,
// which reports nothing.
type BreakerTicket struct {
	at breakerAt
	p  pass
}

// Done reports how the attempt of t went: err is nil if it succeeded, and
// otherwise its failure, which the breaker judges by the retry
// classification as it does Do's (see Breaker): the service's faults and
// timeouts fail, and an answered client fault, a throttle, an error nobody
// classified or any failure once ctx, the caller's context, is done counts
// as neither. A nil ctx is context.Background. Done should be called once
// per ticket, when the attempt is over: a probe's verdict counts once (a
// second Done, or a Release after it, is ignored), but each Done of an
// attempt through a closed circuit is counted. A probe never reported stops
// holding its place after OpenFor (see Breaker).
func (t BreakerTicket) Done(ctx context.Context, err error) {
	if t.p == refused {
		return
	}
	if err == nil {
		t.at.succeeded(t.p)
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	t.at.failed(ctx, t.p, err)
}

// Probe reports whether t was given as a probe's, in a half-open circuit:
// until its Done or Release (or until the breaker hands the places out
// again, after OpenFor without a verdict), it holds one of the Probes
// places, and other attempts in its scope may be refused.
func (t BreakerTicket) Probe() bool { return t.p != refused && t.p.probe() }

// Release hands back t, whose attempt will not be made after all: a probe's
// place is freed, and nothing is counted. A probe's ticket already reported
// or released is not released again, and other tickets hold no place, so
// Release may be deferred, as a transaction's Rollback is, in case the
// attempt is not made.
func (t BreakerTicket) Release() {
	if t.Probe() && t.at.sc != nil {
		t.at.report(t.p, neither)
	}
}

// breakerScope is a Breaker's circuit for one scope.
type breakerScope struct {
	state     atomic.Uint32 // a BreakerState; only the half-open transition is made lazily
	until     atomic.Int64  // when open: the end of the open spell, a reading of the breaker's clock
	successes atomic.Uint64 // successes counted while closed (wrapping); placed in window now and then
	taken     atomic.Uint64 // successes when they were last placed
	step      atomic.Uint64 // successes pending that ask for a placement (see place): 1 to breakerPlaceEvery
	born      atomic.Int64  // when the scope was first consulted, a reading of the breaker's clock
	closings  atomic.Uint64 // how often the circuit closed: which closed spell an attempt began in

	mu      sync.Mutex    // guards what follows and every change of state
	window  breakerWindow // counted attempts and successes while closed
	out     []pass        // the probes of this round whose verdict is pending
	grants  uint64        // probes let through so far: each probe's pass is its number
	passed  int           // probes of this round that succeeded
	granted int64         // when this round's last probe was let through
	openFor time.Duration // the current open spell; 0 = OpenFor
}

func (sc *breakerScope) init(scopeConfig) {}

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

// verdicts of an attempt, as a breaker counts them.
const (
	neither = iota
	succeeded
	failedAttempt
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
	sc := b.scopes.get(scope, scopeConfig{}, defaultMaxScopes)
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

// succeeded reports the success of an attempt made with p. In a closed
// circuit it costs an atomic add.
func (a breakerAt) succeeded(p pass) {
	if a.sc != nil {
		a.success(p)
	}
}

func (a breakerAt) success(p pass) {
	if p.probe() {
		a.report(p, succeeded)
		return
	}
	sc := a.sc
	if sc.successes.Add(1)-sc.taken.Load() >= max(sc.step.Load(), 1) {
		a.report(p, succeeded)
	}
}

// failed reports the failure of an attempt made with p, with err, in ctx,
// the call's context.
func (a breakerAt) failed(ctx context.Context, p pass, err error) {
	if a.sc != nil {
		a.failure(ctx, p, err)
	}
}

func (a breakerAt) failure(ctx context.Context, p pass, err error) {
	a.report(p, verdict(ctx, err))
}

// report is the verdict v of an attempt made with p, but for the common
// success (see succeeded): a success to place in the window, a failure, a
// probe's verdict.
func (a breakerAt) report(p pass, v int) {
	sc := a.sc
	if !p.probe() {
		switch v {
		case succeeded:
			// Place the successes now and then, so that they leave the
			// window as they age rather than all at once.
			now := a.b.now()
			sc.mu.Lock()
			a.place(now, true)
			sc.mu.Unlock()
		case failedAttempt:
			a.trip(p)
		}
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
	case succeeded:
		if sc.passed++; sc.passed >= a.b.probes() {
			a.close()
		}
	case failedAttempt:
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
	slot := now / a.b.slotWidth()
	sc.window.add(slot, 1, 0)
	if attempts, successes := sc.window.sum(slot); a.b.trips(attempts, successes) {
		sc.openFor = a.b.firstSpell(attempts)
		a.open(now)
	}
}

// place puts the successes counted since the last placement in the
// window at now, one of which came now if own. A closed circuit does not
// read the clock for every success: it places them when step of them are
// pending, and adapts step so that a placement's successes span at most
// an eighth of a slot of the window: each success is placed as it comes
// until they come 64 a slot or more, and the busier the scope, the more
// wait for a placement (up to breakerPlaceEvery). When each came is not
// known, they are placed in the slot of the previous placement, the
// earliest they may have come, so that none counts past its time (see
// Window): after a gap of minutes, none of them is counted. Callers hold
// mu.
func (a breakerAt) place(now int64, own bool) {
	sc, w := a.sc, &a.sc.window
	total := sc.successes.Load()
	n := float64(total - sc.taken.Load()) // the counter wraps; the difference does not
	from := w.placed
	if from == 0 {
		from = sc.born.Load()
	}
	sc.taken.Store(total)
	w.placed = now
	width := a.b.slotWidth()
	slot, at := now/width, from/width
	step := max(sc.step.Load(), 1)
	switch span := now - from; {
	case span > width/8:
		sc.step.Store(max(step/2, 1))
	case span <= width/64 && n >= float64(step):
		sc.step.Store(min(2*step, breakerPlaceEvery))
	}
	if n == 0 {
		return
	}
	if own {
		w.add(slot, 1, 1) // this one came now
		n--
	}
	if from <= 0 || from >= now {
		at = slot
	}
	if n > 0 && at > slot-breakerSlots {
		w.add(at, n, n)
	}
}

// breakerWindow counts a closed circuit's attempts and successes over a
// sliding window of breakerSlots slots, each a tenth of Window wide, the
// current one included: a count stays counted for at least Window, and at
// most a tenth more. It is read and written under its scope's mu, only on
// failures and on every breakerPlaceEvery-th success.
type breakerWindow struct {
	slots  [breakerSlots]breakerSlot
	placed int64 // when successes were last placed; 0 = never
}

type breakerSlot struct {
	index               int64 // which slot of time it counts: its start over its width
	attempts, successes float64
}

// breakerSlots: Window in tenths, and the current tenth.
const breakerSlots = rollingSlots + 1

// add counts in the slot of time index, which must be within the window.
func (w *breakerWindow) add(index int64, attempts, successes float64) {
	s := &w.slots[index%breakerSlots]
	if s.index != index {
		*s = breakerSlot{index: index}
	}
	s.attempts += attempts
	s.successes += successes
}

// sum returns the counts of the window whose newest slot is index.
func (w *breakerWindow) sum(index int64) (attempts, successes float64) {
	for i := index; i > index-breakerSlots && i >= 0; i-- {
		if s := &w.slots[i%breakerSlots]; s.index == i {
			attempts += s.attempts
			successes += s.successes
		}
	}
	return attempts, successes
}

// breakerPlaceEvery is the most successes a closed circuit counts between
// placements in its window (a power of two): at high rates, it reads the
// clock for one success in that many.
const breakerPlaceEvery = 64

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

// verdict judges a failed attempt: a failure if the service is at fault,
// the attempt timed out, or it failed in a way marked retryable (Safe) that
// nobody blamed on the client, as a failed dial is or an error marked
// Transient; neither for an answer that blames the client, a throttle, the
// caller's own cancellation or deadline, or an error that says nothing
// about retrying.
func verdict(ctx context.Context, err error) int {
	if ctx.Err() != nil {
		return neither // the caller gave up: nothing about the service
	}
	info := Classify(err)
	switch {
	case info.Throttle:
		return neither
	case info.Fault != FaultServer && callerGaveUp(err):
		return neither
	case info.Fault == FaultServer || info.Timeout:
		return failedAttempt
	case info.Fault == FaultUnknown && info.Safety == Safe:
		return failedAttempt
	}
	return neither
}

// trips reports whether a closed window's counts open the circuit: at
// least MinAttempts, every one failed (an outage) or the failed share at
// least FailureRate and the evidence of a sequential test (see trusted).
func (b *Breaker) trips(attempts, successes float64) bool {
	rate := b.opts.FailureRate
	if rate <= 0 || math.IsNaN(rate) {
		rate = DefaultBreakerFailureRate
	}
	if attempts < float64(orDefault(b.opts.MinAttempts, DefaultBreakerMinAttempts)) {
		return false
	}
	// A hair of tolerance: successes are placed in fractions of slots.
	failures := attempts - successes
	if failures < rate*attempts-1e-6 {
		return false // above 1, never
	}
	return successes < 1e-6 || rate < 1 && trusted(failures, successes, rate)
}

// trusted reports whether failures and successes say, by Wald's
// sequential probability ratio test, that the service fails at rate+d
// rather than rate-d (d = breakerBand, or less near 0 and 1), with error
// rates of breakerRisk either way. A window is judged again at every
// failure, and one that only just reaches rate is as often chance: a
// client that calls once a second reaches MinAttempts only with the
// retries of its failures, and would open on a service failing 30 % of
// attempts. At 0.5 the test asks for six failures more than successes
// whatever the window's size, where a confidence bound on the share
// (Wilson's) asks for more the busier the window: an outage opens a busy
// circuit about as soon as the share alone did (in retry sim, a client
// calling ten times a second half a second later; with Wilson's bound at
// 95 %, a second, which its open spells then carry past the outage's
// end). A risk of 5 % would ask for eight.
func trusted(failures, successes, rate float64) bool {
	d := min(breakerBand, rate/2, (1-rate)/2)
	llr := failures*math.Log((rate+d)/(rate-d)) - successes*math.Log((1-rate+d)/(1-rate-d))
	return llr >= math.Log((1-breakerRisk)/breakerRisk)-1e-9
}

// The sequential test's half band of failure rates around FailureRate, and
// its error rate either way.
const (
	breakerBand = 0.1
	breakerRisk = 0.1
)

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

func (b *Breaker) window() time.Duration { return orDuration(b.opts.Window, DefaultBreakerWindow) }

// slotWidth is the width of the window's slots, in nanoseconds.
func (b *Breaker) slotWidth() int64 { return max(int64(b.window())/rollingSlots, 1) }

// now reads the breaker's clock (see clock): monotonic, in nanoseconds.
func (b *Breaker) now() int64 { return b.clock.read(b.opts.Now) }
