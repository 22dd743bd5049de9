package redisquota_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
	"github.com/retrykit/retry/redisquota/internal/fleet"
)

// TestFleetAmplification runs 8 real processes of this test binary against a
// loopback HTTP server that fails every request, once with a quota per
// process and once with one quota in Redis, and compares the load the server
// sees. Processes come and go in waves (restarts, scale-outs, short jobs):
// a quota in memory starts full in each new process. The second case keeps
// the processes for the whole outage.
func TestFleetAmplification(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	command := func() *exec.Cmd { return exec.Command(self, "-test.run=^$") }
	cases := []struct {
		name            string
		waves, requests int
		localAtLeast    float64
		sharedAtMost    float64
	}{
		{"5 waves of 8 processes, 10 requests each", 5, 10, 2.9, 1.1},
		{"8 processes for the whole outage, 50 requests each", 1, 50, 1.5, 1.1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fleet.Config{Processes: 8, Waves: tc.waves, Requests: tc.requests, Capacity: 500,
				Key: fresh(t, "amplification-"+strconv.Itoa(tc.waves)), Command: command}
			local, err := fleet.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Redis = sharedRedis
			shared, err := fleet.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("per-process quotas: %d attempts for %d requests, %.3fx; fleet quota: %d attempts, %.3fx, %d round trips to Redis (%.2f per request)",
				local.Attempts, local.Requests, local.Amplification(), shared.Attempts, shared.Amplification(),
				shared.RoundTrips, float64(shared.RoundTrips)/float64(shared.Requests))
			if shared.RoundTrips == 0 || shared.RoundTrips > int64(shared.Requests) {
				t.Errorf("%d round trips to Redis for %d requests; want at most one per request", shared.RoundTrips, shared.Requests)
			}
			if a := local.Amplification(); a < tc.localAtLeast {
				t.Errorf("per-process quotas gave %.3fx, want at least %.2fx (the comparison is void)", a, tc.localAtLeast)
			}
			if a := shared.Amplification(); a > tc.sharedAtMost {
				t.Errorf("fleet quota gave %.3fx, want at most %.2fx", a, tc.sharedAtMost)
			}
			// 500 tokens pay for 35 retries of cost 14 in the whole fleet.
			if extra := shared.Attempts - int64(shared.Requests); extra > 500/14 {
				t.Errorf("fleet made %d retries; its quota pays for %d", extra, 500/14)
			}
		})
	}
}

// TestConcurrentTakes has 64 goroutines on 4 quotas of one key take and
// refund at once while another goroutine reads the pool: the count never
// leaves [0, capacity], and without refunds every token taken is accounted
// for exactly once.
func TestConcurrentTakes(t *testing.T) {
	c := client(t)
	for _, refunds := range []bool{false, true} {
		t.Run(fmt.Sprintf("refunds=%v", refunds), func(t *testing.T) {
			const capacity = 1000
			key := fresh(t, fmt.Sprintf("concurrent-%v", refunds))
			opts := redisquota.Options{Capacity: capacity, LeaseSize: 30, FlushInterval: 5 * time.Millisecond, Timeout: upTimeout}
			quotas := make([]*redisquota.Quota, 4)
			for i := range quotas {
				quotas[i] = redisquota.New(c, key, opts)
			}
			stop := make(chan struct{})
			var watch sync.WaitGroup
			var reads atomic.Int64
			watch.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					v, err := c.HMGet(context.Background(), redisquota.Keys(key)[0], "tokens", "leased").Result()
					if err != nil || v[0] == nil {
						continue
					}
					tokens, _ := strconv.Atoi(v[0].(string))
					leased, _ := strconv.Atoi(v[1].(string))
					reads.Add(1)
					if tokens < 0 || leased < 0 || tokens+leased > capacity {
						t.Errorf("pool out of bounds: tokens %d, leased %d, capacity %d", tokens, leased, capacity)
					}
				}
			})
			var taken atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				q := quotas[g%len(quotas)]
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for range 150 {
						n := 1 + r.IntN(20)
						if q.Take(n) {
							taken.Add(int64(n))
						}
						if refunds && r.IntN(3) == 0 {
							q.Refund(1 + r.IntN(20))
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
			close(stop)
			watch.Wait()
			tokens, leased := pool(t, c, key)
			t.Logf("taken %d, pool %d, leased %d, %d reads of the pool", taken.Load(), tokens, leased, reads.Load())
			if leased != 0 {
				t.Errorf("%d tokens still leased after every quota closed", leased)
			}
			if !refunds && tokens != capacity-int(taken.Load()) {
				t.Errorf("pool holds %d, want capacity - taken = %d", tokens, capacity-int(taken.Load()))
			}
			if tokens < 0 || tokens > capacity {
				t.Errorf("pool %d out of [0, %d]", tokens, capacity)
			}
			if reads.Load() == 0 {
				t.Error("the pool was never read while the quotas ran")
			}
		})
	}
}

