package sharedevidence

import "time"

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
	streakAt time.Duration // when the streak was last reported
	worked   time.Duration // when a retry last worked, if hasWorked
	// hasWorked: some report said a retry worked.
	hasWorked bool
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
		k.streak = 0 // no report in a window: those who failed are gone
	}
	if r.Reset {
		k.streak = r.Tail
	} else {
		k.streak += r.Tail
	}
	k.streakAt = now
	if r.WorkedAgo >= 0 && (!k.hasWorked || now-r.WorkedAgo > k.worked) {
		k.worked, k.hasWorked = now-r.WorkedAgo, true
	}

	v := View{Streak: k.streak, WorkedAgo: -1}
	if k.hasWorked && now-k.worked <= window {
		v.WorkedAgo = now - k.worked
	}
	newest := -1
	var probes, nanos uint64
	for i := range k.slots {
		s := &k.slots[i]
		if s.tenth <= cur-Tenths || s.tenth > cur {
			continue // out of the window (or never used)
		}
		v.Attempts += float64(s.attempts)
		v.Accepts += float64(s.accepts)
		v.Timeouts += float64(s.timeouts)
		if s.probes == 0 {
			continue
		}
		probes += s.probes
		nanos += s.probeNanos
		if newest < 0 || s.tenth > k.slots[newest].tenth {
			newest = i
		}
	}
	if newest >= 0 {
		n := &k.slots[newest]
		v.Latest = float64(n.probeNanos) / float64(n.probes)
		v.LatestAgo = max(now-time.Duration(n.tenth+1)*width, 0)
		if rest := probes - n.probes; rest > 0 {
			v.Typical = float64(nanos-n.probeNanos) / float64(rest)
		}
	}
	return v
}
