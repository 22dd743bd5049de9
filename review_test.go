package retry

// Tests added after a mutation-testing review: each kills a plausible bug
// that the other tests let through.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

type recBackoff struct {
	mu   sync.Mutex
	ns   []int
	prev []time.Duration
}

func (r *recBackoff) Delay(n int, prev time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ns = append(r.ns, n)
	r.prev = append(r.prev, prev)
	return time.Duration(n) * time.Second
}

func TestThrottleBackoffUsed(t *testing.T) {
	s := NewStandard(StandardOptions{Backoff: Constant(time.Millisecond), ThrottleBackoff: Constant(7 * time.Second)})
	if d := mustRefresh(t, s, mustAcquire(t, s, ""), errThrottled).Delay(); d != 7*time.Second {
		t.Fatalf("throttled delay %v", d)
	}
	if d := mustRefresh(t, s, mustAcquire(t, s, ""), errTransient).Delay(); d != time.Millisecond {
		t.Fatalf("transient delay %v", d)
	}
	sp := &Simple{Backoff: Constant(3 * time.Second)}
	if d := mustRefresh(t, sp, mustAcquire(t, sp, ""), errThrottled).Delay(); d != 3*time.Second {
		t.Fatalf("simple throttled delay %v", d)
	}
}

func TestBackoffArgs(t *testing.T) {
	rb := &recBackoff{}
	s := NewStandard(StandardOptions{Backoff: rb, MaxAttempts: 4})
	tok := mustAcquire(t, s, "")
	for range 3 {
		tok = mustRefresh(t, s, tok, errTransient)
	}
	wantN := []int{1, 2, 3}
	wantP := []time.Duration{0, time.Second, 2 * time.Second}
	for i := range wantN {
		if rb.ns[i] != wantN[i] || rb.prev[i] != wantP[i] {
			t.Fatalf("calls n=%v prev=%v", rb.ns, rb.prev)
		}
	}
}

func TestRefundCapped(t *testing.T) {
	b := NewTokenBucket(500)
	b.Take(5)
	s := NewStandard(StandardOptions{Bucket: b, SuccessIncrement: 10})
	_ = s.RecordSuccess(mustAcquire(t, s, ""))
	if b.Available() != 500 {
		t.Fatalf("level %d", b.Available())
	}
	b.Take(3)
	b.Refund(1 << 40)
	if b.Available() != 500 {
		t.Fatalf("level %d", b.Available())
	}
}

func TestTakeZero(t *testing.T) {
	b := NewTokenBucket(0)
	if !b.Take(0) || !b.Take(-1) || b.Available() != 0 {
		t.Fatal("Take(<=0) must succeed and change nothing")
	}
}

func TestSimpleMaxRetryAfter(t *testing.T) {
	s := &Simple{MaxRetryAfter: time.Second}
	if _, err := s.RefreshToken(mustAcquire(t, s, ""), RetryAfter(errBoom, 2*time.Second)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Fatal(err)
	}
}

func TestBucketConcurrent(t *testing.T) {
	for range 2000 {
		b := NewTokenBucket(20)
		start := make(chan struct{})
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				if b.Take(14) {
					ok.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 1 || b.Available() != 6 {
			t.Fatalf("%d takes granted, level %d", ok.Load(), b.Available())
		}
	}
}

func TestRefundConcurrent(t *testing.T) {
	for range 500 {
		b := NewTokenBucket(1000)
		b.Take(500)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				<-start
				for range 50 {
					if g%2 == 0 {
						b.Refund(1)
					} else {
						b.Take(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if b.Available() != 500 {
			t.Fatalf("level %d, want 500", b.Available())
		}
	}
}

func TestTokenSpendRace(t *testing.T) {
	s := &Simple{MaxAttempts: 10}
	for range 3000 {
		tok := mustAcquire(t, s, "")
		start := make(chan struct{})
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				if s.RecordSuccess(tok) == nil {
					ok.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("accepted %d times", ok.Load())
		}
	}
}

func TestScopeCreateRace(t *testing.T) {
	for i := range 300 {
		s := NewStandard(StandardOptions{Backoff: Constant(0)})
		scope := "x"
		if i%2 == 0 {
			scope = ""
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				tok, _ := s.AcquireInitialToken(scope)
				_, _ = s.RefreshToken(tok, errTransient)
			})
		}
		close(start)
		wg.Wait()
		if s.Available(scope) != 500-8*14 {
			t.Fatalf("scope %q: %d, want %d", scope, s.Available(scope), 500-8*14)
		}
		if scope != "" && s.scopes.count != 1 {
			t.Fatalf("count %d", s.scopes.count)
		}
	}
}

func TestFitsBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := failing(10, errTransient)
		err := Do(context.Background(), &Simple{MaxAttempts: 10, Backoff: Constant(2 * time.Second)}, c.op, MaxElapsed(4*time.Second))
		if c.calls() != 2 || time.Since(start) != 2*time.Second || !errors.Is(err, ErrDeadline) {
			t.Fatalf("calls %d in %v: %v", c.calls(), time.Since(start), err)
		}
	})
}

func TestAcquireFailedPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &delayed{refuse: errors.New("no")}
		var failed, retried, gave int
		var dl time.Duration
		_ = Do(context.Background(), s, func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if ok {
				dl = time.Until(d)
			}
			return errTransient
		}, AttemptTimeout(time.Second),
			OnAttemptFailed(func(_ context.Context, a int, _ error) { failed += a }),
			OnRetry(func(context.Context, int, time.Duration, error) { retried++ }),
			OnGiveUp(func(context.Context, *Error) { gave++ }))
		if failed != 1 || retried != 0 || gave != 1 || dl != time.Second {
			t.Fatalf("failed %d retried %d gave %d deadline %v", failed, retried, gave, dl)
		}
	})
}

func TestRefusalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip()
	}
	s := NewStandard(StandardOptions{})
	perm := Permanent(errBoom)
	f := func() { tok, _ := s.AcquireInitialToken(""); _, _ = s.RefreshToken(tok, perm) }
	f()
	if n := testing.AllocsPerRun(1000, f); n != 0 {
		t.Fatalf("policy refusal: %v allocs", n)
	}
	e := NewStandard(StandardOptions{Bucket: NewTokenBucket(0)})
	g := func() { tok, _ := e.AcquireInitialToken(""); _, _ = e.RefreshToken(tok, errTransient) }
	g()
	if n := testing.AllocsPerRun(1000, g); n > 1 {
		t.Fatalf("quota refusal: %v allocs, want 1 (the QuotaError)", n)
	}
}
