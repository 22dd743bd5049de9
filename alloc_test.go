package retry

import (
	"context"
	"testing"
)

// TestZeroAllocations pins the promise that the success path, and a run with
// two zero-delay retries that then succeeds, allocate nothing. The race
// detector makes sync.Pool drop items at random, so it is skipped there.
func TestZeroAllocations(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	standard := NewStandard(StandardOptions{})
	adaptive := NewAdaptive(AdaptiveOptions{})
	budgeted := NewStandard(StandardOptions{Budget: NewBudget(BudgetOptions{})})
	simple := &Simple{Backoff: Constant(0)}
	n := 0
	twoRetries := func(context.Context) error {
		if n++; n%3 != 0 {
			return errTransient
		}
		return nil
	}
	opts := []Option{Scope("svc"), AttemptTimeout(0)}
	attempts := 0
	trace := WithTrace(&Trace{AttemptDone: func(context.Context, string, int, error) { attempts++ }})
	// A type that wraps a strategy goes through the Strategy methods and
	// single-use tokens rather than the built-in fast path.
	wrapped := &struct{ Strategy }{NewStandard(StandardOptions{})}
	wrappedSimple := &struct{ Strategy }{&Simple{Backoff: Constant(0)}}
	tests := []struct {
		name string
		run  func()
	}{
		{"success", func() { _ = Do(ctx, standard, succeed) }},
		{"success with Adaptive", func() { _ = Do(ctx, adaptive, succeed) }},
		{"success with Adaptive in a scope", func() { _ = Do(ctx, adaptive, succeed, Scope("svc")) }},
		{"success with Standard and a Budget", func() { _ = Do(ctx, budgeted, succeed) }},
		{"success with options", func() { _ = Do(ctx, standard, succeed, opts...) }},
		{"success with zero options", func() { _ = Do(ctx, standard, succeed, Option{}, Option{}) }},
		{"success with a Trace", func() { _ = Do(ctx, standard, succeed, trace) }},
		{"two zero-delay retries", func() { _ = Do(ctx, simple, twoRetries) }},
		{"success through tokens", func() { _ = Do(ctx, wrapped, succeed) }},
		{"two retries through tokens", func() { _ = Do(ctx, wrappedSimple, twoRetries) }},
		{"DoValue", func() { _, _ = DoValue(ctx, standard, func(context.Context) (int, error) { return 1, nil }) }},
	}
	for _, tt := range tests {
		tt.run() // warm the pool
		if got := testing.AllocsPerRun(1000, tt.run); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, got)
		}
	}
}
