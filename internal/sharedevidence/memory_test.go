package sharedevidence

import (
	"testing"
	"time"
)

// TestMemoryWindow: the store sums a window of reports, forgets what is a
// window old (a process that died leaves nothing behind), resets the
// fleet's streak at an accepted attempt and adds to it otherwise, keeps
// the newest retry that worked, and tells the newest tenth's latency from
// the typical latency of the tenths before it.
func TestMemoryWindow(t *testing.T) {
	const window = 10 * time.Second
	var m Memory
	sync := func(now time.Duration, r Report) View {
		t.Helper()
		if r.WorkedAgo == 0 {
			r.WorkedAgo = -1
		}
		v := m.Sync(now, window, []Report{r}, nil)
		if len(v) != 1 {
			t.Fatalf("%d views for one report", len(v))
		}
		return v[0]
	}
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

	v := sync(at(100), Report{Scope: "s", Attempts: 10, Accepts: 10, Reset: true, Probes: 10, ProbeNanos: 10 * 1e6})
	if v.Attempts != 10 || v.Accepts != 10 || v.Streak != 0 || v.WorkedAgo >= 0 || v.Typical != 0 || v.Latest != 1e6 {
		t.Fatalf("first report: %+v", v)
	}
	v = sync(at(101.5), Report{Scope: "s", Attempts: 4, Tail: 4, Timeouts: 2, WorkedAgo: at(0.5), Probes: 1, ProbeNanos: 9e6})
	if v.Attempts != 14 || v.Accepts != 10 || v.Timeouts != 2 || v.Streak != 4 || v.WorkedAgo != at(0.5) {
		t.Fatalf("second report: %+v", v)
	}
	if v.Typical != 1e6 || v.Latest != 9e6 || v.LatestAgo != 0 {
		t.Fatalf("latency: typical %v, latest %v %v ago; want 1ms, 9ms, now", v.Typical, v.Latest, v.LatestAgo)
	}
	v = sync(at(102), Report{Scope: "s", Attempts: 2, Tail: 2})
	if v.Streak != 6 || v.WorkedAgo != at(1) || v.LatestAgo != at(0) {
		t.Fatalf("third report: %+v", v)
	}
	v = sync(at(103), Report{Scope: "s", Attempts: 3, Accepts: 1, Reset: true, Tail: 1})
	if v.Streak != 1 || v.LatestAgo != at(1) {
		t.Fatalf("a report with an accept: %+v, want the streak reset to its tail", v)
	}
	v = sync(at(110.8), Report{Scope: "s"})
	if v.Attempts != 9 || v.Accepts != 1 || v.Timeouts != 2 || v.WorkedAgo != at(9.8) {
		t.Fatalf("at 110.8 s (the first report's tenth gone): %+v", v)
	}
	// Tenth 101, over, moved the typical latency a tenth of the way to
	// its mean (as Adaptive's own typical moves by the time since the
	// last probe over the window); while it is the newest tenth with
	// successes timed, it is judged by the typical latency before it, as
	// Adaptive judges its latest probe: a climb stays a climb.
	if v.Typical != 1e6 || v.Latest != 9e6 {
		t.Fatalf("at 110.8 s: typical %v, latest %v; want 1ms, 9ms", v.Typical, v.Latest)
	}
	if v := sync(at(110.9), Report{Scope: "s", Probes: 1, ProbeNanos: 3e6}); v.Typical != 1.8e6 || v.Latest != 3e6 {
		t.Fatalf("a success timed in the current tenth: typical %v, latest %v; want 1.8ms (tenth 101's share in), 3ms", v.Typical, v.Latest)
	}
	v = sync(at(111.2), Report{Scope: "s"})
	if v.Attempts != 5 || v.Timeouts != 0 || v.WorkedAgo >= 0 || v.Latest != 3e6 {
		t.Fatalf("at 111.2 s (the second report's tenth gone): %+v", v)
	}
	v = sync(at(130), Report{Scope: "s"})
	if v.Attempts != 0 || v.Streak != 0 || v.WorkedAgo >= 0 || v.Latest != 0 {
		t.Fatalf("two windows on: %+v, want nothing left", v)
	}
	if v := sync(at(130), Report{Scope: "other", Attempts: 1, Tail: 1}); v.Attempts != 1 || v.Streak != 1 {
		t.Fatalf("another scope: %+v", v)
	}
	// Reports with nothing in them (processes that sync, idle) do not keep
	// a dead process's failures in a row alive.
	sync(at(200), Report{Scope: "x", Attempts: 5, Tail: 5})
	for s := 202.0; s <= 210; s += 2 {
		if v := sync(at(s), Report{Scope: "x"}); v.Streak != 5 {
			t.Fatalf("at %v s: streak %d, want 5", s, v.Streak)
		}
	}
	if v := sync(at(210.5), Report{Scope: "x"}); v.Streak != 0 {
		t.Fatalf("a window after the last failure, idle reports between: streak %d, want 0", v.Streak)
	}
}

// TestMemoryFromTheClocksStart: a store whose clock starts at zero, as
// the simulator's does, folds its first tenths in like any other.
func TestMemoryFromTheClocksStart(t *testing.T) {
	var m Memory
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for i := range 30 {
		v := m.Sync(ms(100*i), time.Second, []Report{{Scope: "s", Attempts: 1, Accepts: 1, Reset: true, Probes: 1, ProbeNanos: 2e6, WorkedAgo: -1}}, nil)
		if i >= 2 && (v[0].Typical != 2e6 || v[0].Latest != 2e6) {
			t.Fatalf("at %v: %+v, want a typical and a latest latency of 2ms", ms(100*i), v[0])
		}
	}
}
