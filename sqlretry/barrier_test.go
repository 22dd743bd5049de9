package sqlretry_test

import (
	"testing"
	"testing/synctest"
	"time"
)

// A barrier releases its goroutines once all have arrived, and a wait that
// times out leaves no goroutine behind: synctest.Test fails if the bubble
// ends with one still blocked.
func TestBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBarrier(2)
		got := make(chan bool)
		go func() { got <- b.arrive() }()
		time.Sleep(time.Second)
		if !b.arrive() || !<-got {
			t.Fatal("two arrivals at a barrier of two: not released")
		}

		start := time.Now()
		if newBarrier(2).arrive() {
			t.Fatal("one arrival at a barrier of two: released")
		}
		if waited := time.Since(start); waited != barrierTimeout {
			t.Fatalf("waited %v, want %v", waited, barrierTimeout)
		}
	})
}
