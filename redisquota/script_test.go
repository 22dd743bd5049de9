package redisquota_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/redisquota"
)

// TestLostReplies plays a process whose replies are lost on the way, call by
// call against the real script: a grant it never received goes back to the
// pool, and refunds sent again are not counted twice.
func TestLostReplies(t *testing.T) {
	c := client(t)
	key := fresh(t, "lost-replies")
	call := func(bal, gack, rack, rtotal, want int64) []int64 {
		t.Helper()
		return runScript(t, c, key, "p", bal, gack, rack, rtotal, want)
	}
	checkReply(t, "first lease (reply lost)", call(0, 0, 0, 0, 50), 1, 50, 50, 50, 50, 100)
	// The process never saw the 50: it reports none in hand, none received,
	// and 10 refunds recorded since. The lost grant goes back, the refunds
	// are capped at the capacity, and a new lease is granted.
	checkReply(t, "after the lost grant", call(0, 0, 0, 10, 50), 0, 50, 50, 50, 50, 100)
	// It spends 30 and records 20 more refunds: the reply is lost...
	checkReply(t, "refunds (reply lost)", call(20, 50, 10, 30, 20), 0, 0, 20, 70, 20, 100)
	// ...and it sends the same again: nothing changes.
	checkReply(t, "the same call again", call(20, 50, 10, 30, 20), 0, 0, 20, 70, 20, 100)
	// Released, the lease goes back whole.
	checkReply(t, "release", call(20, 50, 30, 30, -1), 0, 0, 0, 90, 0, 100)
}

// TestLostLeaseRecords deletes, with a second client, the lease records of
// a pool that survives (as maxmemory eviction or a partial flush would):
// the tokens leased to records that are gone come back on the next call.
func TestLostLeaseRecords(t *testing.T) {
	c := client(t)
	other := client(t) // the eviction, or whoever flushed the keys
	for _, tc := range []struct {
		name string
		lost []string
	}{
		{"leases and expiries", redisquota.Keys("lost-records")[1:]},
		{"leases", redisquota.Keys("lost-records")[1:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fresh(t, "lost-records")
			holder := redisquota.New(c, key, redisquota.Options{Capacity: 100, LeaseSize: 40, Timeout: upTimeout, Logger: slog.New(&logs{})})
			defer holder.Close()
			if !holder.Take(14) {
				t.Fatal("Take failed")
			}
			if tokens, leased := pool(t, c, key); tokens != 60 || leased != 40 {
				t.Fatalf("with the lease: %d free, %d leased; want 60, 40", tokens, leased)
			}
			if err := other.Del(t.Context(), tc.lost...).Err(); err != nil {
				t.Fatal(err)
			}
			q := redisquota.New(c, key, redisquota.Options{Capacity: 100, Timeout: upTimeout})
			defer q.Close()
			if err := q.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if tokens, leased := pool(t, c, key); tokens != 100 || leased != 0 {
				t.Errorf("after the next call: %d free, %d leased; want the 40 leased back in the pool", tokens, leased)
			}
			// The holder's tokens went back to the pool: it drops them (and
			// takes a new lease, as it is retrying) rather than give them
			// back a second time.
			if err := holder.Sync(t.Context()); !errors.Is(err, redisquota.ErrLeaseLost) {
				t.Errorf("the holder's Sync = %v, want ErrLeaseLost", err)
			}
			if tokens, leased := pool(t, c, key); tokens+leased != 100 || leased != 40 {
				t.Errorf("after the holder's call: %d free, %d leased; want 60, 40 (a new lease)", tokens, leased)
			}
		})
	}

	// Only the expiries are lost: the leases are still on record, so their
	// holders keep them, but a dead holder's must still come back. The
	// expiries run on Redis's clock, in real time: rather than wait for one,
	// the test checks the deadline each lease was given and then moves the
	// dead holder's into the past, as Redis's clock passing it would.
	t.Run("expiries", func(t *testing.T) {
		key := fresh(t, "lost-expiries")
		const ttl = 60000 // ms: no lease expires on its own during the test
		call := func(id string, bal, gack, want int64) []int64 {
			t.Helper()
			v, err := redisquota.RunScript(t.Context(), c, key, id, 100, bal, gack, 0, 0, want, 0, ttl, 0)
			if err != nil {
				t.Fatal(err)
			}
			return v // status, granted, balance, tokens, leased, capacity
		}
		now := func() int64 {
			t.Helper()
			tm, err := c.Time(t.Context()).Result()
			if err != nil {
				t.Fatal(err)
			}
			return tm.UnixMilli()
		}
		call("dead", 0, 0, 40)
		call("live", 0, 0, 20)
		keys := redisquota.Keys(key)
		if err := other.Del(t.Context(), keys[2]).Err(); err != nil {
			t.Fatal(err)
		}
		before := now()
		if v := call("probe", 0, 0, 0); v[3] != 40 || v[4] != 60 {
			t.Fatalf("after the expiries were lost: %d free, %d leased; want 40, 60 (the leases are on record)", v[3], v[4])
		}
		after := now()
		if h, z := c.HLen(t.Context(), keys[1]).Val(), c.ZCard(t.Context(), keys[2]).Val(); h != 3*z || z != 3 {
			t.Errorf("%d lease fields, %d expiries: want 3 leases of 3 fields, each with an expiry", h, z)
		}
		for _, id := range []string{"dead", "live"} {
			if at := int64(c.ZScore(t.Context(), keys[2], id).Val()); at < before+ttl || at > after+ttl {
				t.Errorf("%s's lease expires at %d, want the TTL (%d ms) from the call that found it without one (%d to %d)",
					id, at, ttl, before+ttl, after+ttl)
			}
		}
		// The live holder renews: its lease is whole.
		if v := call("live", 20, 20, 20); v[0] != 0 || v[2] != 20 {
			t.Fatalf("the live holder's renewal: %v, want status 0 and its 20 tokens", v)
		}
		// The dead holder's TTL runs out.
		if err := c.ZAddXX(t.Context(), keys[2], redis.Z{Score: float64(now() - 1), Member: "dead"}).Err(); err != nil {
			t.Fatal(err)
		}
		if v := call("probe", 0, 0, 0); v[3] != 80 || v[4] != 20 {
			t.Fatalf("the dead holder's lease did not come back: %d free, %d leased; want 80, 20 (the live one's 20 still leased)", v[3], v[4])
		}
	})
}

