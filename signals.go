package retry

import (
	"math"

	"github.com/retrykit/retry/internal/errchain"
)

// answer is what a failed attempt says of the service, as Adaptive's
// signals count it.
type answer uint8

const (
	answerFailed   answer = iota // the service failed the attempt: a server fault, a throttle, a timeout
	answerAccepted               // the service answered, with a fault of the client's: it is working
	answerIgnored                // the caller gave up: nothing about the service
)

// evidence is what a scope's signals say after one failed attempt.
type evidence struct {
	answer            answer
	streak            int64   // failed attempts in a row, this one included
	attempts, accepts float64 // the scope's window
	timeouts          float64 // attempts in the scope's window that timed out
	allAttempts       float64 // every scope's window, while other scopes exist
	allAccepts        float64
	all               bool  // other scopes exist and this one is not judged alone: the all-scope counts apply
	worked            int64 // when a retry last succeeded, a reading of the strategy's clock; 0 = never
	// latency is the fleet's judgement of the latency of successes, when
	// the scope's fleet view has one: latencyHealthy or latencyClimbing;
	// latencyLocal leaves it to the scope's own probes.
	latency latencyVerdict
}

// latencyVerdict is what a fleet's view says of the latency of successes.
type latencyVerdict uint8

const (
	latencyLocal latencyVerdict = iota
	latencyHealthy
	latencyClimbing
)

// observe counts a failed attempt in sc's signals as what it says about
// the service, and returns what they say now.
//
// An answer that blames the client (gRPC NOT_FOUND, HTTP 404, a Forrst
// client error) shows a service at work: it counts as an accepted attempt
// and ends the scope's failure streak, or a scope where most calls look
// things up that are not there would have its retries refused. A throttle
// is no such answer, nor is a timeout: both are the service's load. Nor is
// a client fault the service gave its permission to retry (Info.Allowed:
// a 413 with a Retry-After, Forrst guidance "allowed": true): the service
// asks for the request again, it did not take it, and counted as accepted
// its answer would lift the streak and client-side throttling that the
// permission never lifts. The caller's own cancellation, or its own
// deadline, counts as nothing.
func (a *Adaptive) observe(sc *adaptiveScope, now int64, info Info, err error) evidence {
	var e evidence
	w := a.window()
	switch {
	case info.Fault == FaultClient && !info.Throttle && !info.Timeout && !info.Allowed && !callerGaveUp(err):
		e.answer = answerAccepted
		e.attempts, e.accepts = sc.outcomes.accept(now, w)
		if sc.streak.Load() != 0 {
			sc.streak.Store(0)
		}
	case info.Fault != FaultServer && callerGaveUp(err):
		e.answer = answerIgnored
		return e
	default:
		e.attempts, e.accepts = sc.outcomes.failure(now, w)
		e.streak = sc.streak.Add(1)
		slot := slotOf(now, w)
		if info.Timeout {
			sc.timeouts.add(slot, milli)
			if f := sc.fleet; f != nil {
				f.timedOut.Add(1)
			}
		}
		e.timeouts = float64(sc.timeouts.sum(slot)) / milli
	}
	e.worked = sc.worked.Load()
	if f := sc.fleet; f != nil {
		if fv := f.view.Load(); fv != nil && now < fv.until {
			fv.merge(sc, f, &e, now, w)
		}
	}
	if e.all = a.scoped.Load() && !sc.judge(e.attempts, e.accepts); e.all {
		if e.answer == answerAccepted {
			e.allAttempts, e.allAccepts = a.all.accept(now, w)
		} else {
			e.allAttempts, e.allAccepts = a.all.failure(now, w)
		}
	}
	if info.Throttle || sc.limiting.Load() {
		a.tell(sc, now, info.Throttle)
	}
	return e
}

// callerGaveUp reports whether err is a context's error that no one
// classified otherwise: the caller cancelled, or its deadline passed. An
// attempt that timed out while the caller waited (AttemptTimeout, or a
// deadline of the operation's own, which Do's loop marks: see timing) is
// no such error: the service did not answer in time.
func callerGaveUp(err error) bool {
	var w errchain.Walk
	if w.Find(err, func(err error) bool { _, ok := err.(*attemptTimeoutError); return ok }) {
		return false
	}
	return isContextError(err)
}

// overloaded reports whether sc's evidence fails to show that a timeout
// there is one bad replica or one slow attempt rather than the service's
// overload, which a retry would add to: at least half of a window of
// attempts (minEvidence or more) timed out, or the latency of its
// successful attempts is climbing, or there is no recent latency to judge
// by. docs/adaptive.md says why.
func (a *Adaptive) overloaded(sc *adaptiveScope, e evidence, now int64) bool {
	if e.attempts >= minEvidence && 2*e.timeouts >= e.attempts {
		return true
	}
	switch e.latency {
	case latencyHealthy:
		return false
	case latencyClimbing:
		return true
	}
	return !sc.latency.healthy(now, a.window())
}

// throttledClient reports whether client-side throttling refuses a retry,
// and sets e.all when it is the every-scope counts that do. Those apply
// only to a scope that shows no health of its own (too few attempts to
// judge, or too few accepted; observe set e.all for no other), and count
// only such scopes: a failing service reached under many scope names
// cannot collect a fresh allowance under each, nor borrow one from the
// successes of a healthy service beside it, and yet one failing service
// does not starve another, healthy one that shares the strategy.
func (a *Adaptive) throttledClient(e *evidence) bool {
	reject := a.rejection(e.attempts, e.accepts)
	if e.all && reject == 0 {
		reject = a.rejection(e.allAttempts, e.allAccepts)
	} else {
		e.all = false
	}
	return reject > 0 && a.rand() < reject
}

// streakTooLong reports whether a scope's failures in a row, e.streak (the
// fleet's, for a bound strategy with a fresh view), stop its retries; a
// retry that worked within the window, e.worked, lengthens the limit.
func (a *Adaptive) streakTooLong(e evidence, info Info, now int64) bool {
	limit := int64(a.opts.Streak)
	switch {
	case limit < 0:
		return false
	case limit == 0:
		limit = DefaultAdaptiveStreak
	}
	if last := e.worked; !info.Throttle && last != 0 && now-last < int64(a.window()) {
		limit = 2*limit + 2 // retries are working: a brownout, not an outage
	}
	return e.streak >= limit
}

// healthy reports whether a window of a scope's attempts and accepts shows
// it healthy on its own: minEvidence attempts or more, half of them
// accepted.
func healthy(attempts, accepts float64) bool {
	return attempts >= minEvidence && accepts*2 >= attempts
}

// judge records whether sc's window, attempts and accepts, shows it
// healthy on its own, and reports it.
func (sc *adaptiveScope) judge(attempts, accepts float64) bool {
	h := healthy(attempts, accepts)
	if sc.alone.Load() != h {
		sc.alone.Store(h)
	}
	return h
}

// rejection is the client-side throttling probability of the Google SRE
// book for a window's counts.
func (a *Adaptive) rejection(attempts, accepts float64) float64 {
	k := a.opts.Multiplier
	switch {
	case k == 0 || math.IsNaN(k) || math.IsInf(k, 0):
		k = DefaultAdaptiveMultiplier
	case k < 0:
		return 0
	}
	if attempts < minEvidence {
		// A window with a handful of attempts says little: the formula
		// would refuse half the retries of a client whose very first
		// request failed. The streak covers a cold start.
		return 0
	}
	return max(0, (attempts-k*accepts)/(attempts+1))
}

// minEvidence is the attempts a window must hold before client-side
// throttling judges the service by it.
const minEvidence = 10
