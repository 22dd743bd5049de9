// Package sharedevidence binds a retry.Adaptive to evidence kept beyond the
// process (redisquota's FleetAdaptive keeps it in Redis), so that every
// process of a fleet decides its retries as one Adaptive shared by the whole
// fleet would, without adding to package retry's exported API: the root
// package registers Bind at init, and a store's package, inside this
// module's tree by import path, calls it.
//
// The request path of a bound strategy never calls the store. A process
// reads each scope's cumulative counts (Scope.Counts) in the background,
// sends what changed since its last report (Process.Reports), and applies
// the fleet's view the store answers (Process.Apply): the sums of the
// fleet's window, the fleet's failures in a row, when a retry last worked
// anywhere, and the latency of the fleet's successes. While a view is
// fresh, the strategy's signals read the view plus what the process
// counted since it sent its report; once it is stale (the store slow or
// gone), the process's own evidence, as an unbound Adaptive's.
//
// Memory is the store's rule, in Go: the simulator keeps a fleet's
// evidence in it, and redisquota's script is its twin, tested against it.
package sharedevidence

import "time"

// Counts is a scope's evidence as the strategy counted it since the scope
// was made. Every field but Streak and Worked is cumulative and wraps: a
// report sends differences.
type Counts struct {
	Attempts, Accepts uint32 // attempts counted, and those the service accepted (successes, answered client faults)
	Timeouts          uint64 // attempts that timed out
	Streak            int64  // failed attempts in a row, now
	Worked            int64  // the strategy's clock when a retry last succeeded; 0 = never
	Probes            uint64 // successes whose latency was measured
	ProbeNanos        uint64 // their latencies' sum, in nanoseconds
}

// View is a fleet's evidence in one scope, as the store answered a sync:
// what the fleet's Adaptive would read, the reports of the process that
// asked included.
type View struct {
	Attempts, Accepts, Timeouts float64 // over the window
	// Streak is the fleet's failed attempts since an attempt was last
	// accepted anywhere in it, as the reports ordered them.
	Streak int64
	// WorkedAgo is how long before the answer a retry last succeeded in
	// the fleet, within the window; negative if none did.
	WorkedAgo time.Duration
	// Typical is the fleet's typical latency of a success: each tenth's
	// mean, once the tenth is over, moves it by the tenth's share of the
	// window, as each probe moves Adaptive's own. Latest is the mean
	// latency of the newest tenth that timed any success, and LatestAgo
	// how long before the answer that tenth ended. All zero when no
	// success was timed in the window.
	Typical, Latest float64
	LatestAgo       time.Duration
}

// Strategy is a bound Adaptive, as a process's sync sees it.
type Strategy interface {
	// Scopes calls yield for each scope the strategy holds.
	Scopes(yield func(scope string, s Scope) bool)
	// Window is the strategy's window: how long the store keeps evidence.
	Window() time.Duration
	// Now reads the strategy's clock, in nanoseconds.
	Now() int64
}

// Scope is a bound Adaptive's scope, as a sync reads and sets it.
type Scope interface {
	// Counts returns the scope's evidence now: its own, counted since it
	// was made (not what it took over from another scope).
	Counts() Counts
	// Apply makes v the scope's fleet view for fresh from now: sent are
	// the counts of the report v answers, which the scope subtracts from
	// its own to add what it counted since to the view.
	Apply(v View, sent Counts, fresh time.Duration)
}

// Bind binds a, a *retry.Adaptive not yet used, to a fleet's evidence,
// and returns it as a sync sees it. Package retry sets it at init.
var Bind func(a any) Strategy

// Report is what a process sends of one scope at a sync: what it counted
// since its last report.
type Report struct {
	Scope                       string
	Attempts, Accepts, Timeouts uint64
	// Reset: an attempt was accepted since the last report, and Tail is
	// the failures in a row after the last of them, which the fleet's
	// streak becomes; else Tail is added to it.
	Reset bool
	Tail  int64
	// WorkedAgo is how long before the report a retry last succeeded, if
	// one did since the last report; negative otherwise.
	WorkedAgo          time.Duration
	Probes, ProbeNanos uint64
}

// Process is one process's side of a fleet's evidence: what it sent of
// each scope. It is not safe for concurrent use: one sync at a time.
type Process struct {
	s     Strategy
	sent  map[string]sent
	batch []Report
	held  []Counts // the counts each report of batch was made from
	of    []Scope  // the scope each report of batch was made from
	syncs uint64
	now   int64 // the strategy's clock at the last Reports
}

