package retrytest

import (
	"sync/atomic"
	"time"
)

// Epoch is where the zero Clock starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a clock a test moves by hand: a breaker's or a limiter's Now,
// read while the test decides when time passes. The zero value reads Epoch.
// It is safe for concurrent use.
type Clock struct {
	start time.Time
	d     atomic.Int64 // how far it has been moved
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{start: start} }

// Now is the time the clock reads.
func (c *Clock) Now() time.Time {
	start := c.start
	if start.IsZero() {
		start = Epoch
	}
	return start.Add(time.Duration(c.d.Load()))
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.d.Add(int64(d)) }
