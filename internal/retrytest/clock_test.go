package retrytest

import (
	"sync"
	"testing"
	"time"
)

func TestClockMovesOnlyByHand(t *testing.T) {
	var zero Clock
	if got := zero.Now(); !got.Equal(Epoch) {
		t.Fatalf("the zero Clock reads %v, want %v", got, Epoch)
	}
	start := time.Unix(1_700_000_000, 0)
	c := NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("NewClock reads %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second) })
	}
	wg.Wait()
	if got := c.Now().Sub(start); got != 10*time.Second {
		t.Fatalf("moved %v by ten concurrent seconds, want 10s", got)
	}
}
