package redisquota

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// store stands in for Redis in the tests of the quota's timing, which run in
// virtual time (testing/synctest): it keeps one process's lease and the
// pool, and records when it was called and with what. Everything about
// Redis itself is tested against a real Redis server (main_test.go).
type store struct {
	mu    sync.Mutex
	pool  int64
	held  int64
	fail  bool
	block bool
	calls []call
}

type call struct {
	at                time.Time
	bal, want, rtotal int64
}

var errDown = errors.New("connection refused")

func (s *store) run(ctx context.Context, _ []string, args ...any) (reply, error) {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		return reply{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	bal, rack, rtotal, want, need := args[2].(int64), args[4].(int64), args[5].(int64), args[6].(int64), args[7].(int64)
	s.calls = append(s.calls, call{time.Now(), bal, want, rtotal})
	if s.fail {
		return reply{}, errDown
	}
	bal = min(bal, s.held) // spent tokens are gone
	s.pool += rtotal - rack
	var granted int64
	switch {
	case want < 0:
		s.pool += bal
		bal = 0
	case want < bal:
		s.pool += bal - want
		bal = want
	default:
		granted = min(want-bal, s.pool)
		if bal+granted < need {
			granted = 0
		}
		s.pool -= granted
		bal += granted
	}
	s.held = bal
	return reply{statusOK, granted, bal, s.pool, bal, 0}, nil
}

func (s *store) set(fail, block bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.block = fail, block
}

func (s *store) log() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Refunds are sent within FlushInterval, at once when LeaseSize of them pile
// up, and an idle quota with nothing to send makes no calls.
func TestFlushSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 1000}
		q := newQuota(s.run, "k", Options{Capacity: 1000, LeaseSize: 50, Logger: quiet()})
		defer q.Close()
		start := time.Now()
		time.Sleep(10 * time.Second)
		if n := len(s.log()); n != 0 {
			t.Fatalf("%d calls from an idle quota", n)
		}
		q.Refund(1)
		refunded := time.Now()
		time.Sleep(DefaultFlushInterval)
		synctest.Wait()
		calls := s.log()
		if len(calls) != 1 || calls[0].rtotal != 1 || calls[0].at.Sub(refunded) > DefaultFlushInterval {
			t.Fatalf("after one refund: calls %+v (refund at %v)", calls, refunded.Sub(start))
		}
		q.Refund(50)
		synctest.Wait()
		calls = s.log()
		if len(calls) != 2 || calls[1].rtotal != 51 || !calls[1].at.Equal(time.Now()) {
			t.Fatalf("50 refunds were not sent at once: %+v", calls)
		}
		for range 20 {
			q.Refund(1)
			time.Sleep(10 * time.Millisecond)
		}
		calls = s.log()
		for i := 2; i < len(calls); i++ {
			if d := calls[i].at.Sub(calls[i-1].at); d < DefaultFlushInterval {
				t.Errorf("calls %d and %d %v apart under a trickle of refunds", i-1, i, d)
			}
		}
	})
}

// A lease is spent only until 90 % of its TTL after the call that granted
// or renewed it: past that, Redis may have handed it to another process.
func TestLeaseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 1000}
		ttl := 3 * time.Second
		q := newQuota(s.run, "k", Options{Capacity: 1000, LeaseSize: 100, LeaseTTL: ttl, Timeout: 2 * ttl, Logger: quiet()})
		defer q.Close()
		granted := time.Now()
		if !q.Take(10) {
			t.Fatal("first Take failed")
		}
		s.set(false, true) // Redis hangs: renewals never answer
		time.Sleep(ttl*9/10 - time.Millisecond - time.Since(granted))
		if !q.spend(10, time.Now()) {
			t.Fatal("lease refused before 90 % of its TTL")
		}
		time.Sleep(time.Millisecond)
		if q.spend(10, time.Now()) {
			t.Fatal("lease spent at 90 % of its TTL without a renewal")
		}
		if got := q.lease.Load(); got != 80 {
			t.Errorf("lease %d, want 80", got)
		}
		s.set(false, false)
	})
}

// While Redis is down the quota tries again with jittered exponential
// backoff from FlushInterval up to ReconnectMax, never in lockstep and never
// faster than half a step; it rejoins at the first answer.
func TestReconnectBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 1000, fail: true}
		r := 0.0
		q := newQuota(s.run, "k", Options{Capacity: 1000, ReconnectMax: 2 * time.Second, Logger: quiet(),
			Rand: func() float64 { r = 1 - r; return r * 0.999 }}) // alternate the extremes
		defer q.Close()
		if !q.Take(14) || q.Shared() {
			t.Fatal("Take with Redis down: want the fallback quota")
		}
		time.Sleep(30 * time.Second)
		calls := s.log()
		for i := 1; i < len(calls); i++ {
			step := min(DefaultFlushInterval<<(i-1), 2*time.Second)
			if d := calls[i].at.Sub(calls[i-1].at); d < step/2 || d > step {
				t.Errorf("attempt %d came %v after the previous; want within [%v, %v]", i, d, step/2, step)
			}
		}
		if n := len(calls); n < 15 || n > 30 {
			t.Errorf("%d attempts in 30 s of outage", n)
		}
		s.set(false, false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !q.Shared() {
			t.Error("not rejoined 2 s (ReconnectMax) after Redis came back")
		}
	})
}

