package retry

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestAdaptiveAllowedIsStillBounded: the server's permission (Info.Allowed)
// lifts only the refusal of a timeout. The failure streak, client-side
// throttling, a Budget and a quota still bound the retries it allows.
func TestAdaptiveAllowedIsStillBounded(t *testing.T) {
	t.Run("streak", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		for i := range 2 {
			if err := failOnce(t, a, "api", errAdaptiveAllowed); err != nil {
				t.Fatalf("allowed timeout %d: %v, want a retry", i+1, err)
			}
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("a third allowed timeout in a row: %v, want the streak's ErrBudgetExhausted", err)
		}
	})
	t.Run("client-side throttling", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: alwaysRefuse, Streak: -1})
		for range 20 { // a window of failures: the service accepts nothing
			clock.Advance(100 * time.Millisecond)
			_ = failOnce(t, a, "api", errAdaptive503)
		}
		err := failOnce(t, a, "api", errAdaptiveAllowed)
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("an allowed timeout where the service accepts nothing: %v, want client-side throttling's refusal", err)
		}
	})
	t.Run("budget", func(t *testing.T) {
		clock := newHandClock()
		b := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second, Now: clock.Now})
		a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Budget: b}, Now: clock.Now, Rand: noRefusal})
		retried := func() error { // an allowed timeout whose retry is made and succeeds
			tok, _ := a.AcquireInitialToken("api")
			next, err := a.RefreshToken(tok, errAdaptiveAllowed)
			if err != nil {
				return err
			}
			return a.RecordSuccess(next)
		}
		if err := retried(); err != nil {
			t.Fatalf("the budget's one retry: %v", err)
		}
		if err := retried(); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("an allowed timeout with the budget spent: %v, want ErrBudgetExhausted", err)
		}
	})
	t.Run("quota", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Capacity: DefaultRetryCost}, Now: clock.Now, Rand: noRefusal})
		tok, _ := a.AcquireInitialToken("api")
		if _, err := a.RefreshToken(tok, errAdaptiveAllowed); err != nil { // takes the quota's only retry
			t.Fatalf("the quota's one retry: %v", err)
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); !errors.Is(err, ErrQuotaExhausted) {
			t.Fatalf("an allowed timeout with the quota drained: %v, want ErrQuotaExhausted", err)
		}
	})
}

// TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard: a failing service
// reached under 20,000 scope names, far more than the strategy keeps (64
// here, so that dropping the least recently used stays cheap: 1,024 by
// default), collects no fresh allowance under each: the strategy-wide
// counts refuse nearly every retry.
func TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxScopes: 64}, Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted := 0
	for i := range 20_000 { // 1,000 a second, each host failing once
		clock.Advance(time.Millisecond)
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
			granted++
		}
	}
	// Without the strategy-wide counts, each of the 64 names kept would
	// start with an allowance of its own (128 retries in all: names
	// dropped for room pass their counts on, so the rest are refused).
	if granted > 40 {
		t.Fatalf("%d of 20,000 fresh host names retried a failing service, want at most 40", granted)
	}
}
