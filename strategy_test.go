package retry

import (
	"errors"
	"testing"
	"time"
)

// An Exact hint is the next wait itself, shorter than the backoff too (a
// gRPC pushback, gRFC A6); a hint that is not exact is a minimum; joined with
// a longer minimum, an exact hint becomes that longer wait; the cap still
// refuses an exact hint that is too long.
func TestExactHintIsTheWait(t *testing.T) {
	server := Info{Safety: Safe, Fault: FaultServer}
	hint := func(d time.Duration, exact bool) error {
		i := server
		i.RetryAfter, i.Exact = d, exact
		return WithInfo(errors.New("busy"), i)
	}
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"exact, shorter than the backoff", hint(10*time.Millisecond, true), 10 * time.Millisecond},
		{"exact, longer than the backoff", hint(3*time.Second, true), 3 * time.Second},
		{"exact zero", hint(0, true), 0},
		{"a minimum", hint(10*time.Millisecond, false), time.Second},
		{"exact joined with a longer minimum", errors.Join(hint(10*time.Millisecond, true), hint(2*time.Second, false)), 2 * time.Second},
	} {
		for _, s := range []Strategy{
			&Simple{Backoff: Constant(time.Second)},
			NewStandard(StandardOptions{Backoff: Constant(time.Second)}),
			NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Backoff: Constant(time.Second)}}),
		} {
			tok, _ := s.AcquireInitialToken("")
			next, err := s.RefreshToken(tok, tc.err)
			if err != nil || next.Delay() != tc.want {
				t.Errorf("%s, %T: delay %v, err %v; want %v", tc.name, s, next.Delay(), err, tc.want)
			}
		}
	}
	s := &Simple{Backoff: Constant(time.Second), MaxRetryAfter: time.Minute}
	tok, _ := s.AcquireInitialToken("")
	if _, err := s.RefreshToken(tok, hint(time.Hour, true)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Fatalf("an exact hour past a minute's cap: err %v", err)
	}
}
