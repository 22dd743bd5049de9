package retry

import (
	"math"
	"math/big"
	"strconv"
	"sync"
	"testing"
	"time"
)

var (
	_ Backoff = Exponential{}
	_ Backoff = Linear{}
	_ Backoff = Constant(0)
)

// btMaxD is the longest time.Duration, written out independently of the code.
const btMaxD = time.Duration(1<<63 - 1)

// btJustBelow1 is the largest float64 below 1.
var btJustBelow1 = math.Nextafter(1, 0)

// btFixed returns a Rand that always returns r.
func btFixed(r float64) func() float64 { return func() float64 { return r } }

// btLimit is the cap a Max field sets: Max, or no cap (the longest duration)
// when Max <= 0.
func btLimit(maxD time.Duration) *big.Int {
	if maxD > 0 {
		return big.NewInt(int64(maxD))
	}
	return big.NewInt(int64(btMaxD))
}

// btRefExp is the un-jittered exponential delay min(limit, Base*2^(n-1)),
// computed in exact arithmetic: retry numbers below 1 count as 1, Base <= 0
// means 0.
func btRefExp(base, maxD time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	limit := btLimit(maxD)
	shift := max(n, 1) - 1
	if shift > 200 { // base >= 1, so base*2^200 is far past any limit
		return time.Duration(limit.Int64())
	}
	v := new(big.Int).Lsh(big.NewInt(int64(base)), uint(shift))
	if v.Cmp(limit) > 0 {
		return time.Duration(limit.Int64())
	}
	return time.Duration(v.Int64())
}

// btRefLin is the un-jittered linear delay min(limit, Base*n), exactly.
func btRefLin(base, maxD time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	limit := btLimit(maxD)
	v := new(big.Int).Mul(big.NewInt(int64(base)), big.NewInt(int64(max(n, 1))))
	if v.Cmp(limit) > 0 {
		return time.Duration(limit.Int64())
	}
	return time.Duration(v.Int64())
}

func TestExponentialNoJitter(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		// d = min(Max, Base*2^(n-1))
		{100 * ms, 0, 1, 100 * ms},
		{100 * ms, 0, 2, 200 * ms},
		{100 * ms, 0, 3, 400 * ms},
		{100 * ms, 0, 10, 51200 * ms}, // 100ms * 512
		// n <= 0 counts as 1
		{100 * ms, 0, 0, 100 * ms},
		{100 * ms, 0, -1, 100 * ms},
		{100 * ms, 0, -5, 100 * ms},
		{100 * ms, 0, math.MinInt, 100 * ms},
		// capped
		{100 * ms, time.Second, 4, 800 * ms},
		{100 * ms, 800 * ms, 4, 800 * ms}, // exactly at the cap
		{100 * ms, time.Second, 5, time.Second},
		{100 * ms, time.Second, 100, time.Second},
		{50 * ms, 20 * time.Second, 9, 12800 * ms}, // 50ms * 256
		{50 * ms, 20 * time.Second, 10, 20 * time.Second},
		{time.Second, 500 * ms, 1, 500 * ms}, // Base above Max
		// Max <= 0: no cap
		{100 * ms, 0, 5, 1600 * ms},
		{100 * ms, -time.Second, 5, 1600 * ms},
		{100 * ms, btMaxD * -1, 5, 1600 * ms},
		// Base <= 0: no delay
		{0, time.Second, 5, 0},
		{0, 0, 1, 0},
		{-time.Second, 10 * time.Second, 3, 0},
		{-1, 0, 64, 0},
		{time.Duration(-1 << 63), 0, 64, 0},
		// the edges of int64
		{1, 0, 63, 1 << 62},
		{1, 0, 64, btMaxD}, // 2^63 overflows: saturates
		{1, 0, 65, btMaxD},
		{3, 0, 62, 3 << 61},                     // 6917529027641081856
		{3, 0, 63, btMaxD},                      // 3*2^62 > 2^63-1
		{time.Hour, 0, 22, 7549747200000000000}, // 3.6e12 * 2^21
		{time.Hour, 0, 23, btMaxD},              // 3.6e12 * 2^22 > 2^63-1
		{time.Hour, 0, 38, btMaxD},
		{btMaxD, 0, 1, btMaxD},
		{btMaxD, 0, 2, btMaxD},
		{btMaxD, time.Hour, 1, time.Hour},
		{1 << 62, 0, 2, btMaxD}, // 2^63 is one past the longest duration
		{1 << 61, 0, 2, 1 << 62},
	}
	for _, tt := range tests {
		e := Exponential{Base: tt.base, Max: tt.max}
		for _, prev := range []time.Duration{0, time.Second, -time.Second, btMaxD} {
			if got := e.Delay(tt.n, prev); got != tt.want {
				t.Errorf("Exponential{Base: %d, Max: %d}.Delay(%d, %v) = %d, want %d", tt.base, tt.max, tt.n, prev, got, tt.want)
			}
		}
	}
}

