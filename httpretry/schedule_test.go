package httpretry

import (
	"errors"
	"iter"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// A Schedule is a retry.Backoff.
var _ retry.Backoff = Schedule(nil)

const ptMaxDuration = time.Duration(math.MaxInt64)

// ptSeq converts a slice to an iter.Seq, then to a Schedule.
func ptSeq(ds ...time.Duration) Schedule {
	var seq iter.Seq[time.Duration] = slices.Values(ds)
	return Schedule(seq)
}

type ptDelayCase struct {
	n    int
	want time.Duration
}

func TestScheduleDelay(t *testing.T) {
	const f = 200 * time.Millisecond
	tests := []struct {
		name  string
		s     Schedule
		cases []ptDelayCase
	}{
		{"WaitFor(3s)", WaitFor(3 * time.Second), []ptDelayCase{
			{1, 3 * time.Second}, {2, 3 * time.Second}, {100, 3 * time.Second},
		}},
		{"WaitFor(0)", WaitFor(0), []ptDelayCase{{1, 0}, {7, 0}}},
		{"WaitFor(-1s)", WaitFor(-time.Second), []ptDelayCase{{1, 0}, {2, 0}}},

		// HXEP-0001: yield 0, then factor * 2^(n-2).
		{"ExponentialBackoff(200ms)", ExponentialBackoff(f), []ptDelayCase{
			{1, 0}, {2, f}, {3, 2 * f}, {4, 4 * f}, {5, 8 * f}, {11, 512 * f},
		}},
		{"ExponentialBackoff(1s)", ExponentialBackoff(time.Second), []ptDelayCase{
			{1, 0}, {2, time.Second}, {3, 2 * time.Second}, {4, 4 * time.Second},
		}},
		// 2^21 h = 7.549747e18 ns fits; 2^22 h = 1.5099e19 ns does not.
		{"ExponentialBackoff(1h) saturates", ExponentialBackoff(time.Hour), []ptDelayCase{
			{23, (1 << 21) * time.Hour},
			{24, ptMaxDuration},
			{100, ptMaxDuration},
			{10_000, ptMaxDuration},
		}},
		{"ExponentialBackoff(1ns) saturates", ExponentialBackoff(1), []ptDelayCase{
			{64, 1 << 62}, {65, ptMaxDuration}, {66, ptMaxDuration},
		}},
		{"ExponentialBackoff(0)", ExponentialBackoff(0), []ptDelayCase{{1, 0}, {2, 0}, {50, 0}}},
		{"ExponentialBackoff(-1s)", ExponentialBackoff(-time.Second), []ptDelayCase{{1, 0}, {2, 0}, {3, 0}, {100, 0}}},

		{"Cap", ExponentialBackoff(time.Second).Cap(5 * time.Second), []ptDelayCase{
			{1, 0}, {2, time.Second}, {3, 2 * time.Second}, {4, 4 * time.Second},
			{5, 5 * time.Second}, {6, 5 * time.Second}, {100, 5 * time.Second}, {10_000, 5 * time.Second},
		}},
		{"Cap(1h) of ExponentialBackoff(1h)", ExponentialBackoff(time.Hour).Cap(time.Hour), []ptDelayCase{
			{1, 0}, {2, time.Hour}, {3, time.Hour}, {10_000, time.Hour},
		}},
		{"Cap of WaitFor", WaitFor(time.Minute).Cap(time.Second), []ptDelayCase{{1, time.Second}, {9, time.Second}}},
		{"Cap above WaitFor", WaitFor(time.Second).Cap(time.Minute), []ptDelayCase{{1, time.Second}, {9, time.Second}}},
		{"Cap of a finite schedule", ptSeq(time.Second, 10*time.Second).Cap(3 * time.Second), []ptDelayCase{
			{1, time.Second}, {2, 3 * time.Second}, {3, 3 * time.Second}, {50, 3 * time.Second},
		}},

		{"finite schedule repeats its last delay", ptSeq(time.Second, 2*time.Second, 3*time.Second), []ptDelayCase{
			{1, time.Second}, {2, 2 * time.Second}, {3, 3 * time.Second}, {4, 3 * time.Second}, {100, 3 * time.Second},
		}},
		{"one delay", ptSeq(7 * time.Second), []ptDelayCase{{1, 7 * time.Second}, {2, 7 * time.Second}}},
		{"empty schedule", ptSeq(), []ptDelayCase{{1, 0}, {2, 0}, {100, 0}}},
		{"nil slice", ptSeq(nil...), []ptDelayCase{{1, 0}}},
		{"negative delays yield 0", ptSeq(-time.Second, 2*time.Second, -3*time.Second), []ptDelayCase{
			{1, 0}, {2, 2 * time.Second}, {3, 0}, {4, 0},
		}},
		{"n = 0 and negative n are n = 1", ptSeq(time.Second, 2*time.Second), []ptDelayCase{
			{0, time.Second}, {-1, time.Second}, {math.MinInt, time.Second},
		}},
		{"n <= 0 for ExponentialBackoff", ExponentialBackoff(time.Second), []ptDelayCase{{0, 0}, {-5, 0}}},
		{"n <= 0 for WaitFor", WaitFor(time.Second), []ptDelayCase{{0, time.Second}, {-5, time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range tt.cases {
				// prev is ignored by a schedule.
				for _, prev := range []time.Duration{0, time.Hour, -time.Second} {
					if got := tt.s.Delay(c.n, prev); got != c.want {
						t.Errorf("Delay(%d, %v) = %v, want %v", c.n, prev, got, c.want)
					}
				}
			}
		})
	}
}

func TestExponentialBackoffNeverNegativeNorDecreasing(t *testing.T) {
	factors := []time.Duration{1, time.Millisecond, time.Second, time.Hour, 24 * time.Hour, ptMaxDuration / 3, ptMaxDuration}
	for _, f := range factors {
		s := ExponentialBackoff(f)
		prev := time.Duration(0)
		for n := 1; n <= 100; n++ {
			d := s.Delay(n, prev)
			if d < 0 || d < prev {
				t.Fatalf("ExponentialBackoff(%v).Delay(%d) = %v after %v: negative or decreasing", f, n, d, prev)
			}
			prev = d
		}
		if prev != ptMaxDuration {
			t.Errorf("ExponentialBackoff(%v).Delay(100) = %v, want saturated %v", f, prev, ptMaxDuration)
		}
	}
}

// TestScheduleRepeatable: a schedule is pure, and asking the same n twice
// gives the same delay.
func TestScheduleRepeatable(t *testing.T) {
	s := ExponentialBackoff(time.Second).Cap(time.Minute)
	for n := 1; n <= 10; n++ {
		if a, b := s.Delay(n, 0), s.Delay(n, 0); a != b {
			t.Errorf("Delay(%d) = %v then %v", n, a, b)
		}
	}
}

func TestScheduleAsStandardBackoff(t *testing.T) {
	tests := []struct {
		name  string
		s     Schedule
		waits []time.Duration // the Delay of each refreshed token in turn
	}{
		{"WaitFor(3s)", WaitFor(3 * time.Second), []time.Duration{3 * time.Second, 3 * time.Second}},
		{"ExponentialBackoff(200ms)", ExponentialBackoff(200 * time.Millisecond), []time.Duration{0, 200 * time.Millisecond}},
		{"finite", ptSeq(time.Second, 5*time.Second), []time.Duration{time.Second, 5 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := retry.NewStandard(retry.StandardOptions{Backoff: tt.s, MaxAttempts: 3})
			tok, err := s.AcquireInitialToken("pt")
			if err != nil {
				t.Fatalf("AcquireInitialToken: %v", err)
			}
			for i, want := range tt.waits {
				tok, err = s.RefreshToken(tok, retry.Transient(errors.New("x")))
				if err != nil {
					t.Fatalf("RefreshToken %d: %v", i+1, err)
				}
				if got := tok.Delay(); got != want {
					t.Errorf("retry %d: Delay() = %v, want %v", i+1, got, want)
				}
			}
			// MaxAttempts 3: a third refresh is refused.
			if _, err := s.RefreshToken(tok, retry.Transient(errors.New("x"))); !errors.Is(err, retry.ErrMaxAttempts) {
				t.Errorf("third RefreshToken error = %v, want ErrMaxAttempts", err)
			}
		})
	}
}