// TestWrongType: a quota key holding a string gives an error naming the key
// and ErrWrongType; the quota falls back to its local quota, logs once, and
// rejoins when the key is fixed.
func TestWrongType(t *testing.T) {
	c := client(t)
	key := fresh(t, "wrongtype")
	if err := c.Set(t.Context(), redisquota.Keys(key)[0], "not a quota", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var l logs
	q := redisquota.New(c, key, redisquota.Options{Capacity: 100, Logger: slog.New(&l)})
	defer q.Close()
	for range 3 {
		err := q.Sync(t.Context())
		if !errors.Is(err, redisquota.ErrWrongType) {
			t.Fatalf("Sync = %v, want ErrWrongType", err)
		}
		if msg := err.Error(); !strings.Contains(msg, redisquota.Keys(key)[0]) || !strings.Contains(msg, "holds a string, not a hash") {
			t.Errorf("error %q does not say which key holds what", msg)
		}
	}
	if q.Shared() {
		t.Error("Shared after WRONGTYPE")
	}
	if !q.Take(14) || q.Available() != 100-14 {
		t.Errorf("fallback quota: Available %d after a take of 14 from 100", q.Available())
	}
	if n := l.count("falling back"); n != 1 {
		t.Errorf("%d records of the fallback, want 1:\n%s", n, &l)
	}
	if err := c.Del(t.Context(), redisquota.Keys(key)[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.Sync(t.Context()); err != nil {
		t.Fatalf("Sync after the key was fixed: %v", err)
	}
	if !q.Shared() || l.count("rejoined") != 1 {
		t.Errorf("not rejoined after the key was fixed:\n%s", &l)
	}
}

// TestKeyExpiry: when the keys expire under a process that holds a lease,
// the next call says so with ErrLeaseLost, the lease is dropped, and the
// quota carries on with a new pool. The keys carry their time to live.
func TestKeyExpiry(t *testing.T) {
	c := client(t)
	key := fresh(t, "expiry")
	var l logs
	q := redisquota.New(c, key, redisquota.Options{Capacity: 100, LeaseSize: 50, KeyTTL: time.Minute, Logger: slog.New(&l)})
	defer q.Close()
	if !q.Take(14) {
		t.Fatal("Take from a new quota failed")
	}
	for _, k := range redisquota.Keys(key) {
		ttl, err := c.PTTL(t.Context(), k).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Errorf("key %s: TTL %v, %v; want up to a minute", k, ttl, err)
		}
		// An expiry time already past: Redis removes the key as at the
		// end of its TTL, at once rather than on its clock.
		if err := c.PExpireAt(t.Context(), k, time.UnixMilli(1)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Exists(t.Context(), redisquota.Keys(key)...).Val(); n != 0 {
		t.Fatalf("%d keys left after their expiry time", n)
	}
	err := q.Sync(t.Context())
	if !errors.Is(err, redisquota.ErrLeaseLost) || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "36 tokens") {
		t.Fatalf("Sync after the keys expired = %v, want ErrLeaseLost naming the 36 tokens held", err)
	}
	if l.count("gone when the lease was renewed") != 1 {
		t.Errorf("lost lease not logged:\n%s", &l)
	}
	if err := q.Sync(t.Context()); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	tokens, leased := pool(t, c, key)
	if tokens+leased != 100 || leased != q.Available()-tokens {
		t.Errorf("new pool: %d free, %d leased; quota sees %d", tokens, leased, q.Available())
	}
}

// holdLease is a worker that takes one retry's tokens, says so, and waits
// to be killed with its lease in hand.
func holdLease() error {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("REDISQUOTA_TEST_ADDR")})
	q := redisquota.New(c, os.Getenv("REDISQUOTA_TEST_HOLD"), redisquota.Options{Capacity: 100, LeaseSize: 40, LeaseTTL: 500 * time.Millisecond})
	if !q.Take(14) {
		return errors.New("take failed")
	}
	fmt.Println("ready")
	select {}
}

// TestDeadProcessLease kills a process (SIGKILL) that holds a lease: its
// tokens come back to the fleet once the lease expires.
func TestDeadProcessLease(t *testing.T) {
	c := client(t)
	key := fresh(t, "dead")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "RETRYKIT_FLEET_WORKER=1", "REDISQUOTA_TEST_HOLD="+key, "REDISQUOTA_TEST_ADDR="+sharedRedis)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("worker said %q, %v", line, err)
	}
	if tokens, leased := pool(t, c, key); tokens != 60 || leased != 40 {
		t.Errorf("with the worker's lease: %d free, %d leased; want 60, 40", tokens, leased)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	q := redisquota.New(c, key, redisquota.Options{Capacity: 100, LeaseSize: 10})
	defer q.Close()
	// The worker's lease expires on Redis's clock, 500 ms after its last
	// renewal, and nothing tells when: poll, within a bound.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := q.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		tokens, leased := pool(t, c, key)
		if leased == 0 && tokens == 100 {
			break // the dead worker's 40 (14 of them spent) are back
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead worker's lease never came back: %d free, %d leased", tokens, leased)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNilClient: New with no client (nil, or a nil *redis.Client) must not
// panic, now or at the first call: the quota says why every call fails and
// runs on its local quota.
func TestNilClient(t *testing.T) {
	for name, c := range map[string]redis.UniversalClient{"nil": nil, "nil *redis.Client": (*redis.Client)(nil)} {
		t.Run(name, func(t *testing.T) {
			var l logs
			q := redisquota.New(c, "nil-client", redisquota.Options{Capacity: 100, Logger: slog.New(&l)})
			if !q.Take(14) || q.Shared() || q.Available() != 100-14 {
				t.Errorf("Take with no client: Shared %v, Available %d; want a take from the local quota of 100", q.Shared(), q.Available())
			}
			if err := q.Sync(t.Context()); err == nil || !strings.Contains(err.Error(), "nil Redis client") {
				t.Errorf("Sync with no client = %v, want an error saying the client is nil", err)
			}
			if err := q.Close(); err != nil && !strings.Contains(err.Error(), "nil Redis client") {
				t.Errorf("Close with no client = %v", err)
			}
			if !strings.Contains(l.String(), "nil Redis client") {
				t.Errorf("the log does not say the client is nil:\n%s", &l)
			}
		})
	}
}
