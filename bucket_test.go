package retry

import (
	"sync"
	"sync/atomic"
	"testing"
)

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
