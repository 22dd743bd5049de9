package sharedevidence

import (
	"math"
	"time"
)

// Tenths is how many slots a store cuts the window into, as Adaptive's own
// windows: evidence leaves the fleet's window a tenth at a time.
const Tenths = 10

// Memory is a fleet's evidence in memory, on a clock of its caller's: the
// store's rule, which redisquota's script follows in Redis. The zero value
// is ready to use. It is not safe for concurrent use.
type Memory struct {
	scopes map[string]*memoryScope
}

// memoryScope is one scope's evidence in the store.
type memoryScope struct {
	slots    [Tenths]memorySlot
	streak   int64
	streakAt time.Duration // when an attempt last added to the streak or reset it
	worked   time.Duration // when a retry last worked, if hasWorked
	// hasWorked: some report said a retry worked.
	hasWorked bool
	// typical is the fleet's typical latency of a success, in
	// nanoseconds: each tenth's mean latency, once the tenth is over,
	// moves it by the part of the window since the last tenth that had
	// any, as Adaptive's own typical latency moves with each probe. So a
	// climb shows against the baseline before it for about a window,
	// rather than being averaged in at once. folded is the last tenth
	// taken into it, if hasFolded, and before the typical latency before
	// it was: the baseline that tenth's mean is judged by while it is the
	// newest (as Adaptive judges its latest probe by a typical latency
	// that leaves it out).
	typical, before float64
	folded          int64
	hasFolded       bool
}

// memorySlot is a tenth of the window as the store counts it.
type memorySlot struct {
	tenth                                           int64 // the tenth counted: the time over the slot's width
	attempts, accepts, timeouts, probes, probeNanos uint64
}

// Sync counts reports at now, with the fleet's window, and appends to views
// the fleet's view of each report's scope, in order.
func (m *Memory) Sync(now, window time.Duration, reports []Report, views []View) []View {
	if m.scopes == nil {
		m.scopes = map[string]*memoryScope{}
	}
	width := max(window/Tenths, 1)
	cur := int64(now / width)
	for _, r := range reports {
		k := m.scopes[r.Scope]
		if k == nil {
			k = &memoryScope{}
			m.scopes[r.Scope] = k
		}
		views = append(views, k.sync(now, window, width, cur, r))
	}
	return views
}

// sync is Sync for one scope.
func (k *memoryScope) sync(now, window, width time.Duration, cur int64, r Report) View {
	s := &k.slots[cur%Tenths]
	if s.tenth != cur {
		*s = memorySlot{tenth: cur}
	}
	s.attempts += r.Attempts
	s.accepts += r.Accepts
	s.timeouts += r.Timeouts
	s.probes += r.Probes
	s.probeNanos += r.ProbeNanos

	if now-k.streakAt > window {
		k.streak = 0 // nothing failed or was accepted in a window: those who failed are gone
	}
	switch {
	case r.Reset:
		k.streak, k.streakAt = r.Tail, now
	case r.Tail > 0:
		k.streak, k.streakAt = k.streak+r.Tail, now
	}
	if r.WorkedAgo >= 0 && (!k.hasWorked || now-r.WorkedAgo > k.worked) {
		k.worked, k.hasWorked = now-r.WorkedAgo, true
	}

	v := View{Streak: k.streak, WorkedAgo: -1}
	if k.hasWorked && now-k.worked <= window {
		v.WorkedAgo = now - k.worked
	}
	k.fold(cur)
	newest := -1
	for i := range k.slots {
		s := &k.slots[i]
		if s.tenth <= cur-Tenths || s.tenth > cur {
			continue // out of the window (or never used)
		}
		v.Attempts += float64(s.attempts)
		v.Accepts += float64(s.accepts)
		v.Timeouts += float64(s.timeouts)
		if s.probes > 0 && (newest < 0 || s.tenth > k.slots[newest].tenth) {
			newest = i
		}
	}
	if newest >= 0 {
		n := &k.slots[newest]
		v.Latest = float64(n.probeNanos) / float64(n.probes)
		v.LatestAgo = max(now-time.Duration(n.tenth+1)*width, 0)
		v.Typical = k.typical
		if k.hasFolded && n.tenth == k.folded {
			v.Typical = k.before
		}
	}
	if v.Latest == 0 {
		v.Typical = 0 // no recent success to judge
	}
	return v
}

// fold takes the tenths that ended before cur, and had successes timed,
// into the typical latency, oldest first.
func (k *memoryScope) fold(cur int64) {
	from := max(cur-Tenths+1, 0) // the clock's first tenths have none before them
	if k.hasFolded {
		from = max(k.folded+1, from)
	}
	for t := from; t < cur; t++ {
		s := &k.slots[t%Tenths]
		if s.tenth != t || s.probes == 0 {
			continue
		}
		// Whole nanoseconds, as a store whose numbers are integers keeps it.
		mean := float64(s.probeNanos) / float64(s.probes)
		k.before = k.typical
		if k.typical == 0 {
			k.typical = math.Floor(mean)
		} else {
			weight := min(float64(t-k.folded)/Tenths, 1)
			k.typical = math.Floor(k.typical + (mean-k.typical)*weight)
		}
		k.folded, k.hasFolded = t, true
	}
}