func TestExponentialJitterPinned(t *testing.T) {
	s := time.Second
	// Base 1s, no cap, retry 3: d = 4s.
	tests := []struct {
		name   string
		jitter Jitter
		max    time.Duration
		n      int
		prev   time.Duration
		r      float64
		want   time.Duration
	}{
		// full = r*d
		{"full r=0.5", FullJitter, 0, 3, 0, 0.5, 2 * s},
		{"full r=0.25", FullJitter, 0, 3, 0, 0.25, s},
		{"full r=0", FullJitter, 0, 3, 0, 0, 0},
		{"full r=1-2^-10", FullJitter, 0, 3, 0, 1 - 1.0/1024, 4*s - 3906250}, // 4e9 - 4e9/1024
		{"full r=0.5 capped", FullJitter, 3 * s, 3, 0, 0.5, 1500 * time.Millisecond},
		{"full r=0.5 n=1", FullJitter, 0, 1, 0, 0.5, 500 * time.Millisecond},
		// equal = d/2 + r*d/2
		{"equal r=0.5", EqualJitter, 0, 3, 0, 0.5, 3 * s},
		{"equal r=0.25", EqualJitter, 0, 3, 0, 0.25, 2500 * time.Millisecond},
		{"equal r=0", EqualJitter, 0, 3, 0, 0, 2 * s},
		{"equal r=1-2^-10", EqualJitter, 0, 3, 0, 1 - 1.0/1024, 4*s - 1953125}, // 2e9 + 2e9 - 2e9/1024
		{"equal r=0.5 capped", EqualJitter, 3 * s, 3, 0, 0.5, 2250 * time.Millisecond},
		// decorrelated = min(Max, Base + r*3*prev), prev = Base when 0
		{"decorrelated first r=0.5", DecorrelatedJitter, 0, 3, 0, 0.5, 2500 * time.Millisecond}, // 1 + 0.5*3*1
		{"decorrelated first r=0", DecorrelatedJitter, 0, 3, 0, 0, s},
		{"decorrelated prev=2s r=0.5", DecorrelatedJitter, 0, 3, 2 * s, 0.5, 4 * s},   // 1 + 0.5*6
		{"decorrelated prev=4s r=0.25", DecorrelatedJitter, 0, 7, 4 * s, 0.25, 4 * s}, // 1 + 0.25*12
		{"decorrelated prev=2s r=0.5 capped", DecorrelatedJitter, 3 * s, 3, 2 * s, 0.5, 3 * s},
		{"decorrelated prev=2s r=0.5 at cap", DecorrelatedJitter, 4 * s, 3, 2 * s, 0.5, 4 * s},
		{"decorrelated negative prev counts as Base", DecorrelatedJitter, 0, 3, -5 * s, 0.5, 2500 * time.Millisecond},
		{"decorrelated ignores n", DecorrelatedJitter, 0, 50, 2 * s, 0.5, 4 * s},
		{"decorrelated r=1-2^-10 prev=1s", DecorrelatedJitter, 0, 1, s, 1 - 1.0/1024, 4*s - 2929688}, // 1e9 + 3e9*(1-2^-10) = 4e9 - 2929687.5, truncated
		{"decorrelated huge prev", DecorrelatedJitter, 20 * s, 1, btMaxD, 0.5, 20 * s},
		{"decorrelated huge prev no cap", DecorrelatedJitter, 0, 1, btMaxD, 0.5, btMaxD},
		// none
		{"none ignores r", NoJitter, 0, 3, 0, 0.5, 4 * s},
		{"Jitter(4) is none", Jitter(4), 0, 3, 0, 0.5, 4 * s},
		{"Jitter(255) is none", Jitter(255), 0, 3, 0, 0.5, 4 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Exponential{Base: s, Max: tt.max, Jitter: tt.jitter, Rand: btFixed(tt.r)}
			if got := e.Delay(tt.n, tt.prev); got != tt.want {
				t.Errorf("Delay(%d, %v) with r=%v = %d, want %d", tt.n, tt.prev, tt.r, got, tt.want)
			}
		})
	}

	// r just below 1: r*d is within 1ns below d (d*2^-53 < 1ns for d < 2^53ns).
	d := 4 * s
	for _, j := range []Jitter{FullJitter, EqualJitter} {
		e := Exponential{Base: s, Jitter: j, Rand: btFixed(btJustBelow1)}
		if got := e.Delay(3, 0); got < d-1 || got >= d {
			t.Errorf("%v jitter, r=1-2^-53: Delay = %d, want in [%d, %d)", j, got, d-1, d)
		}
	}
	e := Exponential{Base: s, Jitter: DecorrelatedJitter, Rand: btFixed(btJustBelow1)}
	if got, want := e.Delay(1, s), 4*s; got < want-1 || got > want {
		t.Errorf("decorrelated, r=1-2^-53, prev=1s: Delay = %d, want in [%d, %d]", got, want-1, want)
	}
}

