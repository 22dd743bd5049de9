package retry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// throughput runs workers that each call Do on a in a loop, every call
// taking 10 ms; from rampAt on, rampWorkers more join them. The first call
// to start at or after throttleAt fails once with a throttling error. It
// returns the calls completed in each 500 ms of the run, and when the
// limiter last limited.
func throughput(t *testing.T, a *Adaptive, workers, rampWorkers int, rampAt, throttleAt, run time.Duration) (buckets []int, lastLimiting time.Duration) {
	t.Helper()
	var (
		mu        sync.Mutex
		counts    = make([]int, run/(500*time.Millisecond))
		throttled atomic.Bool
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	errThrottle := Throttled(errors.New("429"))
	worker := func() {
		for ctx.Err() == nil {
			err := Do(ctx, a, func(context.Context) error {
				begun := time.Since(start)
				time.Sleep(10 * time.Millisecond)
				if begun >= throttleAt && throttled.CompareAndSwap(false, true) {
					return errThrottle
				}
				return nil
			})
			if err == nil {
				mu.Lock()
				if i := int(time.Since(start) / (500 * time.Millisecond)); i < len(counts) {
					counts[i]++
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(worker)
	}
	wg.Go(func() {
		time.Sleep(rampAt)
		for range rampWorkers {
			wg.Go(worker)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, limiting := a.Rate(""); limiting {
				lastLimiting = time.Since(start)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	wg.Wait()
	return counts, lastLimiting
}

// TestAdaptiveThrottleCutsTheRateSent: one throttle answer cuts what a
// client completes to about the CUBIC beta of what it sent just before, not
// to a fraction of it, whether the client is a second old, ramped up a
// second before, or steady; and the limiter lets go within twice the
// curve's recovery time at that rate after the throttling stopped.
func TestAdaptiveThrottleCutsTheRateSent(t *testing.T) {
	for _, tc := range []struct {
		name               string
		workers, ramp      int
		rampAt, throttleAt time.Duration
	}{
		{"a client 1 s old", 16, 0, time.Hour, time.Second},
		{"a client that ramped up 1 s before", 1, 16, 10 * time.Second, 11 * time.Second},
		{"a steady client", 16, 0, time.Hour, 11 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive(AdaptiveOptions{})
				run := tc.throttleAt + 30*time.Second
				counts, lastLimiting := throughput(t, a, tc.workers, tc.ramp, tc.rampAt, tc.throttleAt, run)
				before := counts[tc.throttleAt/(500*time.Millisecond)-1]
				t.Logf("calls per 500 ms from %v: %v; the limiter limited until %v", tc.throttleAt-time.Second, counts[tc.throttleAt/(500*time.Millisecond)-2:], lastLimiting)
				for i := int(tc.throttleAt / (500 * time.Millisecond)); i < len(counts)-1; i++ {
					if 2*counts[i] < before {
						t.Fatalf("%d calls in the 500 ms from %v, %d just before the throttle: cut below half\n%v",
							counts[i], time.Duration(i)*500*time.Millisecond, before, counts)
					}
				}
				// At 1,600 calls a second the curve climbs back in about 10.6 s
				// (cube root of 1600 × 0.3 / 0.4), and the limiter lets go after
				// twice that.
				if after := lastLimiting - tc.throttleAt; after > 23*time.Second {
					t.Fatalf("the limiter still limited %v after the only throttle", after)
				}
			})
		})
	}
}
