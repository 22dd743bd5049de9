package retry

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A rolling count holds what was added in the slot asked about and the
// rollingSlots-1 before it: a count leaves the window when its slot is ten
// slots old, a slot at a time, and a slot's place is reused for the slot ten
// later, which starts from zero.
func TestRollingWindow(t *testing.T) {
	var r rolling
	for s := int64(100); s < 110; s++ {
		r.add(s, (s-99)*milli) // slot 100 holds 1, slot 109 holds 10
	}
	wantSum(t, &r, 109, 55*milli, "1+2+...+10")
	wantSum(t, &r, 104, 15*milli, "the window that ends at 104 holds 100..104")
	wantSum(t, &r, 110, 54*milli, "slot 100 has left the window")
	wantSum(t, &r, 117, 19*milli, "only 108 and 109 are left")
	wantSum(t, &r, 119, 0, "every slot has left the window")

	// Slot 110 takes slot 100's place: it starts from zero, not from 1.
	r.add(110, 7*milli)
	wantSum(t, &r, 110, 61*milli, "110 starts from zero in 100's place")
	// Adding to a slot adds up; a place that holds an older slot, or a
	// later one, is skipped by a sum even when no add reused it.
	r.add(110, 3*milli)
	r.add(125, milli) // 125 takes 105's place; 116..124 were never used
	wantSum(t, &r, 125, milli, "the places of 116..124 hold older slots")
	wantSum(t, &r, 119, 10*milli, "110 holds 10, 115's place holds 125")
}

// The first slots of a clock count from zero: the window that ends at slot
// 3 holds slots 0..3, and a negative slot is never read.
func TestRollingEarlySlots(t *testing.T) {
	var r rolling
	r.add(0, milli)
	r.add(3, 2*milli)
	wantSum(t, &r, 3, 3*milli, "the window that ends at 3 holds 0..3")
	wantSum(t, &r, 9, 3*milli, "the window that ends at 9 holds 0..9")
	wantSum(t, &r, 10, 2*milli, "slot 0 has left the window")
}

// A count never goes below zero nor past its 40 bits: a negative add takes
// what the slot holds at most, and a huge one stops at the mask rather than
// spilling into the slot's index.
func TestRollingAddBounds(t *testing.T) {
	var r rolling
	r.add(7, 2*milli)
	r.add(7, -5*milli)
	wantSum(t, &r, 7, 0, "2 then -5 floors at zero")
	r.add(7, milli)
	wantSum(t, &r, 7, milli, "no debt kept below zero")
	// The same at the last index before the epoch wraps, whose bits are all
	// ones: a count below zero would spill into them and read as current.
	last := int64(epochMask)
	r.add(last, 2*milli)
	r.add(last, -5*milli)
	wantSum(t, &r, last, 0, "2 then -5 in the last slot of the epoch")
	r.add(8, countMask)
	r.add(8, countMask)
	wantSum(t, &r, 8, countMask+milli, "slot 8 saturated, slot 7's 1")
	r.add(8, -milli)
	wantSum(t, &r, 8, countMask, "a saturated slot less 1")
}

// remove takes a count back from the newest slots of the window that hold
// it, whatever slot it was added in, never more than the window holds, and
// never from a slot that has left the window.
func TestRollingRemove(t *testing.T) {
	var r rolling
	r.add(20, 5*milli)
	r.add(22, 2*milli)
	r.add(25, 1*milli)

	r.remove(25, 2*milli) // 1 from 25, then 1 from 22
	wantSum(t, &r, 25, 6*milli, "after removing 2 of 8")
	wantSum(t, &r, 22, 6*milli, "20 untouched, 22 down to 1")
	r.remove(29, 100*milli) // more than the window holds: all of it, no debt
	wantSum(t, &r, 29, 0, "removing more than the window holds takes all of it")
	r.add(29, milli)
	wantSum(t, &r, 29, milli, "no debt kept")

	// A slot that has left the window gives nothing back, even when its
	// place has not been reused.
	var old rolling
	old.add(40, 4*milli)
	old.add(45, 1*milli)
	old.remove(50, 3*milli) // the window 41..50 holds 45's 1 only
	wantSum(t, &old, 49, 4*milli, "40 must keep its 4, 45 give its 1")
	// Slots before zero are not visited.
	var early rolling
	early.add(0, milli)
	early.remove(1, 5*milli)
	wantSum(t, &early, 1, 0, "slot 0 gave its 1")
}

