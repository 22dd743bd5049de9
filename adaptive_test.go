package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

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

// TestAdaptiveRetryAnsweredWithAClientFaultGivesItsCostBack: with a quota,
// Adaptive gives a retry's cost back when the service answers it with a
// client fault, as Standard does (aws/aws-sdk-go-v2#3186); a server fault
// keeps it.
func TestAdaptiveRetryAnsweredWithAClientFaultGivesItsCostBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name string
			last error
			want int
		}{
			{"client fault", errAdaptiveNotFound, 500},
			{"server fault", errAdaptive503, 500 - 2*DefaultRetryCost},
		} {
			q := NewTokenBucket(500)
			a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Bucket: q, MaxAttempts: 3, Backoff: Constant(time.Millisecond)}, Rand: noRefusal})
			n := 0
			err := Do(context.Background(), a, func(context.Context) error {
				if n++; n == 1 {
					return errAdaptive503
				}
				return tc.last
			})
			if !errors.Is(err, tc.last) {
				t.Fatalf("%s: err = %v", tc.name, err)
			}
			if got := q.Available(); got != tc.want {
				t.Errorf("%s: quota after the call = %d, want %d", tc.name, got, tc.want)
			}
		}
	})
}
