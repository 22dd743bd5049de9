package retry

import (
	"context"
	"testing"
	"time"
)

func succeed(context.Context) error { return nil }

// BenchmarkDo measures the loop's own cost: the operation does nothing.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("success/Standard", func(b *testing.B) {
		s := NewStandard(StandardOptions{})
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success/Standard/Unmarked", func(b *testing.B) {
		s := NewStandard(StandardOptions{})
		unmarked := []Option{Unmarked()}
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed, unmarked...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success/Adaptive", func(b *testing.B) {
		s := NewAdaptive(AdaptiveOptions{})
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success/Standard+Budget", func(b *testing.B) {
		s := NewStandard(StandardOptions{Budget: NewBudget(BudgetOptions{})})
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success/Simple", func(b *testing.B) {
		s := &Simple{}
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-retries/Simple", func(b *testing.B) {
		s := &Simple{Backoff: Constant(0)}
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := Do(ctx, s, func(context.Context) error {
				if n++; n < 3 {
					return errTransient
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-retries/Standard", func(b *testing.B) {
		// A successful retry refunds only its own cost (14 of the 28 paid);
		// the benchmark tops the quota up so that it measures retries, not
		// refusals.
		bucket := NewTokenBucket(DefaultBucketCapacity)
		s := NewStandard(StandardOptions{Backoff: Constant(0), Bucket: bucket})
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := Do(ctx, s, func(context.Context) error {
				if n++; n < 3 {
					return errTransient
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			bucket.Refund(DefaultRetryCost)
		}
	})
	b.Run("success/zero-option", func(b *testing.B) {
		s := NewStandard(StandardOptions{})
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed, Option{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A closed breaker's cost: its baseline is success/Standard, for a
	// closed circuit keeps Do's shortcut.
	b.Run("success/Breaker", func(b *testing.B) {
		s := NewStandard(StandardOptions{})
		opts := []Option{WithBreaker(NewBreaker(BreakerOptions{}))}
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success/options", func(b *testing.B) {
		s := NewStandard(StandardOptions{})
		opts := []Option{Scope("svc"), OnRetry(func(context.Context, int, time.Duration, error) {})}
		b.ReportAllocs()
		for b.Loop() {
			if err := Do(ctx, s, succeed, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStandardParallel is the success path of one shared Standard from
// every core at once: acquire and record, as Do does.
func BenchmarkStandardParallel(b *testing.B) {
	for _, scope := range []string{"", "svc"} {
		b.Run("scope="+scope, func(b *testing.B) {
			s := NewStandard(StandardOptions{})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, _ := s.AcquireInitialToken(scope)
					_ = s.RecordSuccess(tok)
				}
			})
		})
	}
}

// BenchmarkTokenBucketParallel takes and refunds from one bucket on every core.
func BenchmarkTokenBucketParallel(b *testing.B) {
	b.Run("take-refund", func(b *testing.B) {
		bucket := NewTokenBucket(1 << 30)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if bucket.Take(14) {
					bucket.Refund(14)
				}
			}
		})
	})
	b.Run("refund-full", func(b *testing.B) {
		bucket := NewTokenBucket(500)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bucket.Refund(1)
			}
		})
	})
}

func BenchmarkBackoff(b *testing.B) {
	backoffs := []struct {
		name string
		b    Backoff
	}{
		{"Exponential/none", Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second}},
		{"Exponential/full", Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: FullJitter}},
		{"Exponential/equal", Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: EqualJitter}},
		{"Exponential/decorrelated", Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: DecorrelatedJitter}},
		{"Linear/full", Linear{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: FullJitter}},
		{"Constant", Constant(50 * time.Millisecond)},
	}
	for _, bb := range backoffs {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			var prev time.Duration
			n := 0
			for b.Loop() {
				n = n%40 + 1 // cover the saturated range too
				prev = bb.b.Delay(n, prev)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	errs := []struct {
		name string
		err  error
	}{
		{"marked", errTransient},
		{"unclassified", errBoom},
		{"context", context.Canceled},
	}
	for _, e := range errs {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Classify(e.err)
			}
		})
	}
}
