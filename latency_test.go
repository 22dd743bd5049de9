package retry

import (
	"context"
	"errors"
	"github.com/retrykit/retry/internal/sharedevidence"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// timedPass runs one successful request in scope that takes latency on
// clock, as the loop would: the token is acquired before the attempt and
// recorded after it.
func timedPass(t *testing.T, a *Adaptive, clock *handClock, scope string, latency time.Duration) {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	clock.Advance(latency)
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
}

var (
	errAdaptiveNotFound = WithInfo(errors.New("NOT_FOUND"), Info{Safety: Unsafe, Fault: FaultClient})
	errAdaptiveAllowed  = WithInfo(errors.New("DEADLINE_EXCEEDED, retry allowed"), Info{Safety: Safe, Timeout: true, Fault: FaultServer, Allowed: true})
	alwaysRefuse        = func() float64 { return 0 } // client-side throttling refuses at any probability above 0
)

// TestAdaptiveRetriesTimeoutsOfAHealthyService: a timeout among fast
// successes (one bad replica, one slow attempt) is retried. A client with
// no recent timed success has no evidence of health and does not retry
// one, unless RetryTimeouts says to.
func TestAdaptiveRetriesTimeoutsOfAHealthyService(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	if err := failOnce(t, a, "fresh", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("a fresh scope's first timeout: %v, want ErrNotRetryable", err)
	}
	if err := failOnce(t, NewAdaptive(AdaptiveOptions{RetryTimeouts: true}), "fresh", errAdaptiveTimeout); err != nil {
		t.Fatalf("a fresh scope's first timeout with RetryTimeouts: %v, want a retry", err)
	}
	for i := range 100 {
		timedPass(t, a, clock, "api", 5*time.Millisecond)
		clock.Advance(100 * time.Millisecond)
		if i%10 == 9 { // one attempt in ten times out: a black-holed replica of ten
			if err := failOnce(t, a, "api", errAdaptiveTimeout); err != nil {
				t.Fatalf("timeout %d among fast successes: %v, want a retry", i/10+1, err)
			}
		}
	}
}

// TestAdaptiveRefusesTimeoutsOfAnOverloadedService: a timeout is not
// retried when the latency of successes has climbed (a queue builds at the
// server), nor when most of the window's attempts time out; the server's
// explicit permission and RetryTimeouts lift the refusal.
func TestAdaptiveRefusesTimeoutsOfAnOverloadedService(t *testing.T) {
	t.Run("latency climbing", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		for range 20 {
			timedPass(t, a, clock, "api", 5*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
		}
		for i := range 10 { // the queue grows: each success takes longer
			timedPass(t, a, clock, "api", time.Duration(i+1)*60*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
		}
		if err := failOnce(t, a, "api", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("timeout while latency climbs 5 ms → 600 ms: %v, want ErrNotRetryable", err)
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); err != nil {
			t.Fatalf("a timeout the server allows retrying: %v, want a retry", err)
		}
		b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, RetryTimeouts: true})
		for i := range 10 {
			timedPass(t, b, clock, "api", time.Duration(i+1)*60*time.Millisecond)
		}
		// Evidence grows stale: a window without a timed success.
		for range 5 {
			timedPass(t, a, clock, "stale", 5*time.Millisecond)
		}
		clock.Advance(11 * time.Second)
		if err := failOnce(t, a, "stale", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("a timeout 11 s after the last timed success: %v, want ErrNotRetryable", err)
		}
		if err := failOnce(t, b, "api", errAdaptiveTimeout); err != nil {
			t.Fatalf("RetryTimeouts: %v, want a retry", err)
		}
	})
	t.Run("most attempts time out", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		var last error
		for range 8 { // alternate, so that no streak stops it first
			timedPass(t, a, clock, "api", 5*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
			last = failOnce(t, a, "api", errAdaptiveTimeout)
		}
		if !errors.Is(last, ErrNotRetryable) {
			t.Fatalf("half of 16 attempts timed out: %v, want ErrNotRetryable", last)
		}
	})
	t.Run("half time out while successes stay fast", func(t *testing.T) {
		// The successes are timed and answer in their usual 5 ms, so the
		// latency shows nothing wrong: it is the share of the window's
		// attempts that timed out that refuses. (In each round the second
		// success takes the probe the first one raised.)
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		for range 10 { // a typical latency, from successes that then leave the window
			timedPass(t, a, clock, "api", 5*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
		}
		// An answered NOT_FOUND places the successes in the window now,
		// 11 s before the rounds, rather than at the first timeout.
		_ = failOnce(t, a, "api", errAdaptiveNotFound)
		clock.Advance(11 * time.Second)
		var errs []error
		for range 4 {
			for range 2 {
				timedPass(t, a, clock, "api", 5*time.Millisecond)
				clock.Advance(100 * time.Millisecond)
			}
			for range 2 {
				errs = append(errs, failOnce(t, a, "api", errAdaptiveTimeout))
				clock.Advance(100 * time.Millisecond)
			}
		}
		if errs[0] != nil {
			t.Fatalf("the first timeout among fast successes: %v, want a retry", errs[0])
		}
		if last := errs[len(errs)-1]; !errors.Is(last, ErrNotRetryable) {
			t.Fatalf("8 of 16 attempts timed out, successes fast: %v, want ErrNotRetryable", last)
		}
	})
}

// TestAdaptiveLatencyProbesFollowTheRate: a slow client times every
// attempt; a fast one about every probeEvery, so that its success path
// stays cheap, and at most every maxStride successes, so that it is probed
// again soon after it slows down.
func TestAdaptiveLatencyProbesFollowTheRate(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now})
	timed := func(n int, every time.Duration) (probes int) {
		for range n {
			tok, _ := a.AcquireInitialToken("")
			if tok.st.started != 0 {
				probes++
			}
			clock.Advance(every)
			_ = a.RecordSuccess(tok)
		}
		return probes
	}
	if n := timed(20, time.Second); n < 19 {
		t.Fatalf("a client sending one request a second timed %d of 20, want all but the first few", n)
	}
	if n := timed(10_000, 100*time.Microsecond); n > 20 || n < 5 {
		t.Fatalf("a client sending 10,000 requests a second timed %d in a second, want about 10", n)
	}
	if n := timed(100_000, 10*time.Microsecond); n > 100_000/maxStride+5 || n < 100_000/maxStride-5 {
		t.Fatalf("a client sending 100,000 requests a second timed %d in a second, want one every %d", n, maxStride)
	}
}

