package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// handClock is a clock tests move by hand.
type handClock struct {
	mu sync.Mutex
	t  time.Time
}

func newHandClock() *handClock { return &handClock{t: time.Unix(1_700_000_000, 0)} }

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *handClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var (
	errAdaptive503     = WithInfo(errors.New("503"), Info{Safety: Safe, Fault: FaultServer})
	errAdaptive429     = WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
	errAdaptiveTimeout = WithInfo(errors.New("timed out"), Info{Safety: Safe, Timeout: true, Fault: FaultServer})
	noRefusal          = func() float64 { return 0.999999 } // client-side throttling refuses only at probability 1
)

// failOnce runs one failed attempt of a new request in scope and reports
// whether its retry was granted, spending the granted token.
func failOnce(t *testing.T, a *Adaptive, scope string, err error) error {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	next, refused := a.RefreshToken(tok, err)
	if refused == nil {
		_ = a.ReleaseToken(next)
	}
	return refused
}

func passOnce(t *testing.T, a *Adaptive, scope string) {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
}

// TestAdaptiveStreakStopsRetries: three failed attempts in a row stop a
// scope's retries until an attempt succeeds; other scopes are not affected.
func TestAdaptiveStreakStopsRetries(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for i := range 2 {
		if err := failOnce(t, a, "svc", errAdaptive503); err != nil {
			t.Fatalf("failure %d: %v, want a retry", i+1, err)
		}
	}
	if err := failOnce(t, a, "svc", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third failure in a row: %v, want ErrBudgetExhausted", err)
	}
	if err := failOnce(t, a, "other", errAdaptive503); err != nil {
		t.Fatalf("another scope: %v, want a retry", err)
	}
	passOnce(t, a, "svc")
	if err := failOnce(t, a, "svc", errAdaptive503); err != nil {
		t.Fatalf("after a success: %v, want a retry", err)
	}
}

// TestAdaptiveStreakRelaxesWhileRetriesWork: after a retry succeeded, a
// streak of 2·3+2 = 8 is allowed within the window; throttling errors never
// get the longer streak.
func TestAdaptiveStreakRelaxesWhileRetriesWork(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ := a.AcquireInitialToken("")
	tok, err := a.RefreshToken(tok, errAdaptive503)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordSuccess(tok); err != nil { // a retry that worked
		t.Fatal(err)
	}
	for i := range 7 {
		if err := failOnce(t, a, "", errAdaptive503); err != nil {
			t.Fatalf("failure %d after a working retry: %v, want a retry", i+1, err)
		}
	}
	if err := failOnce(t, a, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("eighth failure: %v, want ErrBudgetExhausted", err)
	}

	b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ = b.AcquireInitialToken("")
	tok, _ = b.RefreshToken(tok, errAdaptive503)
	_ = b.RecordSuccess(tok)
	_ = failOnce(t, b, "", errAdaptive429)
	_ = failOnce(t, b, "", errAdaptive429)
	if err := failOnce(t, b, "", errAdaptive429); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third throttle in a row: %v, want the short streak", err)
	}

	// Out of the window, the streak is short again.
	c := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ = c.AcquireInitialToken("")
	tok, _ = c.RefreshToken(tok, errAdaptive503)
	_ = c.RecordSuccess(tok)
	clock.Advance(11 * time.Second)
	_ = failOnce(t, c, "", errAdaptive503)
	_ = failOnce(t, c, "", errAdaptive503)
	if err := failOnce(t, c, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third failure 11 s after the working retry: %v, want the short streak", err)
	}
}

// TestAdaptiveThrottlingAcrossScopes: a service that fails under many scope
// names is judged across them: fresh scopes stop retrying too.
func TestAdaptiveThrottlingAcrossScopes(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted := 0
	for i := range 200 {
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
			granted++
		}
	}
	if granted > 20 {
		t.Fatalf("%d of 200 fresh scopes retried a failing service, want few", granted)
	}
	// With a healthy service in between, fresh scopes retry.
	b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for i := range 200 {
		passOnce(t, b, fmt.Sprint("host", i))
		if err := failOnce(t, b, fmt.Sprint("host", i), errAdaptive503); err != nil {
			t.Fatalf("scope %d of a healthy service: %v", i, err)
		}
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

// TestAdaptiveQuotaRefills: with a quota, successes refill it (the AWS SDK
// for Go's adaptive mode never did, aws-sdk-go-v2 #3550), and a released
// retry gives its tokens back.
func TestAdaptiveQuotaRefills(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Capacity: 30}, Streak: -1, Multiplier: -1})
	_ = failOnce(t, a, "", errAdaptive503) // granted and released: refunded
	if got := a.Available(""); got != 30 {
		t.Fatalf("after a released retry: %d, want 30", got)
	}
	tok, _ := a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil {
		t.Fatal(err)
	}
	tok, _ = a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil {
		t.Fatal(err)
	}
	if got := a.Available(""); got != 2 {
		t.Fatalf("after two retries: %d, want 2", got)
	}
	tok, _ = a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("drained: %v, want ErrQuotaExhausted", err)
	}
	for range 10 {
		passOnce(t, a, "")
	}
	if got := a.Available(""); got != 12 {
		t.Fatalf("after 10 successes: %d, want 12", got)
	}
}

// TestAdaptiveTokensAreSingleUse: a spent token is rejected.
func TestAdaptiveTokensAreSingleUse(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{})
	tok, _ := a.AcquireInitialToken("")
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordSuccess(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("second use: %v", err)
	}
	if _, err := a.RefreshToken(tok, errAdaptive503); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh of a spent token: %v", err)
	}
	if err := a.ReleaseToken(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("release of a spent token: %v", err)
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

// TestAdaptiveConcurrent runs many calls with failures and successes on one
// Adaptive from several goroutines (for the race detector).
func TestAdaptiveConcurrent(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0)}, MaxWait: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				n := 0
				scope := fmt.Sprint("s", (g+i)%5)
				_ = Do(context.Background(), a, func(context.Context) error {
					n++
					switch (g + i + n) % 7 {
					case 0:
						return errAdaptive429
					case 1, 2:
						return errAdaptive503
					}
					return nil
				}, Scope(scope))
				_, _ = a.Rate(scope)
				_ = a.Available(scope)
			}
		})
	}
	wg.Wait()
}
