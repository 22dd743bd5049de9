package retry

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

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

// TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard: a failing service
// reached under 20,000 scope names, far more than the strategy keeps (64
// here, so that dropping the least recently used stays cheap: 1,024 by
// default), collects no fresh allowance under each: the strategy-wide
// counts refuse nearly every retry.
func TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxScopes: 64}, Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted := 0
	for i := range 20_000 { // 1,000 a second, each host failing once
		clock.Advance(time.Millisecond)
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
			granted++
		}
	}
	// Without the strategy-wide counts, each of the 64 names kept would
	// start with an allowance of its own (128 retries in all: names
	// dropped for room pass their counts on, so the rest are refused).
	if granted > 40 {
		t.Fatalf("%d of 20,000 fresh host names retried a failing service, want at most 40", granted)
	}
}