// TestOwedBalance plays, call by call against the real script, a process
// that spent tokens from its lease while a call of its gave the lease's
// surplus back: its balance went below zero, and its next call must take
// what it owes from the pool, or keep owing what the pool cannot pay.
func TestOwedBalance(t *testing.T) {
	c := client(t)
	key := fresh(t, "owed")
	call := func(id string, bal, gack, want int64) []int64 {
		t.Helper()
		return runScript(t, c, key, id, bal, gack, 0, 0, want)
	}
	checkReply(t, "p's lease", call("p", 0, 0, 50), 1, 50, 50, 50, 50, 100)
	checkReply(t, "q's lease", call("q", 0, 0, 45), 0, 45, 45, 5, 95, 100)
	// p gives back all but 10 of its 50; takes spend 30 meanwhile, so it
	// holds 10 - 30 = -20.
	checkReply(t, "p gives back its surplus", call("p", 50, 50, 10), 0, 0, 10, 45, 55, 100)
	checkReply(t, "q takes the pool", call("q", 45, 45, 90), 0, 45, 90, 0, 100, 100)
	checkReply(t, "p owes 20 to an empty pool", call("p", -20, 50, 0), 0, 0, -20, 0, 90, 100)
	checkReply(t, "q gives back 45", call("q", 90, 90, 45), 0, 0, 45, 45, 45, 100)
	checkReply(t, "p pays its 20", call("p", -20, 50, 0), 0, 0, 0, 25, 45, 100)
	checkReply(t, "q releases", call("q", 45, 90, -1), 0, 0, 0, 70, 0, 100)
}

// runScript runs the script on key as process id, with a capacity of 100, a
// lease TTL of 10 s, no key TTL and no least useful balance, and returns its
// reply: status, granted, balance, tokens, leased, capacity.
func runScript(t *testing.T, c redis.UniversalClient, key, id string, bal, gack, rack, rtotal, want int64) []int64 {
	t.Helper()
	v, err := redisquota.RunScript(t.Context(), c, key, id, 100, bal, gack, rack, rtotal, want, 0, 10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkReply reports a script's reply that is not the one wanted.
func checkReply(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: reply %v, want %v", what, got, want)
	}
}
