package retry

import (
	"math"
	"testing"
	"time"
)

// FuzzAdaptiveOptions: arbitrary dials, with a Budget and a shared Bucket,
// over several scopes and a clock that jumps both ways. A token's delay is
// never negative and, with no backoff, never beyond the effective MaxWait;
// a limiting Rate is finite and at least the effective MinRate.
func FuzzAdaptiveOptions(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, 0.0, int64(0), int64(0), 0, []byte{2, 2, 2, 2, 0, 0, 1, 5, 9})
	f.Add(math.Inf(-1), math.NaN(), 1.0, math.Inf(1), int64(math.MinInt64), int64(-5), -1, []byte{6, 6, 6, 250, 6, 6})
	f.Add(1e308, 1e-308, 1e308, 1e-308, int64(1), int64(math.MaxInt64), 1<<30, []byte{10, 2, 2, 2, 130, 2, 2})
	f.Fuzz(func(t *testing.T, k, minRate, beta, scale float64, window, maxWait int64, streak int, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time { return now }
		a := NewAdaptive(AdaptiveOptions{
			StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0), MaxAttempts: 4,
				Bucket: NewTokenBucket(100), Budget: NewBudget(BudgetOptions{Ratio: k, MinPerSecond: scale, Window: time.Duration(window), Now: clock})},
			Streak: streak, Multiplier: k, Window: time.Duration(window), MaxWait: time.Duration(maxWait),
			MinRate: minRate, Beta: beta, Scale: scale, Now: clock, Rand: func() float64 { return 0.5 },
		})
		limit := orDuration(time.Duration(maxWait), DefaultAdaptiveMaxWait)
		floor := positiveOr(minRate, cubicMinRate)
		check := func(tok Token) {
			if d := tok.Delay(); d < 0 || d > limit {
				t.Fatalf("delay %v outside [0, %v]", d, limit)
			}
		}
		errs := []error{errAdaptive503, errAdaptive429, errAdaptiveTimeout}
		for i, s := range steps {
			scope := string(rune('a' + s%3))
			tok, _ := a.AcquireInitialToken(scope)
			check(tok)
			if s&4 == 0 {
				_ = a.RecordSuccess(tok)
			} else if next, err := a.RefreshToken(tok, errs[i%3]); err == nil {
				check(next)
				if s&8 == 0 {
					_ = a.ReleaseToken(next)
				} else {
					_ = a.RecordSuccess(next)
				}
			}
			now = now.Add(time.Duration(int8(s)) * 53 * time.Millisecond)
			if rate, limiting := a.Rate(scope); limiting && (math.IsNaN(rate) || math.IsInf(rate, 0) || rate < floor) {
				t.Fatalf("limiting at rate %v (floor %v)", rate, floor)
			}
			if a.Available(scope) < 0 {
				t.Fatalf("available %d", a.Available(scope))
			}
		}
	})
}
