package retry

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// countingQuota is a Quota that is not a *TokenBucket, as a shared quota of
// another package would be: it records every call.
type countingQuota struct {
	mu              sync.Mutex
	level           int
	takes, refunds  int
	taken, refunded int
}

func (q *countingQuota) Take(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.takes++
	if n <= 0 {
		return true
	}
	if q.level < n {
		return false
	}
	q.level -= n
	q.taken += n
	return true
}

func (q *countingQuota) Refund(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refunds++
	if n > 0 {
		q.level += n
		q.refunded += n
	}
}

func (q *countingQuota) Available() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.level
}

func TestStandardUsesAnyQuota(t *testing.T) {
	q := &countingQuota{level: 20}
	s := NewStandard(StandardOptions{Bucket: q, Backoff: Constant(0)})
	ctx := context.Background()

	// Success first time: the quota is credited with SuccessIncrement.
	if err := Do(ctx, s, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if q.refunded != 1 || q.Available() != 21 {
		t.Fatalf("after a first-attempt success: refunded %d, level %d; want 1, 21", q.refunded, q.Available())
	}

	// One retry costs RetryCost and is refunded when it succeeds.
	n := 0
	if err := Do(ctx, s, func(context.Context) error {
		if n++; n == 1 {
			return errTransient
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if q.taken != DefaultRetryCost || q.Available() != 21 {
		t.Fatalf("after a successful retry: taken %d, level %d; want %d, 21", q.taken, q.Available(), DefaultRetryCost)
	}

	// An exhausted quota refuses the retry with a QuotaError.
	q.mu.Lock()
	q.level = DefaultRetryCost - 1
	q.mu.Unlock()
	err := Do(ctx, s, func(context.Context) error { return errTransient })
	var qe *QuotaError
	if !errors.Is(err, ErrQuotaExhausted) || !errors.As(err, &qe) || qe.Available != DefaultRetryCost-1 {
		t.Fatalf("err = %v; want a QuotaError reporting %d available", err, DefaultRetryCost-1)
	}
	if got := s.Available("any scope"); got != DefaultRetryCost-1 {
		t.Fatalf("Available = %d; the shared quota holds %d", got, DefaultRetryCost-1)
	}
}

func TestStandardReleaseRefundsQuota(t *testing.T) {
	q := &countingQuota{level: 100}
	s := NewStandard(StandardOptions{Bucket: q})
	tok, _ := s.AcquireInitialToken("")
	tok, err := s.RefreshToken(tok, errTransient)
	if err != nil {
		t.Fatal(err)
	}
	if q.Available() != 100-DefaultRetryCost {
		t.Fatalf("level %d after a granted retry", q.Available())
	}
	if err := s.ReleaseToken(tok); err != nil {
		t.Fatal(err)
	}
	if q.Available() != 100 {
		t.Fatalf("level %d after releasing the retry; want it refunded to 100", q.Available())
	}
}

func TestStandardNilTokenBucketIsDefault(t *testing.T) {
	var b *TokenBucket
	s := NewStandard(StandardOptions{Bucket: b})
	if got := s.Available(""); got != DefaultBucketCapacity {
		t.Fatalf("Available = %d; a nil *TokenBucket must mean the default bucket", got)
	}
	if err := Do(context.Background(), s, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}