var (
	btSatN     = []int{30, 37, 38, 62, 63, 64, 100, 1_000_000, math.MaxInt}
	btSatBase  = []time.Duration{time.Nanosecond, time.Millisecond, time.Second, time.Hour, btMaxD}
	btSatMax   = []time.Duration{0, -time.Second, time.Millisecond, 20 * time.Second, time.Hour, btMaxD}
	btJitters  = []Jitter{NoJitter, FullJitter, EqualJitter, DecorrelatedJitter, Jitter(4), Jitter(200)}
	btSatRands = []func() float64{nil, btFixed(0), btFixed(0.5), btFixed(btJustBelow1)}
)

// btCheckJittered checks got against the un-jittered delay d for one jitter.
func btCheckJittered(t *testing.T, what string, j Jitter, got, d time.Duration, limit time.Duration) {
	t.Helper()
	if got < 0 {
		t.Errorf("%s: negative delay %d", what, got)
	}
	if got > limit {
		t.Errorf("%s: delay %d above the cap %d", what, got, limit)
	}
	switch j {
	case FullJitter:
		if got > d || (d > 0 && got == d) {
			t.Errorf("%s: full jitter %d, want in [0, %d)", what, got, d)
		}
	case EqualJitter:
		if got > d || got < d-d/2 {
			t.Errorf("%s: equal jitter %d, want in [%d, %d]", what, got, d-d/2, d)
		}
	case DecorrelatedJitter:
	default:
		if got != d {
			t.Errorf("%s: %d, want the un-jittered %d", what, got, d)
		}
	}
}

func TestExponentialSaturation(t *testing.T) {
	for _, n := range btSatN {
		for _, base := range btSatBase {
			for _, maxD := range btSatMax {
				limit := time.Duration(btLimit(maxD).Int64())
				d := btRefExp(base, maxD, n)
				// Hand check of the reference: from n = 64 on, any Base >= 1ns is saturated.
				if n >= 64 && d != limit {
					t.Fatalf("reference: Base %d, n %d gives %d, want the cap %d", base, n, d, limit)
				}
				for _, j := range btJitters {
					for ri, rnd := range btSatRands {
						e := Exponential{Base: base, Max: maxD, Jitter: j, Rand: rnd}
						for _, prev := range []time.Duration{0, base, btMaxD} {
							got := e.Delay(n, prev)
							what := "Exponential{" + base.String() + ", " + maxD.String() + ", " + j.String() + "}.Delay(" +
								strconv.Itoa(n) + ") rand#" + strconv.Itoa(ri)
							btCheckJittered(t, what, j, got, d, limit)
						}
					}
				}
			}
		}
	}
}

func TestLinearSaturation(t *testing.T) {
	for _, n := range btSatN {
		for _, base := range btSatBase {
			for _, maxD := range btSatMax {
				limit := time.Duration(btLimit(maxD).Int64())
				d := btRefLin(base, maxD, n)
				for _, j := range btJitters {
					for ri, rnd := range btSatRands {
						l := Linear{Base: base, Max: maxD, Jitter: j, Rand: rnd}
						got := l.Delay(n, 0)
						what := "Linear{" + base.String() + ", " + maxD.String() + ", " + j.String() + "}.Delay(" +
							strconv.Itoa(n) + ") rand#" + strconv.Itoa(ri)
						btCheckJittered(t, what, j, got, d, limit)
					}
				}
			}
		}
	}
}

