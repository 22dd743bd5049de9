package sqlretry

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retrykit/retry"
)

// The default strategy does what DefaultStrategy's documentation says to a
// transaction that conflicts on every run: 9 waits of full-jitter backoff,
// each at most 5 ms doubling to 500 ms (1.635 s in all at most), spread over
// that range rather than fixed, and no 10th run. Many such transactions at
// once on one shared strategy (a burst of conflicts) all get their 10 runs:
// there is no quota to drain.
func TestDefaultStrategy(t *testing.T) {
	conflict := &txError{stage: stageCommit, err: &pgconn.PgError{Code: "40001"}}
	caps := []time.Duration{5, 10, 20, 40, 80, 160, 320, 500, 500}
	var sumCaps time.Duration
	for i := range caps {
		caps[i] *= time.Millisecond
		sumCaps += caps[i]
	}
	if sumCaps != 1635*time.Millisecond {
		t.Fatalf("the caps add up to %v", sumCaps)
	}
	const calls = 1000
	low, high := make([]int, len(caps)), make([]int, len(caps))
	for range calls {
		tok, err := defaultStrategy.AcquireInitialToken("")
		if err != nil {
			t.Fatal(err)
		}
		for i, limit := range caps {
			if tok, err = defaultStrategy.RefreshToken(tok, conflict); err != nil {
				t.Fatalf("refused the retry after run %d: %v", i+1, err)
			}
			switch d := tok.Delay(); {
			case d < 0 || d > limit:
				t.Fatalf("wait %d: %v, want at most %v", i+1, d, limit)
			case d < limit/4:
				low[i]++
			case d > limit*3/4:
				high[i]++
			}
		}
		if _, err := defaultStrategy.RefreshToken(tok, conflict); !errors.Is(err, retry.ErrMaxAttempts) {
			t.Fatalf("after 10 runs: %v, want max attempts", err)
		}
	}
	// Full jitter: a quarter of the waits in each end quarter; 150 of 1000
	// is far below a quarter and far above what fixed waits give.
	for i := range caps {
		if low[i] < 150 || high[i] < 150 {
			t.Errorf("wait %d: %d in the lowest quarter and %d in the highest of %d: not spread", i+1, low[i], high[i], calls)
		}
	}
}
