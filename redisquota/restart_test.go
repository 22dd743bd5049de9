package redisquota_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
	"github.com/retrykit/retry/redisquota/internal/fleet"
)

// TestRedisRestart kills Redis (SIGKILL) under a quota and starts it again
// on the same port. The quota falls back to its local quota and logs it
// once, rejoins when Redis is back and logs that once, and loses no refund:
// with an append-only file that survives the kill, the pool ends exactly at
// capacity - taken + refunded; without one, the pool starts again full and
// the lost lease is reported. Meanwhile 8 goroutines hammer another quota on
// the same Redis, which must not panic or leave the bounds.
func TestRedisRestart(t *testing.T) {
	for _, persist := range []bool{true, false} {
		t.Run(fmt.Sprintf("persist=%v", persist), func(t *testing.T) {
			var extra []string
			if persist {
				extra = []string{"--appendonly", "yes", "--appendfsync", "always"}
			}
			r := startRedis(t, extra...)
			c := redis.NewClient(&redis.Options{Addr: r.Addr})
			defer c.Close()
			var l watchedLogs
			const capacity = 10000
			opts := redisquota.Options{Capacity: capacity, LeaseSize: 50, FlushInterval: time.Hour, LeaseTTL: time.Minute,
				Timeout: 200 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, Logger: slog.New(&l)}
			q := redisquota.New(c, "restart", opts)

			var loadLogs watchedLogs
			load := redisquota.New(c, "restart-load", redisquota.Options{Capacity: 500, FlushInterval: 5 * time.Millisecond,
				Timeout: 50 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, Logger: slog.New(&loadLogs)})
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					rnd := rand.New(rand.NewPCG(uint64(g), 2))
					for {
						select {
						case <-stop:
							return
						default:
						}
						if !load.Take(14) {
							load.Refund(1 + rnd.IntN(14))
						} else if rnd.IntN(2) == 0 {
							load.Refund(14)
						}
						// Pacing, so that the load leaves the CPUs some
						// room; no check depends on its length.
						time.Sleep(100 * time.Microsecond)
					}
				})
			}

			for range 10 {
				if !q.Take(14) {
					t.Fatal("Take failed with Redis up")
				}
			}
			if err := q.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.Kill(); err != nil {
				t.Fatal(err)
			}
			q.Refund(30) // pending: sent when Redis is back
			for range 3 {
				if err := q.Sync(t.Context()); err == nil {
					t.Fatal("Sync succeeded with Redis down")
				}
			}
			if q.Shared() {
				t.Fatal("still shared with Redis down")
			}
			if !q.Take(14) {
				t.Error("the fallback quota refused a retry")
			}
			q.Refund(7) // to the fallback quota
			// The loaded quota saw the outage too.
			loadLogs.await(t, "falling back")
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			l.await(t, "rejoined")
			loadLogs.await(t, "rejoined")
			if !q.Shared() || !load.Shared() {
				t.Fatalf("rejoined, but not shared (quota %v, load %v):\n%s", q.Shared(), load.Shared(), &l)
			}
			close(stop)
			wg.Wait()
			if err := load.Close(); err != nil && persist {
				t.Errorf("closing the loaded quota: %v", err)
			}
			if err := q.Close(); err != nil {
				t.Fatalf("Close after the restart: %v", err)
			}
			if n := l.count("falling back"); n != 1 {
				t.Errorf("%d fallback records, want 1:\n%s", n, &l)
			}
			if n := l.count("rejoined"); n != 1 {
				t.Errorf("%d rejoin records, want 1:\n%s", n, &l)
			}
			if !strings.Contains(l.String(), "fallback_capacity=10000") {
				t.Errorf("the fallback record does not give the local quota's capacity:\n%s", &l)
			}
			lost := "lease_lost=0"
			if !persist {
				lost = "lease_lost=50" // the lease in hand at the kill, gone with the data
			}
			if !strings.Contains(l.String(), lost) {
				t.Errorf("the rejoin record does not say %s:\n%s", lost, &l)
			}
			tokens, leased := pool(t, c, "restart")
			want := capacity - 10*14 + 30
			if !persist {
				want = capacity
			}
			if tokens != want || leased != 0 {
				t.Errorf("after the restart the pool holds %d free and %d leased; want %d free, 0 leased", tokens, leased, want)
			}
			lt, ll := pool(t, c, "restart-load")
			if lt < 0 || ll != 0 || lt > 500 {
				t.Errorf("loaded pool: %d free, %d leased", lt, ll)
			}
			t.Logf("pool %d, loaded pool %d; log:\n%s", tokens, lt, &l)
		})
	}
}