func TestBackoffRandOutOfRange(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		r    float64
		low  bool // clamped to 0 (r <= 0); otherwise clamped to just below 1
	}{
		{"-1", -1, true},
		{"-0", math.Copysign(0, -1), true},
		{"-Inf", math.Inf(-1), true},
		{"-MaxFloat64", -math.MaxFloat64, true},
		{"1", 1, false},
		{"2", 2, false},
		{"+Inf", math.Inf(1), false},
		{"MaxFloat64", math.MaxFloat64, false},
	}
	type cfg struct {
		base, max time.Duration
		n         int
		prev      time.Duration
	}
	cfgs := []cfg{
		{s, 0, 3, 0},           // d = 4s
		{s, 3 * s, 3, 2 * s},   // d = 3s (capped)
		{s, 0, 100, btMaxD},    // d = max duration
		{btMaxD, 0, 1, btMaxD}, // base = max duration
	}
	for _, tt := range tests {
		for _, c := range cfgs {
			for _, j := range []Jitter{FullJitter, EqualJitter, DecorrelatedJitter} {
				e := Exponential{Base: c.base, Max: c.max, Jitter: j, Rand: btFixed(tt.r)}
				got := e.Delay(c.n, c.prev)
				d := btRefExp(c.base, c.max, c.n)
				limit := time.Duration(btLimit(c.max).Int64())
				what := tt.name + "/" + j.String()
				btCheckJittered(t, what, j, got, d, limit)
				if tt.low {
					// r clamped to 0: full 0, equal d - d/2, decorrelated min(Max, Base).
					want := map[Jitter]time.Duration{FullJitter: 0, EqualJitter: d - d/2, DecorrelatedJitter: min(c.base, limit)}[j]
					if j == DecorrelatedJitter && c.base > 1<<53 {
						// float64(Base) may round by up to half an ulp (512ns near 2^63).
						if got < want-1024 || got > want {
							t.Errorf("%s %+v: Delay = %d, want ~%d", what, c, got, want)
						}
					} else if got != want {
						t.Errorf("%s %+v: Delay = %d, want %d", what, c, got, want)
					}
				}
			}
		}
	}

	// NaN: no promise about where it is clamped, only that the delay stays in range.
	for _, c := range cfgs {
		for _, j := range []Jitter{FullJitter, EqualJitter, DecorrelatedJitter} {
			e := Exponential{Base: c.base, Max: c.max, Jitter: j, Rand: btFixed(math.NaN())}
			btCheckJittered(t, "NaN/"+j.String(), j, e.Delay(c.n, c.prev), btRefExp(c.base, c.max, c.n), time.Duration(btLimit(c.max).Int64()))
			l := Linear{Base: c.base, Max: c.max, Jitter: j, Rand: btFixed(math.NaN())}
			btCheckJittered(t, "NaN/linear/"+j.String(), j, l.Delay(c.n, c.prev), btRefLin(c.base, c.max, c.n), time.Duration(btLimit(c.max).Int64()))
		}
	}

	// r >= 1 clamps just below 1: d = 4s gives a delay within 1ns below d.
	for _, r := range []float64{1, 2, math.Inf(1)} {
		e := Exponential{Base: s, Jitter: FullJitter, Rand: btFixed(r)}
		if got := e.Delay(3, 0); got < 4*s-1 || got >= 4*s {
			t.Errorf("full jitter r=%v: Delay = %d, want in [%d, %d)", r, got, 4*s-1, 4*s)
		}
	}
}