// A process that stops retrying gives its lease back after a third of the
// lease TTL, so idle processes do not sit on the fleet's tokens; while it
// retries it keeps the lease topped up in the background.
func TestIdleLeaseReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 1000}
		q := newQuota(s.run, "k", Options{Capacity: 1000, LeaseSize: 50, LeaseTTL: 3 * time.Second, Logger: quiet()})
		defer q.Close()
		for range 4 {
			if !q.Take(14) {
				t.Fatal("Take failed")
			}
			// The background top-up a take asks for runs before the
			// next take: otherwise whether a take finds the lease
			// topped up, or refills it itself, depends on scheduling.
			synctest.Wait()
		}
		if q.lease.Load() < 50/2 {
			t.Errorf("lease %d not topped up in the background", q.lease.Load())
		}
		// One round trip for the first lease, and one in the background
		// each time a take left less than half of it (the 2nd, 36 → 22,
		// and the 4th): the takes themselves wait for none after the first.
		if trips := q.RoundTrips(); trips != 3 {
			t.Errorf("%d round trips for 4 takes, want 3 (the first lease, two top-ups)", trips)
		}
		time.Sleep(time.Second + DefaultFlushInterval)
		synctest.Wait()
		if got := q.lease.Load(); got != 0 {
			t.Errorf("idle for a third of the TTL, the process still holds %d tokens", got)
		}
		if s.pool != 1000-4*14 {
			t.Errorf("pool %d, want %d", s.pool, 1000-4*14)
		}
	})
}

// When the fleet's pool is empty, as in an outage, retries are refused
// without a round trip each: the process asks Redis again at most once per
// FlushInterval.
func TestEmptyPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 0}
		q := newQuota(s.run, "k", Options{Capacity: 1000, Logger: quiet()})
		defer q.Close()
		if q.Take(14) {
			t.Fatal("Take from an empty pool succeeded")
		}
		for range 100 {
			if q.Take(14) {
				t.Fatal("Take from an empty pool succeeded")
			}
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		// 1 s of retries every 10 ms: about one call per FlushInterval.
		if n := len(s.log()); n < 5 || n > 12 {
			t.Errorf("%d calls in 1 s of 100 refused retries; want about 10", n)
		}
	})
}

// A LeaseTTL too long for the quota's arithmetic (90 % of it overflowed past
// about 32 years, and every lease was past its deadline as soon as granted)
// is taken as the longest it allows: a take from a fresh lease succeeds.
func TestHugeLeaseTTL(t *testing.T) {
	for _, ttl := range []time.Duration{40 * 365 * 24 * time.Hour, math.MaxInt64} {
		synctest.Test(t, func(t *testing.T) {
			s := &store{pool: 1000}
			q := newQuota(s.run, "k", Options{Capacity: 1000, LeaseSize: 50, LeaseTTL: ttl, Logger: quiet()})
			defer q.Close()
			if !q.Take(14) || q.lease.Load() != 50-14 {
				t.Errorf("LeaseTTL %v: Take from a granted lease failed (lease %d)", ttl, q.lease.Load())
			}
		})
	}
}

// A FlushInterval so long that doubling it overflows (the backoff starts at
// it and doubles per failure) must leave the reconnection backoff at
// ReconnectMax, not turn it negative and retry Redis without pause.
func TestHugeFlushIntervalBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls int
		var mu sync.Mutex
		run := func(context.Context, []string, ...any) (reply, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n > 100 {
				<-release // the backoff broke: stop the storm, so that time passes
			}
			return reply{}, errDown
		}
		q := newQuota(run, "k", Options{Capacity: 1000, FlushInterval: 1 << 50, ReconnectMax: time.Hour,
			Timeout: time.Hour, Logger: quiet()})
		if !q.Take(14) || q.Shared() {
			t.Fatal("Take with Redis down: want the fallback quota")
		}
		time.Sleep(24 * time.Hour)
		mu.Lock()
		n := calls
		mu.Unlock()
		// At least half of ReconnectMax between attempts.
		if n > 50 {
			t.Errorf("%d attempts to reach Redis in 24 h with ReconnectMax 1 h", n)
		}
		close(release)
		q.Close()
	})
}

// A lease below zero (tokens owed, see adjustLease) with an empty pool
// leaves nothing to count on, not a negative count.
func TestAvailableOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{pool: 0}
		q := newQuota(s.run, "k", Options{Capacity: 1000, Logger: quiet()})
		defer q.Close()
		q.lease.Store(-5)
		q.pool.Store(0)
		if got := q.Available(); got != 0 {
			t.Errorf("Available = %d owing 5 to an empty pool, want 0", got)
		}
	})
}
