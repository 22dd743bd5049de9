package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// Client-side throttling refuses a retry exactly when the pinned draw is
// below (attempts − K·accepts)/(attempts + 1): with 5 accepted attempts and
// a draw of 0.3, K = 2 first refuses at the 10th failure (5/16 > 0.3 > 4/15)
// and K = 3 at the 17th (7/23 > 0.3 > 6/22).
func TestAdaptiveRejectionProbabilityFormula(t *testing.T) {
	for _, tc := range []struct {
		k        float64
		firstRef int
	}{{2, 10}, {3, 17}} {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Streak: -1, Multiplier: tc.k, Now: clock.Now,
			Rand: func() float64 { return 0.3 }})
		for range 5 {
			passOnce(t, a, "s")
		}
		for f := 1; f <= tc.firstRef; f++ {
			err := failOnce(t, a, "s", errAdaptive503)
			switch {
			case f < tc.firstRef && err != nil:
				t.Fatalf("K=%v: failure %d refused early: %v", tc.k, f, err)
			case f == tc.firstRef && !errors.Is(err, ErrBudgetExhausted):
				t.Fatalf("K=%v: failure %d: %v, want ErrBudgetExhausted", tc.k, f, err)
			}
		}
	}
}

// A Bucket given in the options is one quota for every scope: retries held
// in one scope drain it for another, and their success gives it back.
func TestAdaptiveSharedBucketAcrossScopes(t *testing.T) {
	bucket := NewTokenBucket(20)
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Bucket: bucket}, Streak: -1, Multiplier: -1})
	tok, _ := a.AcquireInitialToken("a")
	held, err := a.RefreshToken(tok, errAdaptive503) // costs 14 of 20
	if err != nil {
		t.Fatal(err)
	}
	if err := failOnce(t, a, "b", errAdaptive503); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("scope b with 6 tokens left: %v, want ErrQuotaExhausted", err)
	}
	if err := a.RecordSuccess(held); err != nil {
		t.Fatal(err)
	}
	if err := failOnce(t, a, "b", errAdaptive503); err != nil {
		t.Fatalf("scope b after the refund: %v", err)
	}
	if got := bucket.Available(); got != 20 {
		t.Fatalf("bucket %d after every retry came back, want 20", got)
	}
}

// ReleaseToken gives a granted retry's withdrawal back to the Budget; an
// unreleased one keeps it, and the budget then refuses with ErrBudgetExhausted.
func TestAdaptiveReleaseRefundsBudget(t *testing.T) {
	clock := newHandClock()
	budget := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second, Now: clock.Now}) // 1 retry
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Budget: budget}, Streak: -1, Multiplier: -1, Now: clock.Now})
	if err := failOnce(t, a, "", errAdaptive503); err != nil { // granted, then released
		t.Fatal(err)
	}
	if got := budget.Available(); got != 1 {
		t.Fatalf("budget %d after a released retry, want 1", got)
	}
	tok, _ := a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil { // granted, kept
		t.Fatal(err)
	}
	if err := failOnce(t, a, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("budget spent: %v, want ErrBudgetExhausted", err)
	}
}

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

// The zero Adaptive retries a transient failure through Do.
func TestAdaptiveZeroValueDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var a Adaptive
		calls := 0
		err := Do(context.Background(), &a, func(context.Context) error {
			if calls++; calls < 3 {
				return errAdaptive503
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("err %v after %d calls, want success after 3", err, calls)
		}
	})
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
