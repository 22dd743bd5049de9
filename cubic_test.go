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

// The AWS SDKs share test tables for the adaptive retry mode's limiter
// (aws-sdk-go-v2 aws/retry/adaptive_ratelimit_test.go, and the same numbers
// in the Java, .NET, Kotlin and Rust SDKs). These tests hold cubic to them.

func nearly(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestCubicCurveMatchesAWSTables replays the published CUBIC cases: the
// curve after a throttle at t=5 s from a rate of 10, with successes only and
// with two throttles in between. As in the published harness, a throttle
// cuts the last calculated rate and becomes the new lastMaxRate.
func TestCubicCurveMatchesAWSTables(t *testing.T) {
	type step struct {
		throttled bool
		at, rate  float64
	}
	cases := map[string][]step{
		"success": {
			{false, 5, 7}, {false, 6, 9.64893600966}, {false, 7, 10.000030849917364},
			{false, 8, 10.453284520772092}, {false, 9, 13.408697022224185},
			{false, 10, 21.26626835427364}, {false, 11, 36.425998516920465},
		},
		"mixed": {
			{false, 5, 7}, {false, 6, 9.64893600966}, {true, 7, 6.754255206761999},
			{true, 8, 4.727978644733399}, {false, 9, 4.670125557970046},
			{false, 10, 4.770870456867401}, {false, 11, 6.011819748005445},
			{false, 12, 10.792973431384178},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			var c cubic
			c.start(0, 0, 0, 0)
			c.lastMaxRate, c.lastThrottle = 10, 5
			var rate float64
			for _, s := range steps {
				c.window()
				if s.throttled {
					rate *= c.beta
					c.lastThrottle, c.lastMaxRate = s.at, rate
				} else {
					rate = c.curve(s.at)
				}
				if !nearly(rate, s.rate) {
					t.Fatalf("t=%v: rate %v, want %v", s.at, rate, s.rate)
				}
			}
		})
	}
}

// TestCubicUpdateMatchesAWSTables replays the published sequence of answers
// every 200 ms from time 0, throttled at 2.0 s and 3.2 s: the smoothed send
// rate and the fill rate after each.
func TestCubicUpdateMatchesAWSTables(t *testing.T) {
	steps := []struct {
		throttled          bool
		at, measured, fill float64
	}{
		{false, 0.2, 0, 0.5}, {false, 0.4, 0, 0.5}, {false, 0.6, 4.8, 0.5}, {false, 0.8, 4.8, 0.5},
		{false, 1.0, 4.16, 0.5}, {false, 1.2, 4.16, 0.6912}, {false, 1.4, 4.16, 1.0976},
		{false, 1.6, 5.632, 1.6384}, {false, 1.8, 5.632, 2.3328}, {true, 2.0, 4.3264, 3.02848},
		{false, 2.2, 4.3264, 3.4866391734702598}, {false, 2.4, 4.3264, 3.8218744160402554},
		{false, 2.6, 5.66528, 4.053385727709987}, {false, 2.8, 5.66528, 4.200373108479455},
		{false, 3.0, 4.333056, 4.282036558348658}, {true, 3.2, 4.333056, 2.99742559084406},
		{false, 3.4, 4.333056, 3.4522263943863463},
	}
	var c cubic
	c.start(0, 0, 0, 0)
	for _, s := range steps {
		c.update(s.at, s.throttled)
		if !nearly(c.measured, s.measured) || !nearly(c.fillRate, s.fill) {
			t.Fatalf("t=%v: measured %v, fill %v; want %v, %v", s.at, c.measured, c.fillRate, s.measured, s.fill)
		}
	}
	if !c.enabled {
		t.Fatal("a throttle must enable the limiter")
	}
}

// TestCubicReserveWaitsAtTheRateAndNoLonger: once throttled, attempts beyond
// the bucket wait for tokens at the fill rate, never longer than maxWait, and
// the debt stops growing there; a cancelled reservation gives its token back.
func TestCubicReserveWaitsAtTheRateAndNoLonger(t *testing.T) {
	var c cubic
	c.start(100, 0, 0, 0)
	if w := c.reserve(100, 1); w != 0 {
		t.Fatalf("an unthrottled limiter made an attempt wait %v s", w)
	}
	c.measured = 4
	c.update(100, true) // rate 0.7·4 = 2.8/s, the bucket empty
	if !c.enabled || !nearly(c.fillRate, 2.8) {
		t.Fatalf("enabled %v, fill %v; want a 2.8/s limiter", c.enabled, c.fillRate)
	}
	if w := c.reserve(100, 1); !nearly(w, 1/2.8) {
		t.Fatalf("first wait %v s, want %v", w, 1/2.8)
	}
	if w := c.reserve(100, 1); !nearly(w, 2/2.8) {
		t.Fatalf("second wait %v s, want %v", w, 2/2.8)
	}
	for range 10 {
		if w := c.reserve(100, 1); w > 1+1e-9 {
			t.Fatalf("wait %v s beyond maxWait", w)
		}
	}
	if !nearly(c.tokens, -2.8) {
		t.Fatalf("debt %v tokens, want it held at maxWait·rate = 2.8", -c.tokens)
	}
	c.cancel()
	if !nearly(c.tokens, -1.8) {
		t.Fatalf("tokens %v after a cancel, want -1.8", c.tokens)
	}
	// Tokens come back with time.
	if w := c.reserve(101, 1); w != 0 {
		t.Fatalf("wait %v s a second later, want none: 2.8 tokens were earned", w)
	}
}

// TestCubicSettles: the limiter stops limiting once no throttle has come for
// twice the curve's recovery time, and at least the quiet period.
func TestCubicSettles(t *testing.T) {
	var c cubic
	c.start(0, 0, 0, 0)
	c.measured = 10
	c.update(10, true)
	if c.settled(10.5, 2) {
		t.Fatal("settled half a second after a throttle")
	}
	if !c.settled(10+2*c.k+0.01, 2) {
		t.Fatalf("not settled after 2k = %v s without a throttle", 2*c.k)
	}
	var d cubic
	d.start(0, 0, 0, 0)
	d.measured = 0.1 // k is tiny: the quiet period governs
	d.update(10, true)
	if d.settled(11, 2) || !d.settled(12.1, 2) {
		t.Fatal("the quiet period of 2 s must govern a small k")
	}
}

// TestCubicDialsFallBack: dials that are zero, negative, not numbers or
// infinite take AWS's numbers; a beta of 1 or more would not cut.
func TestCubicDialsFallBack(t *testing.T) {
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		var c cubic
		c.start(0, v, v, v)
		if c.minRate != cubicMinRate || c.beta != cubicBeta || c.scale != cubicScale {
			t.Fatalf("dial %v: min %v beta %v scale %v", v, c.minRate, c.beta, c.scale)
		}
	}
	var c cubic
	c.start(0, 1, 1.5, 1)
	if c.beta != cubicBeta {
		t.Fatalf("beta 1.5 kept as %v", c.beta)
	}
}