// TestAdaptiveDoRetriesAnAttemptTimeout: retry.Do with AttemptTimeout
// retries an attempt that ran out of its time, with the default strategy of
// a client whose calls have been succeeding.
func TestAdaptiveDoRetriesAnAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{})
		for range 3 {
			if err := Do(context.Background(), a, func(context.Context) error {
				time.Sleep(10 * time.Millisecond)
				return nil
			}, AttemptTimeout(2*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		attempts := 0
		err := Do(context.Background(), a, func(ctx context.Context) error {
			attempts++
			if attempts == 1 {
				<-ctx.Done() // a replica that never answers
				return ctx.Err()
			}
			return nil
		}, AttemptTimeout(2*time.Second))
		if err != nil || attempts != 2 {
			t.Fatalf("Do: %v after %d attempts, want success on attempt 2", err, attempts)
		}
	})
}

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
		// The throttle answers at 10.49 s, and the limiter starts then,
		// 10 ms before the end of a half-second measurement bucket: its
		// first measurement must spread those 10 ms of answers over 10 ms,
		// not over the whole bucket.
		{"a client throttled late in a measurement bucket", 16, 0, time.Hour, 10*time.Second + 480*time.Millisecond},
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

// TestAdaptiveThrottleAfterAPauseOrSlowdown: a client that sent fast, then
// paused or slowed down, and then sends 1,000 requests a second, is cut by
// one throttle to no less than half of those 1,000, not to a fraction of
// them spread over the pause (126 a second before the fix), whether the
// throttle comes a second after it resumed or later. Right after a
// slowdown the rate may be overestimated by the fast requests of the last
// probe's span (at most 10 ms of them here), never by more than twice.
func TestAdaptiveThrottleAfterAPauseOrSlowdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pause   time.Duration // between the fast and the slow traffic
		resumed int           // requests at 1 ms each before the throttle
	}{
		{"paused a minute, throttled 1 s after", time.Minute, 1000},
		{"paused a minute, throttled 3 s after", time.Minute, 3000},
		{"slowed at once, throttled 1 s after", 0, 1000},
		{"slowed at once, throttled 5 s after", 0, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newHandClock()
			a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
			for range 100_000 {
				timedPass(t, a, clock, "", 10*time.Microsecond) // 100,000 a second
			}
			clock.Advance(tc.pause)
			for range tc.resumed {
				timedPass(t, a, clock, "", time.Millisecond)
			}
			_ = failOnce(t, a, "", errAdaptive429)
			rate, limiting := a.Rate("")
			if !limiting || rate < 500 || rate > 1400 {
				t.Errorf("after one throttle the limiter allows %.0f a second (limiting %v), want 0.7 of the 1,000 sent, at least half and at most 0.7 of twice", rate, limiting)
			}
		})
	}
}

