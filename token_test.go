package retry

import (
	"sync"
	"sync/atomic"
	"testing"
)

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
