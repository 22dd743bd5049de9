package retry

// breakerWindow counts a closed circuit's attempts and successes over a
// sliding window of breakerSlots slots, each a tenth of Window wide, the
// current one included: a count stays counted for at least Window, and at
// most a tenth more. Its counts are rolling ones, Adaptive's and Budget's
// kind; it is written under its scope's mu, on failures and when successes
// are placed.
type breakerWindow struct {
	attempts, successes rolling
	placed              int64 // when successes were last placed; 0 = never
}

// breakerSlots: Window in tenths, and the current tenth.
const breakerSlots = rollingSlots + 1

// add counts in the slot of time index, which must be within the window.
func (w *breakerWindow) add(index int64, attempts, successes float64) {
	w.attempts.add(index, int64(attempts*milli))
	if successes > 0 {
		w.successes.add(index, int64(successes*milli))
	}
}

// sum returns the counts of the window whose newest slot is index.
func (w *breakerWindow) sum(index int64) (attempts, successes float64) {
	return float64(w.attempts.sumLast(index, breakerSlots)) / milli,
		float64(w.successes.sumLast(index, breakerSlots)) / milli
}

// place puts the successes counted since the last placement in the
// window at now, one of which came now if own. A closed circuit does not
// read the clock for every success: it places them when step of them are
// pending, and adapts step so that a placement's successes span at most
// an eighth of a slot of the window: each success is placed as it comes
// until they come 64 a slot or more, and the busier the scope, the more
// wait for a placement (up to breakerPlaceEvery). When each came is not
// known, they are placed in the slot of the previous placement, the
// earliest they may have come, so that none counts past its time (see
// Window): after a gap of minutes, none of them is counted. Callers hold
// mu.
func (a breakerAt) place(now int64, own bool) {
	sc, w := a.sc, &a.sc.window
	total := sc.successes.Load()
	n := float64(total - sc.taken.Load()) // the counter wraps; the difference does not
	from := w.placed
	if from == 0 {
		from = sc.born.Load()
	}
	sc.taken.Store(total)
	w.placed = now
	width := a.b.slotWidth()
	slot, at := now/width, from/width
	step := max(sc.step.Load(), 1)
	switch span := now - from; {
	case span > width/8:
		sc.step.Store(max(step/2, 1))
	case span <= width/64 && n >= float64(step):
		sc.step.Store(min(2*step, breakerPlaceEvery))
	}
	if n == 0 {
		return
	}
	if own {
		w.add(slot, 1, 1) // this one came now
		n--
	}
	if from <= 0 || from >= now {
		at = slot
	}
	if n > 0 && at > slot-breakerSlots {
		w.add(at, n, n)
	}
}

// breakerPlaceEvery is the most successes a closed circuit counts between
// placements in its window (a power of two): at high rates, it reads the
// clock for one success in that many.
const breakerPlaceEvery = 64

// slotWidth is the width of the window's slots, in nanoseconds.
func (b *Breaker) slotWidth() int64 { return max(int64(b.window())/rollingSlots, 1) }
