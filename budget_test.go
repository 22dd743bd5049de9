package retry

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The budget read through an explicit Now: ratio·deposits + floor·window − withdrawals,
// with withdrawals and deposits leaving the window after Window.
func TestBudgetExplicitClockArithmetic(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b := NewBudget(BudgetOptions{Ratio: 0.5, MinPerSecond: 0.2, Window: 10 * time.Second,
		Now: func() time.Time { return now }})
	if got := b.Available(); got != 2 { // floor only: 0.2/s × 10 s
		t.Fatalf("floor: Available = %d, want 2", got)
	}
	for range 10 {
		b.Deposit()
	}
	if got := b.Available(); got != 7 { // 0.5×10 + 2
		t.Fatalf("after 10 deposits: Available = %d, want 7", got)
	}
	for i := range 7 {
		if !b.TryWithdraw() {
			t.Fatalf("withdrawal %d refused", i)
		}
	}
	if b.TryWithdraw() {
		t.Fatal("an eighth withdrawal was allowed")
	}
	now = now.Add(11 * time.Second) // everything has left the window
	if got := b.Available(); got != 2 {
		t.Fatalf("after the window: Available = %d, want 2 (floor only)", got)
	}
}

// The zero Budget works with the defaults (ratio 0.2, 1/s over 10 s).
func TestBudgetZeroValueUsesDefaults(t *testing.T) {
	var b Budget
	want := int(DefaultBudgetMinPerSecond * DefaultBudgetWindow.Seconds())
	if got := b.Available(); got != want {
		t.Fatalf("zero Budget: Available = %d, want %d", got, want)
	}
	for range 100 {
		b.Deposit()
	}
	if got, want := b.Available(), want+int(DefaultBudgetRatio*100); got != want {
		t.Fatalf("after 100 deposits: Available = %d, want %d", got, want)
	}
}

// Non-finite and negative options never panic nor make Available negative.
func TestBudgetHostileOptionsTable(t *testing.T) {
	for _, o := range []BudgetOptions{
		{Ratio: math.NaN(), MinPerSecond: math.NaN()},
		{Ratio: math.Inf(1), MinPerSecond: math.Inf(-1)},
		{Ratio: -1, MinPerSecond: -1, Window: -time.Second},
		{Ratio: 1e308, MinPerSecond: 1e308, Window: math.MaxInt64},
	} {
		b := NewBudget(o)
		for range 50 {
			b.Deposit()
			b.TryWithdraw()
			if b.Available() < 0 {
				t.Fatalf("%+v: Available %d", o, b.Available())
			}
		}
	}
	// Negative ratio and floor mean none: nothing may be withdrawn.
	if NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: -1}).TryWithdraw() {
		t.Fatal("negative ratio and floor allowed a withdrawal")
	}
}

// TestBudgetRefundInALaterSlot: a retry released after its wait crossed
// into a later slot of the window is returned all the same.
func TestBudgetRefundInALaterSlot(t *testing.T) {
	clock := newHandClock()
	b := NewBudget(BudgetOptions{MinPerSecond: 0.1, Ratio: -1, Window: 10 * time.Second, Now: clock.Now})
	if !b.TryWithdraw() {
		t.Fatal("a floor of 1 retry per window must allow one")
	}
	clock.Advance(2500 * time.Millisecond) // two slots later
	b.refund()
	if !b.TryWithdraw() {
		t.Fatal("a retry refunded two slots after it was taken is lost")
	}
}

// FuzzBudgetOptions: at any one instant a budget grants no more withdrawals
// than the Available it reported just before, and Available is never negative.
func FuzzBudgetOptions(f *testing.F) {
	f.Add(0.0, 0.0, int64(0), []byte{0, 0, 0, 1, 3, 9})
	f.Add(math.NaN(), math.Inf(1), int64(-1), []byte{200, 1, 0})
	f.Add(-1e308, 1e308, int64(math.MaxInt64), []byte{7, 7, 7})
	f.Fuzz(func(t *testing.T, ratio, floor float64, window int64, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		b := NewBudget(BudgetOptions{Ratio: ratio, MinPerSecond: floor, Window: time.Duration(window), Now: func() time.Time { return now }})
		for _, s := range steps {
			for range s % 4 {
				b.Deposit()
			}
			avail := b.Available()
			if avail < 0 {
				t.Fatalf("available %d", avail)
			}
			granted := 0
			for range min(avail, 40) + 1 {
				if b.TryWithdraw() {
					granted++
				}
			}
			if avail < 40 && granted > avail {
				t.Fatalf("%d withdrawals granted with %d available", granted, avail)
			}
			now = now.Add(time.Duration(int8(s)) * 211 * time.Millisecond)
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

// TestBudgetLongHealthBeforeTheFirstRetry: a budget first consulted after
// an hour of requests (36,000, ten a second) holds the ratio of the last
// window's requests, not of the hour's: the first deposit notes when they
// began. Before, the first placement counted the hour as recent, and a
// service failing after an hour of health met 7,200 retries in its first
// window where the budget means 20 (and the floor's 10).
func TestBudgetLongHealthBeforeTheFirstRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetOptions{Window: 10 * time.Second})
		for range 36_000 {
			b.Deposit()
			time.Sleep(100 * time.Millisecond)
		}
		if got := b.Available(); got < 28 || got > 32 {
			t.Fatalf("%d retries available, want about 30: 0.2 of the 100 requests in the window and the floor's 10", got)
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
