package retry

import (
	"sync/atomic"
	"time"
)

// outcomes counts attempts and the ones the service accepted over a sliding
// window, for client-side throttling. Counting a success reads no clock and
// takes no lock: it is one atomic add to a pending word, and pending counts
// are placed in the window when a failure next consults it, spread evenly
// over the time since the last placement (so successes long before a
// failure weigh less than successes just before it). The zero value is ready
// to use.
type outcomes struct {
	// pending packs attempts (high 32 bits) and accepts (low 32 bits) not
	// yet placed in the window.
	pending  atomic.Uint64
	placed   atomic.Int64 // when pending counts were last placed, ns since the Unix epoch; 0 = never
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

// success counts an accepted attempt. It reports whether the pending counts
// have grown enough that the caller should place them (rarely: once every
// placeEvery successes without a failure).
func (o *outcomes) success() bool {
	return o.pending.Add(oneAttempt|oneAccept)&(placeEvery-1) == 0
}

// failure counts a failed attempt at now and returns the attempts and
// accepts in the window that ends then.
func (o *outcomes) failure(now time.Time, window time.Duration) (attempts, accepts float64) {
	o.pending.Add(oneAttempt)
	return o.count(now, window)
}

// count places the pending counts and returns the attempts and accepts in
// the window that ends at now.
func (o *outcomes) count(now time.Time, window time.Duration) (attempts, accepts float64) {
	slot := slotOf(now, window)
	p := o.pending.Swap(0)
	share := placeShare(&o.placed, now, window)
	if p != 0 {
		o.attempts.add(slot, int64(float64(p>>32)*share*milli))
		o.accepts.add(slot, int64(float64(p&(1<<32-1))*share*milli))
	}
	return float64(o.attempts.sum(slot)) / milli, float64(o.accepts.sum(slot)) / milli
}
