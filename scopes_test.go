package retry

import (
	"sync"
	"testing"
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