// A slot keeps its index modulo 2^24: a clock read past that wraps the
// index, and the window still holds exactly its slots across the wrap.
func TestRollingEpochWraps(t *testing.T) {
	var r rolling
	base := int64(1<<(64-countBits)) - 5 // the last five indexes before the wrap
	for s := base; s < base+10; s++ {
		r.add(s, milli)
	}
	wantSum(t, &r, base+9, 10*milli, "ten slots across the wrap")
	wantSum(t, &r, base+12, 7*milli, "three slots later")
	// A much later clock, far past several wraps, is one more slot index.
	far := int64(3<<(64-countBits)) + 17
	r.add(far, 2*milli)
	r.add(far, 3*milli)
	wantSum(t, &r, far, 5*milli, "two adds far past several wraps")
}

// slotOf cuts a window into rollingSlots slots of the clock's readings; a
// window too short to cut is one nanosecond a slot, and a reading before
// the clock's zero is slot 0.
func TestSlotOf(t *testing.T) {
	tests := []struct {
		t      int64
		window time.Duration
		want   int64
	}{
		{0, 10 * time.Second, 0},
		{int64(time.Second) - 1, 10 * time.Second, 0},
		{int64(time.Second), 10 * time.Second, 1},
		{int64(95 * time.Second), 10 * time.Second, 95},
		{int64(95 * time.Second), time.Minute, 15},
		{12345, 5, 12345},
		{12345, 0, 12345},
		{12345, -time.Second, 12345},
		{-1, 10 * time.Second, 0},
		{-5, 0, 0},
	}
	for _, tt := range tests {
		if got := slotOf(tt.t, tt.window); got != tt.want {
			t.Errorf("slotOf(%d, %v) = %d, want %d", tt.t, tt.window, got, tt.want)
		}
	}
}

// placeShare spreads counts pending since the last placement over the time
// since then: all of them fall in a window that reaches back that far, a
// window's share of them otherwise; the first placement has no start, so
// all of it counts. Each call is the next one's start.
func TestPlaceShare(t *testing.T) {
	const w = 10 * time.Second
	var placed atomic.Int64
	steps := []struct {
		now  time.Duration
		want float64
	}{
		{100 * time.Second, 1},   // the first placement, long after the clock's zero
		{110 * time.Second, 1},   // exactly a window since
		{150 * time.Second, .25}, // 40 s since: a window holds a quarter
		{151 * time.Second, 1},
		{251 * time.Second, .1},
	}
	for _, st := range steps {
		if got := placeShare(&placed, int64(st.now), w); got != st.want {
			t.Fatalf("at %v: share = %v, want %v", st.now, got, st.want)
		}
		if got := placed.Load(); got != int64(st.now) {
			t.Fatalf("at %v: the placement recorded %v", st.now, time.Duration(got))
		}
	}
}

// Adds from many goroutines at once lose nothing, nor do removes: a slot's
// index and count change in one atomic step, so that when a new slot takes
// an old one's place, the reset races with no add.
func TestRollingConcurrentAdds(t *testing.T) {
	var r rolling
	const workers, adds = 8, 50000
	run := func(f func(g, i int)) { together(workers, adds, f) }
	run(func(g, i int) { r.add(int64(990+(i+g)%4), milli) })
	if got, want := r.sum(993), int64(workers*adds*milli); got != want {
		t.Fatalf("sum = %d, want %d: concurrent adds were lost", got, want)
	}
	// Slots 1000..1003 take the places of 990..993: every worker's first
	// add to each resets it, racing with the others' adds.
	run(func(g, i int) { r.add(int64(1000+(i+g)%4), milli) })
	if got, want := r.sum(1003), int64(workers*adds*milli); got != want {
		t.Fatalf("sum = %d, want %d: adds racing with a slot's reset were lost, or the old slot kept", got, want)
	}
	run(func(g, i int) { r.remove(1003, milli) })
	wantSum(t, &r, 1003, 0, "every count removed concurrently")
}

// wantSum fails the test unless r's window that ends with slot holds want
// thousandths; why says what the count shows.
func wantSum(t *testing.T, r *rolling, slot, want int64, why string) {
	t.Helper()
	if got := r.sum(slot); got != want {
		t.Fatalf("sum(%d) = %d, want %d: %s", slot, got, want, why)
	}
}

// together calls f(g, i) for every i below n in each of workers goroutines
// g, started at once rather than one after another, so that their calls
// overlap, and returns when all are done.
func together(workers, n int, f func(g, i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range workers {
		wg.Go(func() {
			<-start
			for i := range n {
				f(g, i)
			}
		})
	}
	close(start)
	wg.Wait()
}
