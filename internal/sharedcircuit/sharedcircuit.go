// Package sharedcircuit binds a retry.Breaker to a circuit kept beyond the
// process (redisquota's FleetBreaker keeps it in Redis), without adding to
// package retry's exported API: the root package registers Bind at init,
// and the store's package, inside this module's tree by import path, calls
// it. Its one contract is between those two packages.
//
// The request path of a bound breaker answers from the breaker's own state,
// which the store keeps in line with the shared circuit in the background:
// the store reads each circuit's counts (Circuit.Counts) and sends them,
// decides by the breaker's own rule (Breaker.Trips) whether the shared
// counts open the circuit, and applies the shared state it reads
// (Circuit.Apply). The breaker calls the store only for a probe's place
// (Store.Claim), when its open spell has ended, and to report a probe's
// verdict (Store.Verdict). While Store.Shared is false the breaker runs
// its local circuit, as an unbound one does.
package sharedcircuit

import "time"

// Store is a circuit kept beyond the process, as a bound breaker calls it.
type Store interface {
	// Shared reports whether the store can be reached: while it cannot,
	// the breaker decides on its own.
	Shared() bool
	// Claim asks for a probe's place in scope's circuit, whose open spell
	// has ended locally. It may wait for the store, for a bounded time.
	// ok is false if the store did not answer: the breaker then decides on
	// its own.
	Claim(scope string) (c Claim, ok bool)
	// Verdict reports how a probe of round in scope went; it does not wait.
	Verdict(scope string, round uint64, v Verdict)
}

// Claim is the store's answer to Store.Claim.
type Claim struct {
	Granted bool          // the attempt is a probe of Round
	Round   uint64        // the round of probes the place is in
	RetryIn time.Duration // not granted: how soon asking again may help
	State   State         // the shared circuit as the store saw it
}

// State is a shared circuit's state in one scope.
type State struct {
	// Epoch counts the circuit's transitions: counts sent with another
	// epoch than the circuit's are dropped, so that an attempt is counted
	// only in the closed spell it began in.
	Epoch uint64
	Open  bool          // open or half-open; else closed
	Left  time.Duration // open: how long the spell lasts from now
	Spell time.Duration // open: the spell's length
}

// Verdict is what a probe said of the service.
type Verdict uint8

const (
	VerdictNone    Verdict = iota // nothing: the place is free again
	VerdictSuccess                // the service served it
	VerdictFailure                // the service failed it
)

// Circuit is a bound breaker's circuit in one scope, as its store reads
// and sets it.
type Circuit interface {
	// Counts returns the epoch the circuit last applied, and the attempts
	// and successes it counted while closed since it was made, cumulative
	// (they wrap).
	Counts() (epoch, attempts, successes uint64)
	// Closed reports whether the circuit is closed.
	Closed() bool
	// Apply sets the circuit to the shared state s, unless it is in it.
	Apply(s State)
}

// Breaker is a bound breaker, as its store sees it.
type Breaker interface {
	// Circuits calls yield for each scope's circuit the breaker holds.
	Circuits(yield func(scope string, c Circuit) bool)
	// Trips reports whether a closed window's counts open the circuit.
	Trips(attempts, successes float64) bool
	// FirstSpell is the open spell of a circuit that opens with attempts
	// counted in its window.
	FirstSpell(attempts float64) time.Duration
	// NextSpell is the spell after a failed probe ended one of spell.
	NextSpell(spell time.Duration) time.Duration
	Probes() int
	Window() time.Duration
}

// Bind binds b, a *retry.Breaker not yet used, to s, and returns it as the
// store sees it. Package retry sets it at init.
var Bind func(b any, s Store) Breaker

// Tally is what a process keeps of a scope's probe verdicts until it sends
// them: the counts of the latest round it heard of. A verdict of an older
// round decides nothing, and is dropped.
type Tally struct {
	Round            uint64
	Pass, Fail, Free int
}

// Add counts v, the verdict of a probe of round.
func (t *Tally) Add(round uint64, v Verdict) {
	if round > t.Round {
		*t = Tally{Round: round}
	}
	if round != t.Round {
		return
	}
	switch v {
	case VerdictSuccess:
		t.Pass++
	case VerdictFailure:
		t.Fail++
	default:
		t.Free++
	}
}

// Sent clears the counts once they are sent; the round stays.
func (t *Tally) Sent() { t.Pass, t.Fail, t.Free = 0, 0, 0 }
