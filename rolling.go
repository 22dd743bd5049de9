package retry

import (
	"sync"
	"sync/atomic"
	"time"
)

// rollingSlots is how many slots a sliding window is cut into: counts leave
// the window a tenth of it at a time.
const rollingSlots = 10

// milli is one event in a rolling count, which counts thousandths so that
// events can be placed in part (see Budget).
const milli = 1000

// rolling counts events over a sliding window of rollingSlots slots, without
// a lock: Adaptive's and Budget's windows, and, with the current slot kept
// besides rollingSlots whole ones (sumLast), a Breaker's. Each slot packs its
// index (its epoch) with its count, so that a slot is reused and counted in
// one atomic step. Slot indexes are absolute (time divided by the slot's
// width), so the zero value is ready to use.
type rolling struct {
	slots [rollingSlots + 1]atomic.Uint64
}

// The low 40 bits of a slot count thousandths, the high 24 hold the slot's
// index modulo 2^24. (An index seen again after 2^24 slots, 194 days of 1 s
// slots, would be read as current: only if the slot was not used in all that
// time, and then it holds at most one slot's old counts.)
const (
	countBits = 40
	countMask = 1<<countBits - 1
	epochMask = 1<<(64-countBits) - 1
)

// add adds delta thousandths (which may be negative) to slot, resetting it
// first if it holds an older slot. Counts never go below zero.
func (r *rolling) add(slot int64, delta int64) {
	w := &r.slots[slot%int64(len(r.slots))]
	for {
		old := w.Load()
		count := int64(0)
		if int64(old>>countBits) == slot&epochMask {
			count = int64(old & countMask)
		}
		next := min(max(count+delta, 0), countMask)
		if w.CompareAndSwap(old, uint64(slot&epochMask)<<countBits|uint64(next)) {
			return
		}
	}
}

// remove takes back n thousandths counted in the window that ends with
// slot, from the newest slots that hold them: a count comes back whatever
// slot it was added in, as long as that slot is still in the window (a
// count that has left the window is gone already).
func (r *rolling) remove(slot int64, n int64) {
	for i := int64(0); i < rollingSlots && slot-i >= 0 && n > 0; i++ {
		s := slot - i
		w := &r.slots[s%int64(len(r.slots))]
		for {
			old := w.Load()
			if int64(old>>countBits) != s&epochMask {
				break // an older slot's counts: outside the window
			}
			take := min(int64(old&countMask), n)
			if take == 0 || w.CompareAndSwap(old, old-uint64(take)) {
				n -= take
				break
			}
		}
	}
}

// sum returns the thousandths counted in the window that ends with slot.
func (r *rolling) sum(slot int64) int64 { return r.sumLast(slot, rollingSlots) }

// sumLast returns the thousandths counted in the n slots (at most
// rollingSlots+1) that end with slot.
func (r *rolling) sumLast(slot int64, n int64) int64 {
	var total int64
	for i := range n {
		s := slot - i
		if s < 0 {
			break
		}
		w := r.slots[s%int64(len(r.slots))].Load()
		if int64(w>>countBits) == s&epochMask {
			total += int64(w & countMask)
		}
	}
	return total
}

// slotOf returns the index of the slot of a window's rolling count that
// holds instant t, a clock's reading in nanoseconds.
func slotOf(t int64, window time.Duration) int64 {
	width := max(int64(window)/rollingSlots, 1)
	return max(t, 0) / width
}

// placement is when a window's pending counts were last placed, or began
// to be counted: the time that the counts taken at the next placement are
// spread over. The zero value has no start, and its first placement counts
// everything pending as recent: begin says when counting began, so that a
// scope or budget healthy for an hour before its first failure does not
// place the hour in the window that ends then (which would hide a failing
// service from throttling, or hand it a window's worth of retries).
type placement struct {
	// take holds mu while it takes the pending counts and the time they
	// spread over, so that both come from the same placement: claimed in
	// two steps, a placement racing another could take an hour's counts
	// and a gap of nothing, and place the hour whole.
	mu sync.Mutex
	at atomic.Int64 // a reading of the clock; 0 = never
}

// started reports whether the placement has a start or a placement.
func (p *placement) started() bool { return p.at.Load() != 0 }

// begin notes now as when counting began, unless it has a start already.
func (p *placement) begin(now int64) { p.at.CompareAndSwap(0, max(now, 1)) }

// take runs claim, which takes the pending counts, and records now as a
// placement, in one step, and returns the share of the counts taken that
// falls in a window ending now (see placeShare).
func (p *placement) take(now int64, window time.Duration, claim func()) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	claim()
	return placeShare(&p.at, now, window)
}

// placeShare records now as the last placement of counts that were pending
// since the previous one, and returns the share of those counts that falls
// in a window ending now, taking them to be spread evenly over the time
// between the two placements.
func placeShare(placed *atomic.Int64, ns int64, window time.Duration) float64 {
	last := placed.Swap(ns)
	if last != 0 && ns-last > int64(window) {
		return float64(window) / float64(ns-last)
	}
	return 1
}