func TestLinear(t *testing.T) {
	ms := time.Millisecond
	s := time.Second
	tests := []struct {
		name      string
		base, max time.Duration
		jitter    Jitter
		r         float64
		n         int
		prev      time.Duration
		want      time.Duration
	}{
		{"n=1", 100 * ms, 0, NoJitter, 0, 1, 0, 100 * ms},
		{"n=3", 100 * ms, 0, NoJitter, 0, 3, 0, 300 * ms},
		{"n=0 counts as 1", 100 * ms, 0, NoJitter, 0, 0, 0, 100 * ms},
		{"n=-3 counts as 1", 100 * ms, 0, NoJitter, 0, -3, 0, 100 * ms},
		{"n=MinInt counts as 1", 100 * ms, 0, NoJitter, 0, math.MinInt, 0, 100 * ms},
		{"capped", 100 * ms, 250 * ms, NoJitter, 0, 3, 0, 250 * ms},
		{"below cap", 100 * ms, 250 * ms, NoJitter, 0, 2, 0, 200 * ms},
		{"1s n=3599 under 1h", s, time.Hour, NoJitter, 0, 3599, 0, 3599 * s},
		{"1s n=3600 at 1h", s, time.Hour, NoJitter, 0, 3600, 0, time.Hour},
		{"1s n=3601 capped", s, time.Hour, NoJitter, 0, 3601, 0, time.Hour},
		{"negative Max no cap", 100 * ms, -s, NoJitter, 0, 50, 0, 5 * s},
		{"Base 0", 0, s, NoJitter, 0, 7, 0, 0},
		{"Base negative", -s, 0, NoJitter, 0, 7, 0, 0},
		{"1ns n=MaxInt", 1, 0, NoJitter, 0, math.MaxInt, 0, btMaxD}, // exactly 2^63-1
		{"2ns n=MaxInt saturates", 2, 0, NoJitter, 0, math.MaxInt, 0, btMaxD},
		{"1s n=9223372036 fits", s, 0, NoJitter, 0, 9223372036, 0, 9223372036 * s},
		{"1s n=9223372037 saturates", s, 0, NoJitter, 0, 9223372037, 0, btMaxD},
		{"max base n=2", btMaxD, 0, NoJitter, 0, 2, 0, btMaxD},
		{"huge n capped", time.Hour, 20 * s, NoJitter, 0, math.MaxInt, 0, 20 * s},
		// jitters; Base 1s, n = 4: d = 4s
		{"full r=0.5", s, 0, FullJitter, 0.5, 4, 0, 2 * s},
		{"full r=0.25 capped", s, 3 * s, FullJitter, 0.25, 4, 0, 750 * ms},
		{"equal r=0.5", s, 0, EqualJitter, 0.5, 4, 0, 3 * s},
		{"equal r=0", s, 0, EqualJitter, 0, 4, 0, 2 * s},
		{"decorrelated prev=2s r=0.5", s, 0, DecorrelatedJitter, 0.5, 4, 2 * s, 4 * s},
		{"decorrelated first r=0.5", s, 0, DecorrelatedJitter, 0.5, 4, 0, 2500 * ms},
		{"decorrelated capped", s, 2 * s, DecorrelatedJitter, 0.5, 4, 2 * s, 2 * s},
		{"Jitter(9) is none", s, 0, Jitter(9), 0.5, 4, 0, 4 * s},
		{"full at saturation r=0.5", 2, 0, FullJitter, 0.5, math.MaxInt, 0, 1 << 62}, // 0.5 * (2^63-1) in float is 2^62
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Linear{Base: tt.base, Max: tt.max, Jitter: tt.jitter, Rand: btFixed(tt.r)}
			if got := l.Delay(tt.n, tt.prev); got != tt.want {
				t.Errorf("Delay(%d, %v) = %d, want %d", tt.n, tt.prev, got, tt.want)
			}
		})
	}
}

func TestConstant(t *testing.T) {
	tests := []struct {
		c    Constant
		want time.Duration
	}{
		{Constant(5 * time.Second), 5 * time.Second},
		{Constant(1), 1},
		{Constant(btMaxD), btMaxD},
		{Constant(0), 0},
		{Constant(-1), 0},
		{Constant(-time.Hour), 0},
		{Constant(-1 << 63), 0},
	}
	for _, tt := range tests {
		for _, n := range []int{math.MinInt, -1, 0, 1, 2, 38, 64, math.MaxInt} {
			for _, prev := range []time.Duration{-time.Second, 0, time.Hour, btMaxD} {
				if got := tt.c.Delay(n, prev); got != tt.want {
					t.Errorf("Constant(%d).Delay(%d, %v) = %d, want %d", int64(tt.c), n, prev, got, tt.want)
				}
			}
		}
	}
}

