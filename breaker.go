package retry

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/retrykit/retry/internal/sharedcircuit"
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
// attempts of their own, and loops that nest and share a breaker count a
// request's failure once, where it was made: an attempt of a loop that
// marks its attempts (see CallerRetries) whose failure a loop inside it
// counted with the same breaker counts nothing more. (A success is still
// counted by each such loop; a loop that does not mark, between two, counts
// its attempt's failure again.) A probe that ends as neither frees its place for
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
	shared sharedcircuit.Store // the circuit shared beyond the process, if bound (see sharedbreaker.go)
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

// RefusedFor returns how long from now Allow goes on refusing attempts in
// scope, as far as the breaker knows now: Delay while the circuit is open;
// half-open with every probe's place taken, until the places are handed out
// again; in a circuit shared with a fleet, until the fleet's probe may be
// claimed. It is 0 when Allow may let an attempt through, for a scope the
// breaker has not seen (which RefusedFor does not create) and for a nil b.
// A loop that polls (a queue receive) waits it before it returns a refusal,
// never past its deadline, so that its caller, polling again at once,
// cannot spin against the circuit: LongPoll makes Do wait it.
func (b *Breaker) RefusedFor(scope string) time.Duration {
	if b == nil {
		return 0
	}
	sc := b.scopes.peek(scope)
	if sc == nil {
		return 0
	}
	return breakerAt{b, sc}.refusedFor()
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
		t.at.reportSuccess(t.p)
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	t.at.reportFailure(ctx, t.p, err)
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
		t.at.report(t.p, verdictNone)
	}
}

func (b *Breaker) window() time.Duration { return orDuration(b.opts.Window, DefaultBreakerWindow) }

// now reads the breaker's clock (see clock): monotonic, in nanoseconds.
func (b *Breaker) now() int64 { return b.clock.read(b.opts.Now) }
