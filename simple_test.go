package retry

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSimpleMaxRetryAfter(t *testing.T) {
	s := &Simple{MaxRetryAfter: time.Second}
	if _, err := s.RefreshToken(mustAcquire(t, s, ""), RetryAfter(errBoom, 2*time.Second)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Fatal(err)
	}
}

// TestSimpleNextDecidesAsRefreshToken drives two Simples with the same
// configuration and the same random stream, one through tokens and one
// through Next, over the same failures, and requires the same waits and the
// same refusals.
func TestSimpleNextDecidesAsRefreshToken(t *testing.T) {
	unsafe := WithInfo(errBoom, Info{Safety: Unsafe})
	hinted := WithInfo(errBoom, Info{Safety: Safe, Throttle: true, RetryAfter: 3 * time.Second, Fault: FaultServer})
	tooLong := WithInfo(errBoom, Info{Safety: Safe, RetryAfter: time.Hour, Fault: FaultServer})
	exact := WithInfo(errBoom, Info{Safety: Safe, RetryAfter: 7 * time.Millisecond, Exact: true, Fault: FaultServer})
	failures := [][]error{
		{errTransient, errTransient, errTransient, errTransient, errTransient, errTransient},
		{errThrottled, hinted, errTransient, errTimeout, errThrottled},
		{exact, errTransient, exact},
		{errTransient, tooLong},
		{errTransient, unsafe},
		{errBoom},
		{errTransient, nil},
	}
	configs := map[string]func(rnd func() float64) *Simple{
		"defaults": func(rnd func() float64) *Simple {
			return &Simple{Backoff: Exponential{Base: 50 * time.Millisecond, Jitter: FullJitter, Rand: rnd}}
		},
		"one attempt": func(func() float64) *Simple { return &Simple{MaxAttempts: -1} },
		"full jitter": func(rnd func() float64) *Simple {
			return &Simple{MaxAttempts: 5, Backoff: Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: FullJitter, Rand: rnd}}
		},
		"decorrelated": func(rnd func() float64) *Simple {
			return &Simple{MaxAttempts: 6, Backoff: Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: DecorrelatedJitter, Rand: rnd}}
		},
		"short hints": func(rnd func() float64) *Simple {
			return &Simple{MaxAttempts: 6, MaxRetryAfter: 2 * time.Second, Backoff: Linear{Base: time.Millisecond}}
		},
	}
	for name, mk := range configs {
		for i, errs := range failures {
			withTokens := mk(rand.New(rand.NewPCG(uint64(i), 7)).Float64)
			tokenless := mk(rand.New(rand.NewPCG(uint64(i), 7)).Float64)
			tok, err := withTokens.AcquireInitialToken("")
			if err != nil {
				t.Fatal(err)
			}
			if tok.Delay() != 0 {
				t.Fatalf("%s: a first attempt waits %v; Next's doc says it goes at once", name, tok.Delay())
			}
			retries, prev := 0, time.Duration(0)
			for n, failure := range errs {
				next, refused := withTokens.RefreshToken(tok, failure)
				wait, refusedToo := tokenless.Next(retries, prev, failure)
				if (refused == nil) != (refusedToo == nil) || refused != nil && refused.Error() != refusedToo.Error() {
					t.Fatalf("%s, failures %d, attempt %d: RefreshToken refused with %v, Next with %v", name, i, n+1, refused, refusedToo)
				}
				if refused != nil {
					for _, sentinel := range []error{ErrMaxAttempts, ErrNotRetryable, ErrRetryAfterTooLong} {
						if errors.Is(refused, sentinel) != errors.Is(refusedToo, sentinel) {
							t.Fatalf("%s: RefreshToken's refusal %v and Next's %v differ on %v", name, refused, refusedToo, sentinel)
						}
					}
					break
				}
				if next.Delay() != wait || next.RetryCount() != retries+1 {
					t.Fatalf("%s, failures %d, attempt %d: RefreshToken waits %v for retry %d, Next %v for retry %d",
						name, i, n+1, next.Delay(), next.RetryCount(), wait, retries+1)
				}
				tok, retries, prev = next, retries+1, wait
			}
		}
	}
}

func TestSimpleNextAbsurdArguments(t *testing.T) {
	s := &Simple{MaxAttempts: math.MaxInt, Backoff: Exponential{Base: time.Millisecond, Max: time.Second, Jitter: DecorrelatedJitter}}
	if _, err := s.Next(math.MaxInt, time.Second, errTransient); !errors.Is(err, ErrMaxAttempts) {
		t.Errorf("Next after math.MaxInt retries = %v, want ErrMaxAttempts (not an overflow that grants one more)", err)
	}
	for _, tc := range []struct {
		retries int
		prev    time.Duration
	}{{-5, -time.Hour}, {math.MinInt, math.MinInt64}, {3, math.MaxInt64}} {
		d, err := s.Next(tc.retries, tc.prev, errTransient)
		if err != nil || d < 0 || d > time.Second {
			t.Errorf("Next(%d, %v) = %v, %v; want a wait within the backoff's [0, 1s]", tc.retries, tc.prev, d, err)
		}
	}
	if _, err := (&Simple{}).Next(0, 0, nil); !errors.Is(err, ErrNotRetryable) {
		t.Errorf("Next with a nil error = %v, want ErrNotRetryable", err)
	}
}

func TestSimple(t *testing.T) {
	var s Simple
	tok := mustAcquire(t, &s, "")
	tok = mustRefresh(t, &s, tok, errTransient)
	if tok.Delay() >= 50*time.Millisecond {
		t.Fatalf("default backoff: %v", tok.Delay())
	}
	tok = mustRefresh(t, &s, tok, errTransient)
	if _, err := s.RefreshToken(tok, errTransient); !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("err = %v, want ErrMaxAttempts after 3 attempts", err)
	}
	// No quota: a thousand requests of retries are all granted.
	many := &Simple{MaxAttempts: 2, Backoff: Linear{Base: time.Second}}
	for range 1000 {
		tok := mustRefresh(t, many, mustAcquire(t, many, ""), errTransient)
		if tok.Delay() != time.Second {
			t.Fatalf("delay = %v, want 1s", tok.Delay())
		}
		_ = many.RecordSuccess(tok)
	}
	// Throttling errors use the given backoff too; hints are a minimum with a cap.
	tok = mustRefresh(t, many, mustAcquire(t, many, ""), Throttled(RetryAfter(errBoom, 2*time.Second)))
	if tok.Delay() != 2*time.Second {
		t.Fatalf("delay = %v, want 2s", tok.Delay())
	}
	if _, err := many.RefreshToken(mustAcquire(t, many, ""), RetryAfter(errBoom, time.Hour)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Fatalf("err = %v, want ErrRetryAfterTooLong", err)
	}
	if _, err := many.RefreshToken(mustAcquire(t, many, ""), errBoom); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("err = %v, want ErrNotRetryable", err)
	}
	one := &Simple{MaxAttempts: -5}
	if _, err := one.RefreshToken(mustAcquire(t, one, ""), errTransient); !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("negative MaxAttempts: err = %v, want one attempt only", err)
	}
}

func TestNo(t *testing.T) {
	var n No
	if _, err := n.RefreshToken(mustAcquire(t, &n, ""), errTransient); !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("err = %v, want ErrMaxAttempts", err)
	}
	if _, err := n.RefreshToken(mustAcquire(t, &n, ""), errBoom); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("err = %v, want ErrNotRetryable", err)
	}
	if err := n.RecordSuccess(mustAcquire(t, &n, "")); err != nil {
		t.Fatal(err)
	}
}