func TestExponentialRandNil(t *testing.T) {
	const draws = 2000
	s := time.Second
	d := 4 * s // Base 1s, retry 3
	tests := []struct {
		jitter    Jitter
		prev      time.Duration
		low, high time.Duration // got in [low, high)
	}{
		{FullJitter, 0, 0, d},
		{EqualJitter, 0, d / 2, d},
		{DecorrelatedJitter, 2 * s, s, s + 6*s}, // Base + [0, 3*prev)
	}
	for _, tt := range tests {
		t.Run(tt.jitter.String(), func(t *testing.T) {
			e := Exponential{Base: s, Jitter: tt.jitter}
			seen := make(map[time.Duration]bool, draws)
			lo, hi := tt.high, tt.low
			for range draws {
				got := e.Delay(3, tt.prev)
				if got < tt.low || got >= tt.high {
					t.Fatalf("Delay = %d, want in [%d, %d)", got, tt.low, tt.high)
				}
				seen[got] = true
				lo, hi = min(lo, got), max(hi, got)
			}
			// Nanosecond draws over a range of seconds: collisions are rare.
			if len(seen) < draws/2 {
				t.Errorf("only %d distinct delays in %d draws", len(seen), draws)
			}
			// The draws spread over the range: P(all in one half) ~ 2^-2000.
			span := tt.high - tt.low
			if lo >= tt.low+span/4 || hi < tt.high-span/4 {
				t.Errorf("draws span [%d, %d], want them to reach both quarters of [%d, %d)", lo, hi, tt.low, tt.high)
			}
		})
	}
}

