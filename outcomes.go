package retry

import (
	"sync/atomic"
	"time"
)

// outcomes counts attempts and the ones the service accepted over a sliding
// window, for client-side throttling. Counting a success reads no clock and
// takes no lock: it is one atomic add to a running total, and the counts
// added since the last placement are placed in the window when a failure
// next consults it, spread evenly over the time since then (so successes
// long before a failure weigh less than successes just before it). The
// zero value is ready to use.
type outcomes struct {
	// total packs every attempt counted (high 32 bits) and every accept
	// (low 32 bits), each wrapping; taken is the total when counts were
	// last placed. The low word is the scope's running accept count, which
	// the latency probes read. (An accept that wraps the low word carries
	// one phantom attempt into the high one: one in four billion.)
	total    atomic.Uint64
	taken    atomic.Uint64
	placed   placement // successes never take its lock
	attempts rolling
	accepts  rolling
}

const (
	oneAttempt = 1 << 32
	oneAccept  = 1
	// placeEvery bounds the pending accepts between placements, far from
	// overflowing 32 bits: a success that brings them to a multiple of it
	// asks its caller to place them.
	placeEvery = 1 << 24
)

// success counts an accepted attempt and returns the new total. The caller
// should place the counts when the total's accepts reach a multiple of
// placeEvery (see full): rarely, once every placeEvery successes without a
// failure.
func (o *outcomes) success() uint64 {
	return o.total.Add(oneAttempt | oneAccept)
}

// full reports whether total, as success returned it, asks for the counts
// to be placed.
func full(total uint64) bool { return total&(placeEvery-1) == 0 }

// failure counts a failed attempt at now and returns the attempts and
// accepts in the window that ends then.
func (o *outcomes) failure(now int64, window time.Duration) (attempts, accepts float64) {
	o.total.Add(oneAttempt)
	return o.place(now, window, oneAttempt)
}

// accept counts an accepted attempt at now, as failure counts a failed
// one, and returns the window's counts.
func (o *outcomes) accept(now int64, window time.Duration) (attempts, accepts float64) {
	o.total.Add(oneAttempt | oneAccept)
	return o.place(now, window, oneAttempt|oneAccept)
}

// count places the pending counts and returns the attempts and accepts in
// the window that ends at now.
func (o *outcomes) count(now int64, window time.Duration) (attempts, accepts float64) {
	return o.place(now, window, 0)
}

// place is count for an answer at now, own, that is among the pending
// counts: it happened now, so it is placed whole, and only the rest is
// spread over the time since the last placement (the first failure after
// an hour's quiet counts as one attempt, not as a window's share of the
// hour). If a concurrent placement took own first, it spread own with the
// rest, and this one places whole only what it took: nothing is counted
// twice.
func (o *outcomes) place(now int64, window time.Duration, own uint64) (attempts, accepts float64) {
	slot := slotOf(now, window)
	var last, t uint64
	share := o.placed.take(now, window, func() {
		last, t = o.taken.Load(), o.total.Load()
		o.taken.Store(t)
	})
	if t != last {
		attempts, accepts := uint32(t>>32)-uint32(last>>32), uint32(t)-uint32(last)
		ownAttempts, ownAccepts := min(uint32(own>>32), attempts), min(uint32(own), accepts)
		o.attempts.add(slot, int64((float64(attempts-ownAttempts)*share+float64(ownAttempts))*milli))
		o.accepts.add(slot, int64((float64(accepts-ownAccepts)*share+float64(ownAccepts))*milli))
	}
	return float64(o.attempts.sum(slot)) / milli, float64(o.accepts.sum(slot)) / milli
}