// TestCluster runs a quota through a Redis Cluster client against a
// one-node cluster on loopback: the three keys map to one slot, so the
// script runs (a cross-slot script would fail with CROSSSLOT). Keys whose
// braces would hold nothing (empty, or starting with '}') too: Redis would
// hash each whole name, into slots of their own.
func TestCluster(t *testing.T) {
	r := startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	ctx := t.Context()
	admin := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		t.Fatal(err)
	}
	// The node says when its cluster is ready only when asked: poll, within
	// a bound.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(admin.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s, tag := admin.ClusterKeySlot(ctx, redisquota.Keys("svc")[0]).Val(), admin.ClusterKeySlot(ctx, "svc").Val(); s != tag {
		t.Errorf("the keys of svc are in slot %d, not that of the hash tag svc (%d)", s, tag)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}})
	defer cc.Close()
	names := map[string]string{}
	for _, key := range []string{"svc", "", "}", "}svc", "=", "{}", "a}b"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			keys := redisquota.Keys(key)
			slot := admin.ClusterKeySlot(ctx, keys[0]).Val()
			for _, k := range keys {
				if s := admin.ClusterKeySlot(ctx, k).Val(); s != slot {
					t.Errorf("key %s in slot %d, %s in slot %d", k, s, keys[0], slot)
				}
				if other, ok := names[k]; ok {
					t.Errorf("keys %q and %q share the name %s", other, key, k)
				}
				names[k] = key
			}
			q := redisquota.New(cc, key, redisquota.Options{Capacity: 100, LeaseSize: 20, Timeout: upTimeout, Logger: slog.New(&logs{})})
			if !q.Take(14) || !q.Shared() {
				t.Fatal("Take through the cluster failed")
			}
			q.Refund(14)
			if err := q.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if tokens, leased := pool(t, cc, key); tokens != 100 || leased != 0 {
				t.Errorf("pool through the cluster: %d free, %d leased; want 100, 0", tokens, leased)
			}
		})
	}
	// A fleet's circuits and evidence: every scope of a name in one slot,
	// which one script call serves.
	for _, name := range []string{"svc", "}", "}svc", "=", "{}", "a}b"} {
		for kind, key := range map[string]func(name, scope string) string{"circuit": redisquota.CircuitKey, "evidence": redisquota.EvidenceKey} {
			a, b := key(name, "a"), key(name, "other scope")
			if sa, sb := admin.ClusterKeySlot(ctx, a).Val(), admin.ClusterKeySlot(ctx, b).Val(); sa != sb {
				t.Errorf("%s keys of %q: %s in slot %d, %s in slot %d", kind, name, a, sa, b, sb)
			}
		}
	}
}

// TestSentinel runs a quota through a Sentinel (failover) client: the
// client finds the master through a Redis Sentinel on loopback.
func TestSentinel(t *testing.T) {
	master := startRedis(t)
	s, err := fleet.StartSentinel(t.Context(), t.TempDir(), "quota-master", master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill() })
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "quota-master", SentinelAddrs: []string{s.Addr}})
	defer fc.Close()
	q := redisquota.New(fc, "sentinel", redisquota.Options{Capacity: 100, LeaseSize: 20, Timeout: upTimeout})
	if !q.Take(14) {
		t.Fatal("Take through Sentinel failed")
	}
	if err := q.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer direct.Close()
	if tokens, leased := pool(t, direct, "sentinel"); tokens != 100-14 || leased != 0 {
		t.Errorf("pool on the master: %d free, %d leased; want %d, 0", tokens, leased, 100-14)
	}
}