func TestExponentialConcurrent(t *testing.T) {
	e := Exponential{Base: time.Millisecond, Max: 20 * time.Second, Jitter: FullJitter}
	fixed := Exponential{Base: time.Millisecond, Max: 20 * time.Second, Jitter: EqualJitter, Rand: btFixed(0.5)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				n := (i+g)%70 + 1
				d := btRefExp(e.Base, e.Max, n)
				if got := e.Delay(n, d); got < 0 || (d > 0 && got >= d) {
					t.Errorf("goroutine %d: Delay(%d) = %d, want in [0, %d)", g, n, got, d)
					return
				}
				want := d - d/2 + d/2/2 // equal jitter at r = 0.5 (d/2 even here)
				if got := fixed.Delay(n, 0); got != want {
					t.Errorf("goroutine %d: pinned Delay(%d) = %d, want %d", g, n, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestJitterString(t *testing.T) {
	tests := []struct {
		j    Jitter
		want string
	}{
		{NoJitter, "none"},
		{FullJitter, "full"},
		{EqualJitter, "equal"},
		{DecorrelatedJitter, "decorrelated"},
		{Jitter(4), "Jitter(4)"},
		{Jitter(255), "Jitter(255)"},
	}
	for _, tt := range tests {
		if got := tt.j.String(); got != tt.want {
			t.Errorf("Jitter(%d).String() = %q, want %q", uint8(tt.j), got, tt.want)
		}
	}
}

// btFuzzSeeds are (base, max, n, prev, jitter, r) seeds around the overflow
// edges and the clamping of r.
func btFuzzSeeds(f *testing.F) {
	type seed struct {
		base, max int64
		n         int
		prev      int64
		jitter    uint8
		r         float64
	}
	const maxI = math.MaxInt64
	seeds := []seed{
		{int64(50 * time.Millisecond), int64(20 * time.Second), 1, 0, 1, 0.5},
		{int64(time.Second), 0, 3, 0, 0, 0.5},
		{1, 0, 37, 0, 1, 0.999},
		{1, 0, 38, 0, 1, 0.999},
		{1, 0, 62, 0, 0, 0},
		{1, 0, 63, 0, 0, 0},
		{1, 0, 64, 0, 0, 0},
		{1, 0, 65, 0, 2, 0.7},
		{3, 0, 63, 0, 0, 0},
		{int64(time.Hour), 0, 23, 0, 2, 0.5},
		{maxI, 0, 1, maxI, 3, 0.5},
		{maxI, maxI, math.MaxInt, maxI, 3, btJustBelow1},
		{maxI, 1, math.MaxInt, 0, 1, 1},
		{1 << 62, 0, 2, 0, 0, 0},
		{1 << 62, -1, 2, 1 << 62, 3, 2},
		{-1, 0, 5, 0, 0, 0.5},
		{math.MinInt64, math.MinInt64, math.MinInt, math.MinInt64, 3, -1},
		{int64(time.Second), int64(time.Millisecond), 1_000_000, int64(time.Hour), 3, math.Inf(1)},
		{int64(time.Second), 0, 100, 0, 1, math.NaN()},
		{int64(time.Second), 0, 100, 0, 2, math.Inf(-1)},
		{int64(time.Second), 0, 0, -5, 3, 0},
		{int64(time.Second), 0, -7, 0, 4, 0.5},
		{int64(time.Second), 0, 10, 0, 255, 0.5},
		{int64(time.Millisecond), int64(time.Hour), math.MaxInt, 0, 1, 0.25},
		{1, 1, 1, 1, 3, btJustBelow1},
		{0, 0, 0, 0, 3, 0.5},
	}
	for _, s := range seeds {
		f.Add(s.base, s.max, s.n, s.prev, s.jitter, s.r)
	}
}

// btFuzzCheck asserts the invariants of one Delay result; ref is the exact
// un-jittered delay.
func btFuzzCheck(t *testing.T, base, maxD time.Duration, prev time.Duration, j Jitter, r float64, got, ref time.Duration) {
	t.Helper()
	limit := time.Duration(btLimit(maxD).Int64())
	if got < 0 {
		t.Fatalf("negative delay %d", got)
	}
	if got > limit {
		t.Fatalf("delay %d above the cap %d", got, limit)
	}
	rLow := r <= 0 // clamped to 0 (NaN compares false)
	switch j {
	case FullJitter:
		if ref > 0 && got >= ref || ref == 0 && got != 0 {
			t.Fatalf("full jitter %d, want in [0, %d)", got, ref)
		}
		if rLow && got != 0 {
			t.Fatalf("full jitter with r=%v: %d, want 0", r, got)
		}
	case EqualJitter:
		if got > ref || got < ref-ref/2 {
			t.Fatalf("equal jitter %d, want in [%d, %d]", got, ref-ref/2, ref)
		}
		if rLow && got != ref-ref/2 {
			t.Fatalf("equal jitter with r=%v: %d, want %d", r, got, ref-ref/2)
		}
	case DecorrelatedJitter:
		b := max(base, 0)
		if b >= limit {
			if got != limit {
				t.Fatalf("decorrelated with Base %d >= cap %d: %d, want the cap", b, limit, got)
			}
			return
		}
		// At least Base (give or take float64's rounding of Base: half an ulp, < 1024ns).
		if got < b-1024 {
			t.Fatalf("decorrelated %d below Base %d", got, b)
		}
		// At most Base + 3*prev (prev = Base if <= 0), with the same slack.
		p := prev
		if p <= 0 {
			p = b
		}
		upper := new(big.Int).Add(big.NewInt(int64(b)), new(big.Int).Mul(big.NewInt(3), big.NewInt(int64(p))))
		upper.Add(upper, big.NewInt(8192)) // float64 rounding of Base, prev and the sum, below 2^63
		if big.NewInt(int64(got)).Cmp(upper) > 0 {
			t.Fatalf("decorrelated %d above Base + 3*prev = %v", got, upper)
		}
		if rLow && b < 1<<53 && got != b {
			t.Fatalf("decorrelated with r=%v: %d, want Base %d", r, got, b)
		}
	default: // NoJitter and unknown values
		if got != ref {
			t.Fatalf("%v: %d, want the un-jittered %d", j, got, ref)
		}
	}
}

func FuzzExponential(f *testing.F) {
	btFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, base, maxD int64, n int, prev int64, jitter uint8, r float64) {
		e := Exponential{Base: time.Duration(base), Max: time.Duration(maxD), Jitter: Jitter(jitter), Rand: btFixed(r)}
		got := e.Delay(n, time.Duration(prev))
		ref := btRefExp(e.Base, e.Max, n)
		btFuzzCheck(t, e.Base, e.Max, time.Duration(prev), e.Jitter, r, got, ref)
		// Pure: the same inputs give the same delay.
		if again := e.Delay(n, time.Duration(prev)); again != got {
			t.Fatalf("Delay not pure: %d then %d", got, again)
		}
	})
}

func FuzzLinear(f *testing.F) {
	btFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, base, maxD int64, n int, prev int64, jitter uint8, r float64) {
		l := Linear{Base: time.Duration(base), Max: time.Duration(maxD), Jitter: Jitter(jitter), Rand: btFixed(r)}
		got := l.Delay(n, time.Duration(prev))
		ref := btRefLin(l.Base, l.Max, n)
		btFuzzCheck(t, l.Base, l.Max, time.Duration(prev), l.Jitter, r, got, ref)
		if again := l.Delay(n, time.Duration(prev)); again != got {
			t.Fatalf("Delay not pure: %d then %d", got, again)
		}
	})
}
