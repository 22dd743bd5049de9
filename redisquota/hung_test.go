package redisquota_test

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
)

// TestHungRedis pauses Redis (CLIENT PAUSE, sent on a second connection)
// under a quota whose client has go-redis's default options, which ignore a
// context's deadline and wait 5 s (ReadTimeout) for an answer. The quota
// must not wait on it: Take falls back to the local quota within Timeout,
// Close returns within a bound, and no goroutine of the quota outlives
// Close. Each case pauses a server of its own, so that no other test waits.
func TestHungRedis(t *testing.T) {
	// Generous: Timeout is 100 ms, the pauses 2.5 s and 5 s. Without the
	// bound, Take waits out the pause and Close the 5 s ReadTimeout.
	const bound = time.Second
	setup := func(t *testing.T, opaque ...bool) (*redisquota.Quota, func(ms int), *logs) {
		r := startRedis(t)
		c := redis.NewClient(&redis.Options{Addr: r.Addr}) // as the documentation shows
		t.Cleanup(func() { c.Close() })
		admin := redis.NewClient(&redis.Options{Addr: r.Addr})
		t.Cleanup(func() { admin.Close() })
		var l logs
		var client redis.UniversalClient = c
		if len(opaque) > 0 {
			// Its methods are the interface's alone: no WithTimeout, as
			// with a Cluster or Ring client.
			client = struct{ redis.UniversalClient }{c}
		}
		q := redisquota.New(client, "hung", redisquota.Options{Capacity: 100, LeaseSize: 40, Logger: slog.New(&l)})
		t.Cleanup(func() { q.Close() })
		pause := func(ms int) {
			if err := admin.Do(t.Context(), "CLIENT", "PAUSE", ms).Err(); err != nil {
				t.Fatal(err)
			}
		}
		return q, pause, &l
	}

	t.Run("take", func(t *testing.T) {
		q, pause, l := setup(t)
		pause(2500)
		start := time.Now()
		ok := q.Take(14)
		if d := time.Since(start); d > bound {
			t.Errorf("Take took %v with Redis paused; want about Timeout (100 ms), at most %v", d, bound)
		}
		if !ok || q.Shared() || q.Available() != 100-14 {
			t.Errorf("Take = %v, Shared %v, Available %d: want a take of 14 from the local quota of 100", ok, q.Shared(), q.Available())
		}
		if l.count("falling back") != 1 {
			t.Errorf("the fallback was not logged:\n%s", l)
		}
		closeWithin(t, q, bound)
	})

	// Without WithTimeout the quota cannot shorten the client's socket
	// deadlines: Take must stop waiting at Timeout all the same. (Close
	// then waits for the call, up to the client's ReadTimeout: the pause
	// is shorter than that, and than the bound Take must keep.)
	t.Run("take through a client without WithTimeout", func(t *testing.T) {
		q, pause, _ := setup(t, true)
		pause(1500)
		start := time.Now()
		ok := q.Take(14)
		if d := time.Since(start); d > bound {
			t.Errorf("Take took %v with Redis paused; want about Timeout (100 ms), at most %v", d, bound)
		}
		if !ok || q.Shared() {
			t.Errorf("Take = %v, Shared %v: want a take from the local quota", ok, q.Shared())
		}
	})

	t.Run("close with a lease", func(t *testing.T) {
		q, pause, _ := setup(t)
		if !q.Take(14) || !q.Shared() {
			t.Fatal("Take failed with Redis up")
		}
		pause(5000)
		closeWithin(t, q, bound)
	})
}

// closeWithin closes q and checks that it returned within bound and left
// no goroutine of the quota running.
func closeWithin(t *testing.T, q *redisquota.Quota, bound time.Duration) {
	t.Helper()
	start := time.Now()
	_ = q.Close() // an error is expected: Redis did not answer the last call
	if d := time.Since(start); d > bound {
		t.Errorf("Close took %v with Redis paused; want at most %v", d, bound)
	}
	// A goroutine that Close waited for has signalled that it is done but
	// may not have returned yet, and nothing signals its return: poll the
	// stacks, giving it a generous bound to go (it is runnable; a loaded
	// machine may leave it waiting for a CPU).
	for deadline := time.Now().Add(10 * time.Second); ; {
		g := quotaGoroutines()
		if g == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines of the quota still running after Close:\n%s", g)
			break
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// quotaGoroutines returns the stacks of the goroutines running code of
// package redisquota (not of its tests: their frames read redisquota_test).
func quotaGoroutines() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/retrykit/retry/redisquota.") {
			found = append(found, g)
		}
	}
	return strings.Join(found, "\n\n")
}
