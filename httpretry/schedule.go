package httpretry

import (
	"iter"
	"math"
	"time"
)

// Schedule is the HXEP-0001 RetrySchedule: the waits before the first,
// second, ... retry, as a Go iterator. It implements retry.Backoff, so a
// schedule is given to a strategy like any backoff:
//
//	retry.NewStandard(retry.StandardOptions{Backoff: httpretry.ExponentialBackoff(200 * time.Millisecond)})
//
// Any iter.Seq[time.Duration] converts to a Schedule. It must yield the same
// sequence every time it is ranged over and be safe for concurrent use; when
// it ends, its last delay repeats. Negative delays count as zero. Schedules
// are not jittered: a fleet of clients on one schedule retries in waves, so
// prefer retry.Exponential with jitter where many clients call one service.
type Schedule iter.Seq[time.Duration]

// Delay returns the schedule's n-th delay (n = 1 for the first retry), the
// last one if the schedule is shorter, or 0 for an empty schedule.
func (s Schedule) Delay(n int, _ time.Duration) time.Duration {
	if s == nil {
		return 0
	}
	var d time.Duration
	i := 0
	for v := range s {
		d, i = v, i+1
		if i >= n {
			break
		}
	}
	return max(d, 0)
}

// WaitFor waits d before every retry.
func WaitFor(d time.Duration) Schedule {
	return func(yield func(time.Duration) bool) {
		for yield(d) {
		}
	}
}

// ExponentialBackoff retries at once, then waits factor, 2×factor,
// 4×factor, ... (HXEP-0001's ExponentialBackoff). The delays saturate at the
// longest time.Duration instead of overflowing; use Cap to bound them.
func ExponentialBackoff(factor time.Duration) Schedule {
	return func(yield func(time.Duration) bool) {
		if !yield(0) {
			return
		}
		d := max(factor, 0)
		for yield(d) {
			if d > math.MaxInt64/2 {
				d = math.MaxInt64
			} else {
				d *= 2
			}
		}
	}
}

// Cap bounds every delay of s by limit.
func (s Schedule) Cap(limit time.Duration) Schedule {
	return func(yield func(time.Duration) bool) {
		for d := range s {
			if !yield(min(d, limit)) {
				return
			}
		}
	}
}
