package retry

import (
	"testing"
	"time"
)

// TestAdaptiveClockSteppingBack: a clock that steps back an hour (an NTP
// correction) changes nothing: the limiter stops limiting once the
// throttling is over, as it would have.
func TestAdaptiveClockSteppingBack(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 {
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	if _, limiting := a.Rate("api"); !limiting {
		t.Fatal("not limiting after a throttle")
	}
	clock.Advance(-time.Hour)
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, "api")
	}
	if rate, limiting := a.Rate("api"); limiting {
		t.Fatalf("still limiting, to %.2f/s, 10 s after the last throttle and a step back of the clock", rate)
	}
}
