package retry

import (
	"sync"
	"sync/atomic"
	"time"
)

// latency follows how long a scope's successful attempts take, so that a
// timeout can be judged: one slow or black-holed attempt among fast ones
// is worth retrying, a queue building up at the server is not.
//
// Timing an attempt costs two clock reads, more than the rest of the
// success path, so attempts are timed as probes: about one every
// probeEvery, whatever the rate. A success counts towards the next probe
// with the atomic add the success path makes anyway; the success that
// reaches the count raises due, and the next attempt to begin takes the
// probe. A client that sends a request a second times every one of them;
// one that sends a million a second, one in a hundred thousand. The zero
// value is ready to use, with a probe due once the first success arms it.
type latency struct {
	due  atomic.Bool   // the next attempt to begin is timed
	next atomic.Uint32 // the accept count (outcomes' low word) that raises due

	mu       sync.Mutex
	lastAt   int64  // when the last probe ended, a clock reading; 0 = never
	lastSeen uint32 // the accept count then
	stride   uint32 // successes between probes; 0 = 1
	recent   int64  // the last probe's latency; 0 = none
	// least holds the least latency probed in each of the window's slots,
	// to give the baseline a climb is measured from.
	least [rollingSlots]struct {
		slot, ns int64
		set      bool
	}
}

// Probes, and the reading of them.
const (
	// probeEvery is the time between probes a scope aims for.
	probeEvery = 100 * time.Millisecond
	// climbFactor is how many times the least latency of the window the
	// recent probes must take for the latency to count as climbing.
	climbFactor = 4
)

// succeeded is told of every success, with the accept count the success
// brought the scope's outcomes to; it raises due when a probe is owed.
// Counts wrap, so the comparison is of their difference: once next is
// passed, every success raises due until an attempt takes the probe.
func (l *latency) succeeded(count uint32) {
	if int32(count-l.next.Load()) >= 0 && !l.due.Load() {
		l.due.Store(true)
	}
}

// claim reports whether the attempt beginning now is to be timed, taking
// the probe if one is due. count is the scope's accept count now.
func (l *latency) claim(count uint32) bool {
	if !l.due.Load() || !l.due.CompareAndSwap(true, false) {
		return false
	}
	// Re-arm at once: a probe abandoned by its caller (a cancelled
	// context) must not be the last.
	l.mu.Lock()
	l.next.Store(count + max(l.stride, 1))
	l.mu.Unlock()
	return true
}

// record takes the latency of a probe that succeeded: started and now are
// clock readings, count the scope's accept count, window the scope's.
func (l *latency) record(started, now int64, count uint32, window time.Duration) {
	ns := max(now-started, 0)
	slot := slotOf(now, window)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastAt != 0 && now > l.lastAt {
		// Successes per probeEvery since the last probe set the stride.
		rate := float64(count-l.lastSeen) / float64(now-l.lastAt) // per ns
		l.stride = uint32(min(max(rate*float64(probeEvery), 1), 1<<30))
	}
	l.lastAt, l.lastSeen = now, count
	l.recent = ns
	s := &l.least[slot%rollingSlots]
	if !s.set || s.slot != slot || ns < s.ns {
		s.slot, s.ns, s.set = slot, ns, true
	}
}

// climbing reports whether the scope's recent successes take climbFactor
// times the least latency of the window, or longer: a queue at the server
// is growing. Both of the last two probes must say so, so that one slow
// attempt (a slow replica, a pause) does not. Without a probe there is no
// evidence, and it reports false.
func (l *latency) climbing(now int64, window time.Duration) bool {
	slot := slotOf(now, window)
	l.mu.Lock()
	defer l.mu.Unlock()
	least := int64(-1)
	for i := range l.least {
		s := l.least[i]
		if s.set && s.slot > slot-rollingSlots && s.slot <= slot && (least < 0 || s.ns < least) {
			least = s.ns
		}
	}
	return least >= 0 && l.recent > climbFactor*least
}
