package retry

import (
	"context"
	"testing"
)

// TestZeroAllocations pins the promise that the success path, and a run with
// two zero-delay retries that then succeeds, allocate nothing but the mark on
// the operation's context (see CallerRetries), and nothing at all when told
// Unmarked. The race detector makes sync.Pool drop items at random, so it is
// skipped there.
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
	doWith := func(s Strategy, op func(context.Context) error) func([]Option) {
		return func(o []Option) { _ = Do(ctx, s, op, o...) }
	}
	tests := []struct {
		name string
		run  func([]Option)
		opts []Option
	}{
		{"success", doWith(standard, succeed), nil},
		{"success with Adaptive", doWith(adaptive, succeed), nil},
		{"success with Adaptive in a scope", doWith(adaptive, succeed), []Option{Scope("svc")}},
		{"success with Standard and a Budget", doWith(budgeted, succeed), nil},
		{"success with options", doWith(standard, succeed), opts},
		{"success with zero options", doWith(standard, succeed), []Option{{}, {}}},
		{"success with a Trace", doWith(standard, succeed), []Option{trace}},
		{"two zero-delay retries", doWith(simple, twoRetries), nil},
		{"success through tokens", doWith(wrapped, succeed), nil},
		{"two retries through tokens", doWith(wrappedSimple, twoRetries), nil},
		{"DoValue", func(o []Option) {
			_, _ = DoValue(ctx, standard, func(context.Context) (int, error) { return 1, nil }, o...)
		}, nil},
	}
	for _, tt := range tests {
		unmarked := append(tt.opts[:len(tt.opts):len(tt.opts)], Unmarked())
		tt.run(tt.opts) // warm the pool
		if got := testing.AllocsPerRun(1000, func() { tt.run(tt.opts) }); got != 1 {
			t.Errorf("%s: %v allocations per call, want 1 (the mark)", tt.name, got)
		}
		if got := testing.AllocsPerRun(1000, func() { tt.run(unmarked) }); got != 0 {
			t.Errorf("%s, Unmarked: %v allocations per call, want 0", tt.name, got)
		}
	}
}