// TestAdaptiveThrottleInTheInstantOfAProbe: a throttle answered at the
// very clock reading a probe ended at (a coarse clock, or virtual time,
// where a burst of attempts shares one reading) is measured from the probe
// before it, not from the window's attempts spread over the whole window.
// 8 attempts every 20 ms for a second, 400 a second: one throttle in the
// instant of a probe cut a client so measured to 30 a second (0.07x),
// where it must keep at least half.
func TestAdaptiveThrottleInTheInstantOfAProbe(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	probed := func() bool { // the newest probe ended at this reading
		sc := a.scopes.peek("")
		sc.latency.mu.Lock()
		defer sc.latency.mu.Unlock()
		return sc.latency.at[1] == a.now()
	}
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("no probe in 4 s of 400 attempts a second")
		}
		clock.Advance(20 * time.Millisecond)
		for range 8 {
			timedPass(t, a, clock, "", 0)
		}
		if i >= 50 && probed() {
			break
		}
	}
	_ = failOnce(t, a, "", errAdaptive429)
	if rate, limiting := a.Rate(""); !limiting || rate < 200 || rate > 400 {
		t.Fatalf("after one throttle the limiter allows %.0f a second (limiting %v), want 0.7 of the 400 sent, at least half", rate, limiting)
	}
}

// TestAdaptiveThrottleInTheInstantOfAnOverdueProbe: when the probe that
// shares the throttle's clock reading came overdue, after a pause, the
// probe before it is left out as for any later answer: a burst of 1,000
// after a minute's pause is not spread over the minute (19.5 a second).
func TestAdaptiveThrottleInTheInstantOfAnOverdueProbe(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 100_000 {
		timedPass(t, a, clock, "", 10*time.Microsecond)
	}
	clock.Advance(time.Minute)
	for range 1000 {
		timedPass(t, a, clock, "", 0)
	}
	sc := a.scopes.peek("")
	sc.latency.mu.Lock()
	at, overdue := sc.latency.at[1], sc.latency.overdue
	sc.latency.mu.Unlock()
	if at != a.now() || !overdue {
		t.Fatalf("the newest probe (at the reading now: %v) did not come overdue (%v): the case is not made", at == a.now(), overdue)
	}
	_ = failOnce(t, a, "", errAdaptive429)
	if rate, limiting := a.Rate(""); !limiting || rate < 70 {
		t.Fatalf("after one throttle the limiter allows %.1f a second (limiting %v): the burst was spread over the pause", rate, limiting)
	}
}

// TestAdaptiveTimesAScopesFirstAttempt: the baseline a scope's timeouts
// are judged by starts with its first success, so that a process that
// sends a request every ten seconds has one after its second request, not
// its third, a window later.
func TestAdaptiveTimesAScopesFirstAttempt(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now})
	sharedevidence.Bind(a) // which counts the probes
	for _, scope := range []string{"", "s"} {
		tok, err := a.AcquireInitialToken(scope)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Millisecond)
		if err := a.RecordSuccess(tok); err != nil {
			t.Fatal(err)
		}
		sc := a.quota(scope).(*adaptiveScope)
		if probes, nanos := sc.fleet.probes.Load(), sc.fleet.nanos.Load(); probes != 1 || nanos != uint64(5*time.Millisecond) {
			t.Fatalf("scope %q: %d probes, %v in all after its first success; want its 5ms timed", scope, probes, time.Duration(nanos))
		}
	}
}
