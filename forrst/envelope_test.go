package forrst

import (
	"math"
	"testing"
	"time"
)

// seconds rounds up to whole seconds and never overflows: a server with
// guidance near the longest Duration must not send a negative Retry-After.
func TestSecondsRoundsUpWithoutOverflow(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{math.MaxInt64, math.MaxInt64/int64(time.Second) + 1},
		{time.Duration(math.MaxInt64 - math.MaxInt64%int64(time.Second)), math.MaxInt64 / int64(time.Second)},
	} {
		if got := seconds(tc.d); got.Value != tc.want || got.Unit != Second {
			t.Errorf("seconds(%d) = %+v, want %d s", tc.d, got, tc.want)
		}
	}
}