// sent is what a process last sent of a scope, the scope it read (a
// Scope is comparable: the same scope compares equal), the last sync that
// saw the scope, and when what was sent of it last changed.
type sent struct {
	Counts
	of      Scope
	gen     uint64
	changed int64
}

// NewProcess returns the side of a process whose strategy is s.
func NewProcess(s Strategy) *Process {
	return &Process{s: s, sent: map[string]sent{}}
}

// Window is the strategy's window.
func (p *Process) Window() time.Duration { return p.s.Window() }

// Reports returns what to send at a sync now: one report per scope, in
// the order Apply takes the answers. The slice is reused by the next call.
func (p *Process) Reports() []Report {
	now := p.s.Now()
	p.now = now
	p.batch, p.held, p.of = p.batch[:0], p.held[:0], p.of[:0]
	p.syncs++
	p.s.Scopes(func(scope string, s Scope) bool {
		c := s.Counts()
		was, known := p.sent[scope]
		// A scope dropped and made again counts from nothing.
		known = known && was.of == s
		var last Counts
		if known {
			last = was.Counts
			if c == last && now-was.changed > idleWindows*int64(p.s.Window()) {
				// Long idle: the store has nothing to learn, and the
				// scope's view, stale, leaves its next failure to the
				// process until the sync after it. (A scope used every
				// window or so, as a process that calls once in ten
				// seconds uses one, is never left out.)
				was.gen = p.syncs
				p.sent[scope] = was
				return true
			}
		}
		r := Report{
			Scope:      scope,
			Attempts:   uint64(c.Attempts - last.Attempts),
			Accepts:    uint64(c.Accepts - last.Accepts),
			Timeouts:   c.Timeouts - last.Timeouts,
			Probes:     c.Probes - last.Probes,
			ProbeNanos: c.ProbeNanos - last.ProbeNanos,
			WorkedAgo:  -1,
		}
		if !known {
			// Counted before the first report: a scope is made at its
			// first attempt, so that is all of it.
			r.Attempts, r.Accepts, r.Timeouts = uint64(c.Attempts), uint64(c.Accepts), c.Timeouts
			r.Probes, r.ProbeNanos = c.Probes, c.ProbeNanos
		}
		if r.Accepts > 0 {
			r.Reset, r.Tail = true, c.Streak
		} else {
			r.Tail = max(c.Streak-last.Streak, 0)
		}
		if c.Worked != 0 && c.Worked != last.Worked {
			r.WorkedAgo = time.Duration(max(now-c.Worked, 0))
		}
		if known {
			was.gen = p.syncs
			p.sent[scope] = was
		}
		p.batch = append(p.batch, r)
		p.held = append(p.held, c)
		p.of = append(p.of, s)
		return true
	})
	for scope, was := range p.sent {
		if was.gen != p.syncs {
			// The strategy dropped the scope: a new one of the name starts
			// from nothing.
			delete(p.sent, scope)
		}
	}
	return p.batch
}

// Sent records that the last Reports reached the store, whether or not
// its answer came back: they are not sent again.
func (p *Process) Sent() {
	for i, r := range p.batch {
		p.record(r.Scope, p.held[i], p.of[i])
	}
}

// idleWindows is how many windows a scope must have had nothing new for
// to be left out of the syncs: the work of a sync, in the store too,
// follows the scopes in use, not every scope a process ever used.
const idleWindows = 10

// record records c, of s, as sent.
func (p *Process) record(scope string, c Counts, s Scope) {
	was, ok := p.sent[scope]
	changed := was.changed
	if !ok || was.of != s || was.Counts != c {
		changed = p.now
	}
	p.sent[scope] = sent{c, s, p.syncs, changed}
}

// Forget records the last Reports as sent, but for the failures in a row
// they end with: their counts are too old for the fleet's window (the
// store could not be reached for longer), and only the streak, which is
// now, is still to be sent: added to the fleet's.
func (p *Process) Forget() {
	for i, r := range p.batch {
		c := p.held[i]
		c.Streak = 0
		p.record(r.Scope, c, p.of[i])
	}
}

// Fresh is how long a view stays fresh for a process that syncs every
// interval, each sync waiting at most timeout for the store: one missed
// sync is forgiven, two are not.
func Fresh(interval, timeout time.Duration) time.Duration {
	return 2*interval + timeout
}

// Apply applies the store's answer to the last Reports, views[i] to the
// i'th report's scope, fresh for fresh. Call Sent first.
func (p *Process) Apply(views []View, fresh time.Duration) {
	if len(views) != len(p.batch) {
		return
	}
	for i, s := range p.of {
		s.Apply(views[i], p.held[i], fresh)
	}
}
