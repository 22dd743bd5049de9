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
// probeEvery, and at least one every maxStride successes. A success counts
// towards the next probe with the atomic add the success path makes
// anyway; the success that reaches the count raises due, and the next
// attempt to begin takes the probe. A client that sends a request a second
// times every one of them; one that sends ten thousand a second, one in a
// thousand; one that sends a million a second, one in 1,024. The zero
// value is ready to use, with a probe due once the first success arms it.
type latency struct {
	due  atomic.Bool   // the next attempt to begin is timed
	next atomic.Uint32 // the accept count (outcomes' low word) that raises due

	mu sync.Mutex
	// at holds when the last two probes ended, the newest last (0 = none),
	// and sent the attempts counted then (outcomes' high word): what the
	// client sent since, for the send-rate limiter.
	at   [2]int64
	sent [2]uint32
	// seen is the accept count at the last probe, for the stride.
	seen   uint32
	stride uint32 // successes between probes; 0 = 1
	// overdue: the newest probe came staleProbe or more after the one
	// before, which the stride had foreseen within probeEvery: the client
	// slowed down or paused between them, so the older no longer tells
	// what it sends.
	overdue bool
	latest  float64 // the last probe's latency, ns; 0 = none
	// typical is the latency of the probes before the latest, smoothed
	// over about a window of time (each probe weighs the time since the
	// one before, over the window): the baseline a climb is measured from.
	// The latest is left out, so that a climb is seen before it is
	// averaged in, and a time constant, not a count, keeps a client that
	// probes ten times a second from averaging a climb in within a second.
	typical float64
}

// Probes, and the reading of them.
const (
	// probeEvery is the time between probes a scope aims for.
	probeEvery = 100 * time.Millisecond
	// climbFactor is how many times its typical latency the latest probe
	// must take for the latency to count as climbing.
	climbFactor = 4
	// staleProbe is how long after the last probe one foreseen within
	// probeEvery is taken as overdue: the client slowed down or paused.
	staleProbe = 10 * probeEvery
	// maxStride bounds the successes between probes, so that a client
	// that was fast and slows down is probed again soon: at a million
	// successes a second, a probe every millisecond, which costs little.
	maxStride = 1024
)

// sawSuccess is told of every success, with the accept count the success
// brought the scope's outcomes to; it raises due when a probe is owed.
// Counts wrap, so the comparison is of their difference: once next is
// passed, every success raises due until an attempt takes the probe.
func (l *latency) sawSuccess(count uint32) {
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
// clock readings, total the scope's outcomes (attempts and accepts), window
// the span the typical latency is smoothed over.
func (l *latency) record(started, now int64, total uint64, window time.Duration) {
	ns := float64(max(now-started, 0))
	count := uint32(total)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.overdue = false
	if last := l.at[1]; last != 0 && now > last {
		l.overdue = l.stride > 1 && now-last >= int64(staleProbe)
		// Successes per probeEvery since the last probe set the stride.
		rate := float64(count-l.seen) / float64(now-last) // per ns
		l.stride = uint32(min(max(rate*float64(probeEvery), 1), maxStride))
	}
	switch {
	case l.latest == 0:
	case l.typical == 0:
		l.typical = l.latest
	default:
		weight := min(float64(max(now-l.at[1], 0))/float64(window), 1)
		l.typical += (l.latest - l.typical) * weight
	}
	l.seen, l.latest = count, max(ns, 1) // 0 means none
	l.at[0], l.sent[0] = l.at[1], l.sent[1]
	l.at[1], l.sent[1] = now, uint32(total>>32)
}

// healthy reports whether the probes show the scope's successes answered
// in their usual time, recently: at least two probes, the latest within
// window of now and not climbFactor times the typical latency of those
// before it. A climb is a queue growing at the server; no recent probe is
// no evidence either way (a client that sends a request every ten seconds
// cannot tell the onset of an overload from one bad replica), and the
// caller takes it as no evidence of health.
func (l *latency) healthy(now int64, window time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.typical > 0 && now-l.at[1] <= int64(window) && l.latest <= climbFactor*l.typical
}

// sendRate returns the attempts per second the scope sent recently: those
// counted since the older of the last two probes, over the time since it
// (a probe comes about every probeEvery, so that spans one or two of them,
// or a few requests of a client that sends seldom), and ok false when no
// probe has been made. attempts is the scope's attempt count now.
//
// A client that slows down or pauses leaves a gap the stride did not
// foresee: the probes before it would spread what the client sends now
// over the gap, and a throttle would cut it to a fraction of its rate. So
// the older probe is left out when the newest came overdue, and when the
// next is overdue already, what was sent since the newest is spread over
// at most staleProbe: the client sent it after a gap of unknown length.
// An answer that shares the newest probe's clock reading, which no span
// since the newest can measure, is measured from the older probe unless
// the newest came overdue; then there is no measurement (ok false).
func (l *latency) sendRate(now int64, attempts uint32) (rate float64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	newest := l.at[1]
	if newest == 0 {
		return 0, false
	}
	if l.stride > 1 && now-newest >= int64(staleProbe) {
		return float64(sentSince(attempts, l.sent[1])) / seconds(min(now-newest, int64(staleProbe))), true
	}
	i := 0 // the older probe: an answer sharing the newest's clock reading has no span since it
	if l.at[0] == 0 || l.overdue {
		i = 1
	}
	if now <= l.at[i] {
		return 0, false
	}
	return float64(sentSince(attempts, l.sent[i])) / seconds(now-l.at[i]), true
}

// sentSince returns the attempts counted between the counts then and now,
// which wrap; 0 if then is ahead (a probe recorded concurrently, after
// now was read).
func sentSince(now, then uint32) uint32 {
	if int32(now-then) < 0 {
		return 0
	}
	return now - then
}
