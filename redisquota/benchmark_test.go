package redisquota_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/redisquota"
)

// BenchmarkTake is a retry's take (cost 14) against the local Redis: from a
// lease of 50 tokens refilled in the background (the default proportion,
// Capacity/10), and with a lease of one token, so that every take is a
// round trip. round-trips/op counts the calls to Redis.
func BenchmarkTake(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lease int
	}{{"lease=50", 50}, {"lease=1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			q := redisquota.New(client(b), "bench-take-"+bc.name, redisquota.Options{Capacity: 1 << 40, LeaseSize: bc.lease})
			defer q.Close()
			b.ReportAllocs()
			start := q.RoundTrips()
			for b.Loop() {
				if !q.Take(14) {
					b.Fatal("Take failed")
				}
			}
			b.ReportMetric(float64(q.RoundTrips()-start)/float64(b.N), "round-trips/op")
		})
	}
}

// BenchmarkPing is one bare round trip to the local Redis: the floor under
// BenchmarkTake/lease=1.
func BenchmarkPing(b *testing.B) {
	c := client(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Ping(b.Context()).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSuccess is the success path, retry.Do with a Standard strategy
// and an operation that succeeds at once, with a *retry.TokenBucket and
// with a Redis quota (whose refunds are sent in the background).
func BenchmarkSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	for _, bc := range []struct {
		name  string
		quota func(b *testing.B) retry.Quota
	}{
		{"TokenBucket", func(*testing.B) retry.Quota { return retry.NewTokenBucket(500) }},
		{"redisquota", func(b *testing.B) retry.Quota {
			q := redisquota.New(client(b), "bench-success", redisquota.Options{})
			b.Cleanup(func() { q.Close() })
			return q
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := retry.NewStandard(retry.StandardOptions{Bucket: bc.quota(b)})
			b.ReportAllocs()
			for b.Loop() {
				if err := retry.Do(ctx, s, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdaptiveSuccess is the success path of a FleetAdaptive's
// strategy against a local retry.Adaptive's: retry.Do with an operation
// that succeeds at once, and the token API (AcquireInitialToken,
// RecordSuccess). The fleet's background sync runs meanwhile, against the
// local Redis; the request path never calls it, so the two should cost the
// same.
func BenchmarkAdaptiveSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	for _, bc := range []struct {
		name     string
		strategy func(b *testing.B) retry.Strategy
	}{
		{"local", func(*testing.B) retry.Strategy { return retry.NewAdaptive(retry.AdaptiveOptions{}) }},
		{"fleet", func(b *testing.B) retry.Strategy {
			f, err := redisquota.NewFleetAdaptive(client(b), "bench-adaptive-"+b.Name(), retry.AdaptiveOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			return f.Strategy()
		}},
	} {
		b.Run("Do/"+bc.name, func(b *testing.B) {
			s := bc.strategy(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := retry.Do(ctx, s, op); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("tokens/"+bc.name, func(b *testing.B) {
			s := bc.strategy(b)
			b.ReportAllocs()
			for b.Loop() {
				t, err := s.AcquireInitialToken("")
				if err != nil {
					b.Fatal(err)
				}
				if err := s.RecordSuccess(t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
