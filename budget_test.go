package retry

import (
	"math"
	"testing"
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
