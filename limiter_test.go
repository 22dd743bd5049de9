package retry

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Rate reports the fill rate, which never goes below MinRate (0.5/s by
// default, whatever invalid value is given).
func TestAdaptiveRateFloor(t *testing.T) {
	for _, tc := range []struct{ min, want float64 }{{0, 0.5}, {3, 3}, {math.NaN(), 0.5}, {-1, 0.5}} {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{MinRate: tc.min, Now: clock.Now, Rand: noRefusal})
		if rate, limiting := a.Rate("x"); limiting || !math.IsInf(rate, 1) {
			t.Fatalf("an unknown scope: rate %v limiting %v", rate, limiting)
		}
		_ = failOnce(t, a, "x", errAdaptive429) // a throttle at a send rate near 0
		rate, limiting := a.Rate("x")
		if !limiting || rate != tc.want {
			t.Fatalf("MinRate %v: rate %v limiting %v, want %v and limiting", tc.min, rate, limiting, tc.want)
		}
	}
}

// While a caller waits the limiter's delay, the scope's mutex is free and
// another caller in the same scope gets its token: reserve returns a wait,
// and nothing sleeps under the lock.
func TestAdaptiveWaitHoldsNoLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{MaxWait: 5 * time.Second, StandardOptions: StandardOptions{MaxAttempts: 1}})
		ctx := context.Background()
		for range 20 {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			time.Sleep(100 * time.Millisecond)
		}
		_ = Do(ctx, a, func(context.Context) error { return errAdaptive429 })
		for range 5 { // kept reservations: the bucket owes tokens
			_, _ = a.AcquireInitialToken("")
		}
		called := make(chan struct{})
		go func() {
			_ = Do(ctx, a, func(context.Context) error { close(called); return nil })
		}()
		synctest.Wait() // the goroutine is asleep in its wait
		select {
		case <-called:
			t.Fatal("the call behind five reservations did not wait")
		default:
		}
		sc := a.scopes.peek("")
		if !sc.mu.TryLock() {
			t.Fatal("the scope's mutex is held while a caller waits")
		}
		sc.mu.Unlock()
		tok, _ := a.AcquireInitialToken("") // the same scope proceeds
		if tok.Delay() <= 0 {
			t.Fatalf("a later token waits %v, want a wait behind the first", tok.Delay())
		}
		_ = a.ReleaseToken(tok)
		<-called
	})
}

// TestAdaptiveRetryNeverQueuesBehindTheLimiter: while the throttled
// limiter owes its longest wait already, a retry is refused rather than
// queued: the client sends more than the service accepts as it is. With
// room, the retry is granted and waits its turn.
func TestAdaptiveRetryNeverQueuesBehindTheLimiter(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 {
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	if err := failOnce(t, a, "api", errAdaptive429); err != nil {
		t.Fatalf("the first throttle, with room in the limiter: %v, want a retry", err)
	}
	for range 20 { // first attempts take every token the limiter may owe
		_, _ = a.AcquireInitialToken("api")
	}
	err := failOnce(t, a, "api", errAdaptive429)
	if !errors.Is(err, ErrBudgetExhausted) || !strings.Contains(err.Error(), "limiter") {
		t.Fatalf("a throttle with the limiter a full wait behind: %v, want the limiter's refusal", err)
	}
}

// TestAdaptiveLimiter: a throttling error starts the limiter; attempts then
// wait, first attempts included, for at most MaxWait; Rate reports it; once
// the throttling is over the limiter stops.
func TestAdaptiveLimiter(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, MaxWait: 2 * time.Second})
	for range 50 { // a client sending 5 requests a second
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("limiting before any throttle")
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	rate, limiting := a.Rate("api")
	if !limiting || rate <= 0 || rate > 5 {
		t.Fatalf("after a throttle: rate %v, limiting %v; want a limit below 5/s", rate, limiting)
	}
	var waited time.Duration
	for range 20 {
		tok, _ := a.AcquireInitialToken("api")
		if tok.Delay() > 2*time.Second {
			t.Fatalf("wait %v beyond MaxWait", tok.Delay())
		}
		waited = max(waited, tok.Delay())
		_ = a.ReleaseToken(tok)
		_, _ = a.AcquireInitialToken("api") // a second one, kept: the bucket empties
	}
	if waited == 0 {
		t.Fatal("a throttled limiter never made a first attempt wait")
	}
	// No throttle for a while: successes grow the rate back and the limiter
	// stops limiting (AWS's limits for the life of the client).
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, "api")
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("still limiting 10 s after the last throttle")
	}
	if tok, _ := a.AcquireInitialToken("api"); tok.Delay() != 0 {
		t.Fatalf("a first attempt waits %v after the limiter stopped", tok.Delay())
	}
}

