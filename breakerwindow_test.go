package retry

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerWindowTimes: a success counts from when it was reported, not
// from when it was placed in the window. A client that calls once a second
// holds about Window's worth of attempts, fewer than MinAttempts: ten
// seconds of successes, then failures for as long as one likes, never
// open its circuit. (Placed all at the first failure, the successes would
// stay counted ten more seconds, and twenty attempts, half failed, would
// open it after ten failures.)
func TestBreakerWindowTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{})
		for i := range 60 {
			tk, err := b.Allow("")
			if err != nil {
				t.Fatalf("second %d: %v", i, err)
			}
			var outcome error
			if i >= 10 {
				outcome = errBrk500
			}
			tk.Done(t.Context(), outcome)
			time.Sleep(time.Second)
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("one call a second: %v, want closed (at most 11 attempts in a window)", got)
		}
	})
}

// TestBreakerWindowAtLeast: a count stays counted for at least Window.
// Ten calls a second, successful for ten seconds and then failing: the
// circuit opens when the failures exceed the successes of the last Window
// by the six the sequential test asks for (the call at 15.5 s, the loop
// below sees it 0.1 s later), sooner with a few failures more (retries),
// but never before the failures equal those successes (at 15 s); and once
// the successes are more than Window old they no longer count. (Before
// successes were placed as they came, the 50 successes from 5 s to 10 s
// counted as 49: it opened a call early.)
func TestBreakerWindowAtLeast(t *testing.T) {
	for extra, want := range map[int]time.Duration{0: 15600 * time.Millisecond, 2: 15400 * time.Millisecond, 9: 15100 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			b := NewBreaker(BreakerOptions{})
			call := func(outcome error) {
				if tk, err := b.Allow(""); err == nil {
					tk.Done(t.Context(), outcome)
				}
			}
			for range 100 {
				call(nil)
				time.Sleep(100 * time.Millisecond)
			}
			for range extra {
				call(errBrk500) // the retries of the first failing call
			}
			for b.State("") == BreakerClosed {
				call(errBrk500)
				time.Sleep(100 * time.Millisecond)
			}
			// The successes of the window's first second, from 0 to 1 s,
			// still counted until 11 s: half failed at 15 s, not sooner.
			if opened := time.Since(start); opened != want {
				t.Errorf("%d failures more: opened at %v, want at %v", extra, opened, want)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 10})
		for range 10 {
			tk, _ := b.Allow("")
			tk.Done(t.Context(), nil)
		}
		time.Sleep(10 * time.Second) // within a tenth more than Window: still counted
		for range 15 {
			tk, _ := b.Allow("")
			tk.Done(t.Context(), errBrk500)
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("15 failures after 10 successes 10 s old: %v, want closed (the successes count)", got)
		}
		tk, _ := b.Allow("")
		tk.Done(t.Context(), errBrk500)
		if got := b.State(""); got != BreakerOpen {
			t.Fatalf("16 failures after 10 successes 10 s old: %v, want open", got)
		}
		b = NewBreaker(BreakerOptions{MinAttempts: 10})
		for range 10 {
			tk, _ := b.Allow("")
			tk.Done(t.Context(), nil)
		}
		time.Sleep(11 * time.Second) // gone
		for range 9 {
			tk, _ := b.Allow("")
			tk.Done(t.Context(), errBrk500)
		}
		if got := b.State(""); got != BreakerClosed {
			t.Fatalf("9 failures, the successes gone: %v, want closed", got)
		}
	})
}

// TestBreakerWindowSpread: successes placed together are spread over the
// time since the previous placement; those older than the window are
// gone.
func TestBreakerWindowSpread(t *testing.T) {
	k := newBrk(t, BreakerOptions{MinAttempts: 1})
	a := k.b.at("")
	for range 40 { // 40 successes over 20 s, placed together at the end
		a.reportSuccess(0)
		k.clock.Advance(500 * time.Millisecond)
	}
	now := k.b.now()
	a.sc.mu.Lock()
	a.place(now, false)
	attempts, successes := a.sc.window.sum(now / k.b.slotWidth())
	a.sc.mu.Unlock()
	// Placed at 20 s, spread from 0 to 20 s; 20 s is a slot's start, so
	// the window holds the last 10 s of them exactly: half.
	if attempts != successes || attempts < 19.99 || attempts > 20.01 {
		t.Fatalf("window holds %.2f attempts, %.2f successes; want 20 and 20", attempts, successes)
	}
}

// TestBreakerOldSuccessesDoNotCount: successes older than the window count
// for nothing, whatever the gaps between calls, whether they came one at a
// time, in a burst too fast to read the clock for each, or after a probe
// closed the circuit. With MinAttempts 3 and a minute's Window, failures
// two minutes after the successes open the circuit at the third, as if
// the successes had never been. (The successes were spread over the time
// since the breaker last placed them, so that a share of them stayed in
// the window: 4 successes then needed 7 failures; a burst of 10,000, 3
// failures more than a window's worth of successes.)
func TestBreakerOldSuccessesDoNotCount(t *testing.T) {
	for name, successes := range map[string]int{"a few": 4, "a burst": 10000} {
		for _, afterProbe := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				b := NewBreaker(BreakerOptions{MinAttempts: 3, Window: time.Minute})
				call := func(outcome error) {
					t.Helper()
					tk, err := b.Allow("")
					if err != nil {
						t.Fatalf("%s: refused while %v", name, b.State(""))
					}
					tk.Done(t.Context(), outcome)
				}
				if afterProbe {
					for range 3 {
						call(errBrk500)
					}
					time.Sleep(b.Delay(""))
					call(nil) // the probe closes the circuit
					if b.State("") != BreakerClosed {
						t.Fatalf("after a successful probe: %v", b.State(""))
					}
				}
				for range successes {
					call(nil)
					if successes < 10 {
						time.Sleep(time.Second)
					}
				}
				time.Sleep(2 * time.Minute)
				for i := range 3 {
					if b.State("") != BreakerClosed {
						t.Fatalf("%s successes (after a probe: %v), two minutes old: open after %d failures, want 3", name, afterProbe, i)
					}
					call(errBrk500)
				}
				if b.State("") != BreakerOpen {
					t.Fatalf("%s successes (after a probe: %v), two minutes old: %v after 3 failures, want open", name, afterProbe, b.State(""))
				}
			})
		}
	}
}

// TestBreakerRecentSuccessesCount: the successes within the window still
// count, at any rate: a burst too fast to read the clock for each, half a
// minute before the failures, keeps the circuit closed.
func TestBreakerRecentSuccessesCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 3, Window: time.Minute})
		for range 1000 {
			tk, _ := b.Allow("")
			tk.Done(t.Context(), nil)
		}
		time.Sleep(30 * time.Second)
		for range 900 {
			tk, err := b.Allow("")
			if err != nil {
				t.Fatalf("refused after 1000 successes half a minute old and fewer failures: %v", err)
			}
			tk.Done(t.Context(), errBrk500)
		}
	})
}
