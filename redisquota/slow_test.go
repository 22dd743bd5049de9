package redisquota_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
)

// slowQuota returns a quota on key of the shared Redis reached through a
// proxy that holds Redis's answers for delay, and the proxy. The script is
// loaded (and the pool created) before the delay starts, so that each call
// is one round trip. With opaque, the client has the interface's methods
// alone, without WithTimeout, as a Cluster or Ring client.
func slowQuota(t *testing.T, key string, delay time.Duration, opts redisquota.Options, opaque bool) (*redisquota.Quota, *slowProxy) {
	t.Helper()
	p := newSlowProxy(t, sharedRedis, 0)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { c.Close() })
	var client redis.UniversalClient = c
	if opaque {
		client = struct{ redis.UniversalClient }{c}
	}
	q := redisquota.New(client, fresh(t, key), opts)
	t.Cleanup(func() { q.Close() })
	if err := q.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.setDelay(delay)
	return q, p
}

// TestSlowRedisTakes: through a Redis that answers in 40 ms, within the
// Timeout of 100 ms, 32 goroutines take retries bigger than the lease at
// once. Each Take may wait for a call under way and then make its own, at
// most Timeout each; it must not queue behind every other Take's round
// trip (32 of them, 1.3 s).
func TestSlowRedisTakes(t *testing.T) {
	needRedis(t)
	const timeout = 100 * time.Millisecond
	q, _ := slowQuota(t, "slow-takes", 40*time.Millisecond,
		redisquota.Options{Capacity: 1000, LeaseSize: 1, Timeout: timeout, Logger: slog.New(&logs{})}, false)
	var (
		mu    sync.Mutex
		waits []time.Duration
		ok    int
	)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			start := time.Now()
			took := q.Take(5)
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			if took {
				ok++
			}
		})
	}
	wg.Wait()
	slices.Sort(waits)
	t.Logf("%d of 32 takes granted; waits from %v to %v", ok, waits[0], waits[len(waits)-1])
	// Twice Timeout, and room for a loaded machine under -race.
	if longest := waits[len(waits)-1]; longest > 2*timeout+200*time.Millisecond {
		t.Errorf("a Take waited %v through a Redis answering in 40 ms; want at most twice Timeout (%v)", longest, timeout)
	}
	if ok == 0 {
		t.Error("no Take was granted")
	}
}

// TestSyncCallerContext: a Sync whose own context is cancelled, or ends
// before Redis answers, returns the context's error; Redis is up, so the
// quota must neither fall back to its local quota nor log an outage, and
// the next Sync takes in the answer it left behind.
func TestSyncCallerContext(t *testing.T) {
	needRedis(t)
	var l logs
	q, _ := slowQuota(t, "sync-context", 50*time.Millisecond,
		redisquota.Options{Capacity: 100, Timeout: upTimeout, Logger: slog.New(&l)}, false)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := q.Sync(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Sync with a cancelled context = %v, want context.Canceled", err)
	}
	short, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	if err := q.Sync(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sync with a context of 5 ms through a Redis answering in 50 ms = %v, want context.DeadlineExceeded", err)
	}
	if !q.Shared() || l.count("unavailable") != 0 {
		t.Errorf("Shared = %v after the caller's context ended with Redis up; log:\n%s", q.Shared(), &l)
	}
	if err := q.Sync(t.Context()); err != nil {
		t.Errorf("Sync after: %v", err)
	}
	if !q.Shared() || l.count("unavailable") != 0 {
		t.Errorf("Shared = %v; log:\n%s", q.Shared(), &l)
	}
}

// TestCloseTakesLateGrant: through a client without WithTimeout (as a
// Cluster or Ring client) and a Redis answering in 400 ms, a Take gives up
// at Timeout (250 ms) and Redis grants the lease all the same. Close must
// take that late grant in and give it back, or say that it could not. At
// 650 ms the answer comes after Close's first wait for it (Timeout) too.
func TestCloseTakesLateGrant(t *testing.T) {
	needRedis(t)
	// FlushInterval: no reconnection attempt takes the answer in before
	// Close does. Timeout: room for a loaded machine when Redis answers
	// at once again.
	opts := redisquota.Options{Capacity: 100, LeaseSize: 40, FlushInterval: 10 * time.Second,
		Timeout: 250 * time.Millisecond, Logger: slog.New(&logs{})}
	for _, tc := range []struct {
		delay time.Duration
		up    bool // whether Redis answers at once again before Close
	}{{400 * time.Millisecond, true}, {650 * time.Millisecond, true}, {400 * time.Millisecond, false}} {
		t.Run(fmt.Sprintf("%v, fast again=%v", tc.delay, tc.up), func(t *testing.T) {
			up := tc.up
			key := fmt.Sprintf("late-grant-%v-%v", tc.delay.Milliseconds(), up)
			q, p := slowQuota(t, key, tc.delay, opts, true)
			if !q.Take(14) || q.Shared() {
				t.Fatalf("Take through a Redis answering after Timeout: Shared = %v, want a take from the local quota", q.Shared())
			}
			if !up {
				if err := q.Close(); err == nil {
					t.Error("Close = nil through a Redis answering after Timeout; want the error of the call giving the late grant back")
				}
				return
			}
			p.setDelay(0)
			if err := q.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if tokens, leased := pool(t, client(t), key); tokens != 100 || leased != 0 {
				t.Errorf("after Close the pool holds %d free and %d leased; want the late grant back: 100 free, 0 leased", tokens, leased)
			}
		})
	}
}
