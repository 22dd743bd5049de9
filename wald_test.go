package retry

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerOpensWithEvidence: at the defaults (20 attempts, rate 0.5) a
// window opens when it holds MinAttempts, at least half of them failed,
// and the failures outnumber the successes by six, the evidence Wald's
// sequential test asks for (see trusted): an outage opens at the 20th
// attempt as it always did, 70 % failures at the 20th too, 60 % only at
// the 30th. The attempts come in a steady pattern, all within one window.
func TestBreakerOpensWithEvidence(t *testing.T) {
	for _, tc := range []struct {
		rate           float64
		opens          int // at which attempt; 0 = never
		failures, succ int // the window then
	}{
		{1, 20, 20, 0},
		{0.7, 20, 14, 6},
		{0.6, 30, 18, 12},
		{0.5, 0, 0, 0},
		{0.3, 0, 0, 0},
	} {
		synctest.Test(t, func(t *testing.T) {
			b := NewBreaker(BreakerOptions{})
			failures, successes := 0, 0
			for i := range 1000 {
				var err error
				// Attempt i fails if it takes the count of failures to
				// the next whole number of rate×attempts.
				if int(float64(i+1)*tc.rate+1e-9) > failures {
					err = errBrk500
					failures++
				} else {
					successes++
				}
				tk, refusal := b.Allow("")
				if refusal != nil {
					t.Fatalf("rate %v: attempt %d refused", tc.rate, i+1)
				}
				tk.Done(t.Context(), err)
				if b.State("") == BreakerOpen {
					if i+1 != tc.opens || failures != tc.failures || successes != tc.succ {
						t.Fatalf("rate %v: opened at attempt %d (%d failed, %d succeeded), want at %d (%d, %d)",
							tc.rate, i+1, failures, successes, tc.opens, tc.failures, tc.succ)
					}
					return
				}
				time.Sleep(time.Millisecond)
			}
			if tc.opens != 0 {
				t.Fatalf("rate %v: never opened, want at attempt %d", tc.rate, tc.opens)
			}
		})
	}
}

// TestBreakerBrownoutOneClient: a client that calls once a second and
// retries each failure 50 ms later (three attempts at most), against a
// service that fails 30 % of attempts at random, for ten hours. Its window
// reaches MinAttempts only with the retries of its failures, so that the
// windows which do have about half their attempts failed: the share alone
// opened this circuit 146 times (in 4 % of its 3,600 windows; retry sim's
// brownout at 1,000 clients measured what that costs). The sequential test
// asks for six failures more than successes, and it opens 11 times (with
// seeds 1 to 6 in a loop like this one: 11 to 37 times, against 163 to
// 312; 7 to 47 while it stayed open 5 s at a time, and successes were
// spread over the time since they were placed). Rare, not never: a window
// is a small sample.
func TestBreakerBrownoutOneClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 30))
		b := NewBreaker(BreakerOptions{})
		opens, attempts, failures := 0, 0, 0
		for range 10 * 3600 {
			for range 3 {
				tk, refusal := b.Allow("")
				if refusal != nil {
					t.Fatal("a closed circuit refused")
				}
				var err error
				if attempts++; rng.Float64() < 0.3 {
					err = errBrk500
					failures++
				}
				tk.Done(t.Context(), err)
				if err == nil || b.State("") == BreakerOpen {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if b.State("") == BreakerOpen {
				opens++
				time.Sleep(b.Delay("")) // then a probe, which closes it 70 % of the time
			}
			time.Sleep(time.Second)
		}
		if share := float64(failures) / float64(attempts); share < 0.29 || share > 0.31 {
			t.Fatalf("%d of %d attempts failed, want about 30%%", failures, attempts)
		}
		if opens > 15 {
			t.Fatalf("opened %d times in ten hours, want at most 15 (11 measured; 146 on the share alone)", opens)
		}
	})
}
