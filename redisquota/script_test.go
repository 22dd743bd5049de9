package redisquota_test

import (
	"slices"
	"testing"

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
		v, err := redisquota.RunScript(t.Context(), c, key, "p", 100, bal, gack, rack, rtotal, want, 0, 10000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return v // status, granted, balance, tokens, leased, capacity
	}
	check := func(what string, got []int64, want ...int64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: reply %v, want %v", what, got, want)
		}
	}
	check("first lease (reply lost)", call(0, 0, 0, 0, 50), 1, 50, 50, 50, 50, 100)
	// The process never saw the 50: it reports none in hand, none received,
	// and 10 refunds recorded since. The lost grant goes back, the refunds
	// are capped at the capacity, and a new lease is granted.
	check("after the lost grant", call(0, 0, 0, 10, 50), 0, 50, 50, 50, 50, 100)
	// It spends 30 and records 20 more refunds: the reply is lost...
	check("refunds (reply lost)", call(20, 50, 10, 30, 20), 0, 0, 20, 70, 20, 100)
	// ...and it sends the same again: nothing changes.
	check("the same call again", call(20, 50, 10, 30, 20), 0, 0, 20, 70, 20, 100)
	// Released, the lease goes back whole.
	check("release", call(20, 50, 30, 30, -1), 0, 0, 0, 90, 0, 100)
}
