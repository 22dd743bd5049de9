package retry

import (
	"math"
	"testing"
	"time"
)

// FuzzAdaptiveDials drives an Adaptive with arbitrary dials through an
// arbitrary sequence of outcomes and clock steps, backwards ones included:
// no panic, no negative or not-a-number wait or rate, no negative quota.
func FuzzAdaptiveDials(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, 0.0, int64(0), int64(0), 0, []byte{0, 1, 2, 3, 4, 5})
	f.Add(math.NaN(), math.Inf(1), -1.0, 1e308, int64(-1), int64(math.MaxInt64), -5, []byte{3, 3, 3, 3, 255, 0, 128})
	f.Add(-2.0, 1e-300, 0.999, 1e-9, int64(1), int64(1), 1, []byte{2, 2, 2, 2, 2, 2, 2, 1, 1})
	f.Fuzz(func(t *testing.T, k, minRate, beta, scale float64, window, maxWait int64, streak int, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		a := NewAdaptive(AdaptiveOptions{
			StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0), Capacity: int(uint8(streak))},
			Streak:          streak, Multiplier: k, Window: time.Duration(window), MaxWait: time.Duration(maxWait),
			MinRate: minRate, Beta: beta, Scale: scale,
			Now:  func() time.Time { return now },
			Rand: func() float64 { return 0.5 },
		})
		for _, b := range steps {
			tok, _ := a.AcquireInitialToken("s")
			if d := tok.Delay(); d < 0 {
				t.Fatalf("negative wait %v", d)
			}
			switch b % 5 {
			case 0:
				_ = a.RecordSuccess(tok)
			case 1:
				if next, err := a.RefreshToken(tok, errAdaptive503); err == nil {
					if next.Delay() < 0 {
						t.Fatalf("negative wait %v", next.Delay())
					}
					_ = a.ReleaseToken(next)
				}
			case 2:
				if next, err := a.RefreshToken(tok, errAdaptive429); err == nil {
					_ = a.RecordSuccess(next)
				}
			case 3:
				_, _ = a.RefreshToken(tok, errAdaptiveTimeout)
			case 4:
				_ = a.ReleaseToken(tok)
			}
			now = now.Add(time.Duration(int8(b)) * 37 * time.Millisecond) // forwards and backwards
			if rate, limiting := a.Rate("s"); limiting && (math.IsNaN(rate) || rate < 0 || math.IsInf(rate, 0)) {
				t.Fatalf("rate %v", rate)
			}
			if a.Available("s") < 0 {
				t.Fatalf("available %d", a.Available("s"))
			}
		}
	})
}

// FuzzBudgetDials: arbitrary options and clock steps never make a budget
// panic, report a negative balance, or allow retries without end.
func FuzzBudgetDials(f *testing.F) {
	f.Add(0.0, 0.0, int64(0), []byte{0, 1, 2})
	f.Add(math.NaN(), math.Inf(-1), int64(-1), []byte{255, 255, 0})
	f.Add(1e300, 1e300, int64(math.MaxInt64), []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, ratio, floor float64, window int64, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		b := NewBudget(BudgetOptions{Ratio: ratio, MinPerSecond: floor, Window: time.Duration(window), Now: func() time.Time { return now }})
		for _, s := range steps {
			switch s % 3 {
			case 0:
				b.Deposit()
			case 1:
				_ = b.TryWithdraw()
			case 2:
				b.refund()
			}
			now = now.Add(time.Duration(int8(s)) * time.Second)
			if b.Available() < 0 {
				t.Fatalf("available %d", b.Available())
			}
		}
	})
}
