package redisquota_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
)

// TestConservation has 8 quotas of one key, each with a client of its own,
// take retries of every cost from 1 to 20 with a LeaseSize of 5, so that
// the lease keeps growing to one retry's cost and its surplus going back to
// Redis while other goroutines spend from it. No token may be minted or
// lost: after every quota closed, the pool holds exactly start - taken +
// refunded. The pool starts half full, so that no refund is dropped at the
// capacity.
func TestConservation(t *testing.T) {
	const capacity, start = 100000, 50000
	key := fresh(t, "conservation")
	admin := client(t)
	if err := admin.HSet(t.Context(), redisquota.Keys(key)[0], "tokens", start, "leased", 0, "capacity", capacity).Err(); err != nil {
		t.Fatal(err)
	}
	opts := redisquota.Options{Capacity: capacity, LeaseSize: 5, FlushInterval: time.Millisecond, Timeout: upTimeout}
	quotas := make([]*redisquota.Quota, 8)
	for i := range quotas {
		c := redis.NewClient(&redis.Options{Addr: sharedRedis})
		t.Cleanup(func() { c.Close() })
		quotas[i] = redisquota.New(c, key, opts)
	}
	var taken, refunded atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 * len(quotas) {
		q := quotas[g%len(quotas)]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 18))
			for range 100 {
				n := 1 + r.IntN(20)
				if !q.Take(n) {
					continue
				}
				taken.Add(int64(n))
				if r.IntN(3) == 0 {
					m := 1 + r.IntN(n)
					q.Refund(m)
					refunded.Add(int64(m))
				}
			}
		})
	}
	wg.Wait()
	for _, q := range quotas {
		if !q.Shared() {
			t.Fatal("a quota fell back to its local quota with Redis up")
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tokens, leased := pool(t, admin, key)
	want := start - int(taken.Load()) + int(refunded.Load())
	t.Logf("taken %d, refunded %d: pool %d, leased %d", taken.Load(), refunded.Load(), tokens, leased)
	if tokens != want || leased != 0 {
		t.Errorf("after every quota closed the pool holds %d free and %d leased; want start - taken + refunded = %d free, 0 leased (%+d tokens)",
			tokens, leased, want, tokens-want)
	}
}
