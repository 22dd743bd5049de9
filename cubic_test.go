package retry

import (
	"math"
	"testing"
)

// After a throttle, reservations wait 1/fillRate apart; a wait never exceeds
// maxWait and the debt stays bounded by maxWait·fillRate, however many callers.
func TestCubicReserveDebtBounded(t *testing.T) {
	var c cubic
	c.start(0, 0, 0, 0)
	for i := range 20 { // a measured rate of some attempts per second
		c.update(float64(i)*0.1, false)
	}
	c.update(2.0, true)
	if !c.enabled {
		t.Fatal("a throttle did not enable the limiter")
	}
	for range 1000 {
		w := c.reserve(2.0, 3)
		if w < 0 || w > 3 || math.IsNaN(w) {
			t.Fatalf("wait %v outside [0, 3]", w)
		}
	}
	if debt := -c.tokens; debt > 3*c.fillRate+1e-9 {
		t.Fatalf("debt %v exceeds maxWait·fillRate = %v", debt, 3*c.fillRate)
	}
	before := c.tokens
	c.cancel()
	if c.tokens != before+1 {
		t.Fatalf("cancel: tokens %v, want %v", c.tokens, before+1)
	}
}

// An unthrottled limiter never makes anyone wait, and cancel does nothing to it.
func TestCubicUnthrottledNeverWaits(t *testing.T) {
	var c cubic
	c.start(0, 0, 0, 0)
	for i := range 100 {
		c.update(float64(i)*0.01, false)
		if w := c.reserve(float64(i)*0.01, 10); w != 0 {
			t.Fatalf("unthrottled wait %v", w)
		}
		c.cancel()
	}
	if c.settled(1000, 2) {
		t.Fatal("a never-throttled limiter reports settled")
	}
}

// A beta of exactly 1 would never cut the rate: it falls back to 0.7, and a
// throttle then lowers the fill rate below the measured rate.
func TestCubicBetaOneStillCuts(t *testing.T) {
	var c cubic
	c.start(0, 0.1, 1, 0)
	c.measured = 10
	rate := c.update(10, true)
	if want := c.lastMaxRate * cubicBeta; math.Abs(rate-want) > 1e-9 || rate >= c.lastMaxRate {
		t.Fatalf("throttle with beta 1: rate %v, want %v (a cut from %v)", rate, want, c.lastMaxRate)
	}
}
