package retry

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// drainBudget withdraws until the budget refuses and returns how many
// retries it allowed.
func drainBudget(b *Budget) int {
	n := 0
	for b.TryWithdraw() {
		n++
		if n > 1e6 {
			panic("a budget that never refuses")
		}
	}
	return n
}

// TestBudgetWindowInVirtualTime: the budget allows ratio·requests plus
// floor·window retries over its window; both requests and retries leave the
// window as it slides.
func TestBudgetWindowInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetOptions{Ratio: 0.2, MinPerSecond: 0.5, Window: 10 * time.Second})
		if got := drainBudget(b); got != 5 {
			t.Fatalf("no requests yet: %d retries, want the floor, 0.5/s × 10 s = 5", got)
		}
		for range 100 {
			b.Deposit()
		}
		if got := drainBudget(b); got != 20 {
			t.Fatalf("after 100 requests: %d more retries, want 20 (20%%)", got)
		}
		// Half a window later nothing has left it yet.
		time.Sleep(5 * time.Second)
		if got := drainBudget(b); got != 0 {
			t.Fatalf("5 s later: %d retries, want none", got)
		}
		// A whole window after the first look, the requests and the
		// retries have left it: only the floor is back.
		time.Sleep(5*time.Second + time.Second)
		if got := b.Available(); got != 5 {
			t.Fatalf("a window later: %d available, want the floor of 5", got)
		}
	})
}

// TestBudgetDepositsPendingForLongCountInPart: deposits are placed when the
// budget is next consulted, spread over the time since the last look, so
// requests made long ago count only for the share that falls in the window.
func TestBudgetDepositsPendingForLongCountInPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetOptions{Ratio: 1, MinPerSecond: -1, Window: 10 * time.Second})
		_ = b.Available() // the first look
		for range 100 {
			b.Deposit()
		}
		time.Sleep(40 * time.Second) // 100 requests over 40 s: 25 in the last 10
		if got := b.Available(); got != 25 {
			t.Fatalf("%d available, want 25: a quarter of the requests fall in the window", got)
		}
	})
}

// TestBudgetRefund gives back a retry that was not made.
func TestBudgetRefund(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetOptions{MinPerSecond: 0.1, Ratio: -1, Window: 10 * time.Second})
		if !b.TryWithdraw() || b.TryWithdraw() {
			t.Fatal("a floor of 1 retry per window must allow exactly one")
		}
		b.refund()
		if !b.TryWithdraw() {
			t.Fatal("a refunded retry must be available again")
		}
	})
}

// TestBudgetOptionsHostile: defaults for zero, nothing for negative, and
// never a panic, a NaN or a negative count for options that are not numbers.
func TestBudgetOptionsHostile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var zero Budget
		if got := zero.Available(); got != int(DefaultBudgetMinPerSecond*DefaultBudgetWindow.Seconds()) {
			t.Fatalf("zero value: %d available, want the default floor", got)
		}
		none := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: -1})
		none.Deposit()
		if none.TryWithdraw() {
			t.Fatal("negative ratio and floor must allow no retry")
		}
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e300} {
			b := NewBudget(BudgetOptions{Ratio: v, MinPerSecond: v, Window: time.Duration(math.MaxInt64)})
			b.Deposit()
			if got := b.Available(); got < 0 {
				t.Fatalf("options %v: %d available", v, got)
			}
			_ = b.TryWithdraw()
		}
		clock := NewBudget(BudgetOptions{Now: func() time.Time { return time.Unix(-5, 0) }}) // a clock before 1970
		clock.Deposit()
		_ = clock.TryWithdraw()
	})
}

// TestBudgetConcurrentWithdrawals: many goroutines never withdraw more than
// the budget holds, plus one per goroutine racing at the edge.
func TestBudgetConcurrentWithdrawals(t *testing.T) {
	b := NewBudget(BudgetOptions{Ratio: 0.1, MinPerSecond: -1, Window: time.Hour})
	const goroutines, deposits = 8, 1000
	var wg sync.WaitGroup
	var granted atomic.Int64
	for range goroutines {
		wg.Go(func() {
			for range deposits {
				b.Deposit()
				if b.TryWithdraw() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got, most := granted.Load(), int64(0.1*goroutines*deposits)+goroutines; got > most {
		t.Fatalf("%d retries granted, at most %d allowed", got, most)
	}
}

// TestStandardNeedsQuotaAndBudget: a retry needs both; when the budget
// refuses, the quota gets its tokens back, and a released retry refunds both.
func TestStandardNeedsQuotaAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bucket := NewTokenBucket(1000)
		budget := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second}) // one retry per window
		s := NewStandard(StandardOptions{Bucket: bucket, Budget: budget, Backoff: Constant(0)})
		calls := 0
		err := Do(context.Background(), s, func(context.Context) error { calls++; return errTransient })
		if !errors.Is(err, ErrBudgetExhausted) || calls != 2 {
			t.Fatalf("err %v after %d calls, want ErrBudgetExhausted after 2", err, calls)
		}
		if got := bucket.Available(); got != 1000-DefaultRetryCost {
			t.Fatalf("bucket %d: the refused retry's tokens were not given back", got)
		}

		time.Sleep(11 * time.Second) // the budget's window has passed
		tok, _ := s.AcquireInitialToken("")
		tok, err = s.RefreshToken(tok, errTransient)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseToken(tok); err != nil {
			t.Fatal(err)
		}
		if bucket.Available() != 1000-DefaultRetryCost || budget.Available() != 1 {
			t.Fatalf("after a release: bucket %d, budget %d; want both refunded", bucket.Available(), budget.Available())
		}
	})
}