// TestAdaptiveDoWaitsTheLimiterNeverPastTheDeadline: Do waits a first
// attempt's turn, and does not start a wait that would end past the
// deadline; a waiting caller blocks no other.
func TestAdaptiveDoWaitsTheLimiterNeverPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{MaxWait: 5 * time.Second, StandardOptions: StandardOptions{Backoff: Constant(0)}})
		ctx := context.Background()
		for range 20 {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			time.Sleep(100 * time.Millisecond)
		}
		_ = Do(ctx, a, func(context.Context) error { return errAdaptive429 }) // the limiter starts
		for range 5 {                                                         // reservations kept: the bucket owes tokens
			_, _ = a.AcquireInitialToken("")
		}
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		calls := 0
		err := Do(short, a, func(context.Context) error { calls++; return nil })
		if !errors.Is(err, ErrDeadline) || calls != 0 {
			t.Fatalf("err %v with %d calls; want ErrDeadline and no call", err, calls)
		}
		start := time.Now()
		if err := Do(ctx, a, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) == 0 {
			t.Fatal("a call behind five reservations did not wait its turn")
		}

		// One caller waiting its turn does not hold up another scope.
		var other atomic.Bool
		done := make(chan struct{})
		go func() {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			close(done)
		}()
		_ = Do(ctx, a, func(context.Context) error { other.Store(true); return nil }, Scope("elsewhere"))
		if !other.Load() {
			t.Fatal("a call in another scope did not run")
		}
		<-done
	})
}

// TestDoAndDoValueTellTheLimiterAlike: an attempt in flight when the
// scope's limiter starts limiting ends in a success the limiter should hear
// of, whether the call is Do's or DoValue's (Do's shortcut read "not
// limiting" when the attempt began, and skipped the tell at its end).
func TestDoAndDoValueTellTheLimiterAlike(t *testing.T) {
	// fastNow: the next call's first attempt goes on the fast path.
	fastNow := func(a *Adaptive) bool { _, now := a.quick(); return now }
	limiting := map[string]bool{}
	for _, name := range []string{"Do", "DoValue"} {
		clk := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clk.Now})
		ctx := context.Background()
		// A client that calls every millisecond: latency probes are a
		// hundred calls apart, and Do's shortcut serves the calls between.
		for range 300 {
			clk.Advance(time.Millisecond)
			_ = Do(ctx, a, succeed, Unmarked())
		}
		for i := 0; !fastNow(a); i++ {
			if i == 200 {
				t.Fatal("a latency probe is always due")
			}
			clk.Advance(time.Millisecond)
			_ = Do(ctx, a, succeed, Unmarked())
		}
		started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		op := func(context.Context) error { close(started); <-release; return nil }
		go func() {
			if name == "Do" {
				done <- Do(ctx, a, op, Unmarked())
			} else {
				_, err := DoValue(ctx, a, func(ctx context.Context) (int, error) { return 0, op(ctx) }, Unmarked())
				done <- err
			}
		}()
		<-started
		throttle := WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
		_ = Do(ctx, a, func(context.Context) error { return throttle }, Unmarked(),
			BeforeRetry(func(context.Context, int, error) error { return errors.New("stop") }))
		if _, limiting := a.Rate(""); !limiting {
			t.Fatalf("%s: the throttle did not start the limiter", name)
		}
		clk.Advance(time.Minute) // the throttling is long over: the next answer ends the limiting
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_, limiting[name] = a.Rate("")
	}
	if limiting["Do"] || limiting["DoValue"] {
		t.Fatalf("still limiting after a success a minute past the throttle: Do %v, DoValue %v", limiting["Do"], limiting["DoValue"])
	}
}

// TestAdaptiveLimiterSettlesWithTime: the limiter stops limiting once the
// throttling has been over long enough, whether an answer came since or
// not: an hour after a single throttle, a burst of first attempts waits
// nothing.
func TestAdaptiveLimiterSettlesWithTime(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 { // 5 requests a second
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	if _, limiting := a.Rate("api"); !limiting {
		t.Fatal("the throttle did not start the limiter")
	}
	clock.Advance(time.Hour)
	waited := 0
	for range 20 {
		if tok, _ := a.AcquireInitialToken("api"); tok.Delay() > 0 {
			waited++
		}
	}
	if waited > 0 {
		t.Fatalf("%d of 20 first attempts wait an hour after the only throttle, want none", waited)
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("still limiting an hour after the only throttle")
	}
}
