package retry

import (
	"sync/atomic"
	"time"
)

// clock is the time of a strategy's windows and limiter, in nanoseconds: the
// wall clock's reading when it was first read, advanced since by the
// monotonic clock that time.Now carries. A wall clock that steps (an NTP
// correction, a virtual machine resumed) therefore moves none of its
// windows: without this, a step back would leave a send-rate limiter
// waiting for the wall clock to catch up with its last throttle. While the
// wall clock does not step, it reads as the wall clock does, in nanoseconds
// since the Unix epoch.
//
// A clock the caller gives (Now in the options, for simulations and tests)
// has no monotonic reading; a step back in it is absorbed instead: time
// goes on from where it was, and the step is added to every later reading.
// The zero value is ready to use.
type clock struct {
	origin atomic.Pointer[time.Time] // the first reading
	last   atomic.Int64              // the latest reading returned
	offset atomic.Int64              // the steps back absorbed so far
}

// stepBack is how far behind the latest reading one must be to count as
// the clock stepping back; readings taken at about the same time by
// concurrent callers may arrive in any order, and are not steps.
const stepBack = int64(time.Millisecond)

// read returns the time now, from now or time.Now, in nanoseconds, never
// before an earlier reading, and never negative (a clock before 1970 is
// wrong, not a reason to break a window).
func (c *clock) read(now func() time.Time) int64 {
	var t time.Time
	if now != nil {
		t = now()
	} else {
		t = time.Now()
	}
	o := c.origin.Load()
	if o == nil {
		// A copy: taking t's address would move every reading's t to the
		// heap, the first's only is needed there.
		first := new(time.Time)
		*first = t
		c.origin.CompareAndSwap(nil, first)
		o = c.origin.Load()
	}
	// Sub uses the monotonic readings when both times have one; between
	// readings of a caller's clock it is the difference of wall times.
	ns := o.UnixNano() + int64(t.Sub(*o)) + c.offset.Load()
	last := c.last.Load()
	switch {
	case ns >= last:
		if ns > last {
			c.last.CompareAndSwap(last, ns) // a lost race leaves a reading as recent
		}
	case last-ns > stepBack:
		c.offset.Add(last - ns)
		ns = last
	default:
		ns = last
	}
	return max(ns, 0)
}
