package retry

import (
	"fmt"
	"testing"
	"time"
)

const outcomesWindow = 10 * time.Second // slots of a second

// reading is the clock reading s seconds after the clock's zero.
func reading(s float64) int64 { return int64(s * float64(time.Second)) }

// wantOutcomes fails the test unless a window's counts are the ones wanted.
func wantOutcomes(t *testing.T, what string, attempts, accepts, wantAttempts, wantAccepts float64) {
	t.Helper()
	if attempts != wantAttempts || accepts != wantAccepts {
		t.Fatalf("%s: %v attempts, %v accepts; want %v, %v", what, attempts, accepts, wantAttempts, wantAccepts)
	}
}

// A success counts an attempt and an accept in the running total, packed
// high and low, and asks for a placement once every placeEvery accepts.
func TestOutcomesSuccess(t *testing.T) {
	var o outcomes
	for i := range uint64(3) {
		if got, want := o.success(), (i+1)*oneAttempt|(i+1)*oneAccept; got != want {
			t.Fatalf("success %d returned %#x, want %#x", i+1, got, want)
		}
	}
	tests := []struct {
		total uint64
		want  bool
	}{
		{3*oneAttempt | 3, false},
		{placeEvery*oneAttempt | placeEvery, true},
		{(placeEvery+7)*oneAttempt | placeEvery, true}, // failures do not count
		{placeEvery*oneAttempt | (placeEvery - 1), false},
		{3 * placeEvery * (oneAttempt | oneAccept), true},
		{(3*placeEvery + 1) * (oneAttempt | oneAccept), false},
		{placeEvery / 2 * (oneAttempt | oneAccept), false},
	}
	for _, tt := range tests {
		if got := full(tt.total); got != tt.want {
			t.Errorf("full(%#x) = %v, want %v", tt.total, got, tt.want)
		}
	}
}

// Counts are placed in the window when a failure or an accept consults it,
// each exactly once, and leave it a window later.
func TestOutcomesWindow(t *testing.T) {
	var o outcomes
	o.success()
	o.success()
	a, c := o.failure(reading(1), outcomesWindow)
	wantOutcomes(t, "two successes and a failure", a, c, 3, 2)
	a, c = o.count(reading(1), outcomesWindow)
	wantOutcomes(t, "counted again", a, c, 3, 2)
	a, c = o.accept(reading(5), outcomesWindow)
	wantOutcomes(t, "an accept four seconds later", a, c, 4, 3)
	o.success()
	a, c = o.count(reading(10.5), outcomesWindow)
	wantOutcomes(t, "a success placed at 10.5 s", a, c, 5, 4)
	a, c = o.count(reading(11), outcomesWindow)
	wantOutcomes(t, "at 11 s, the window 2..11 s", a, c, 2, 2)
	a, c = o.count(reading(14.9), outcomesWindow)
	wantOutcomes(t, "at 14.9 s, the window 5..14 s", a, c, 2, 2)
	a, c = o.failure(reading(15.9), outcomesWindow)
	wantOutcomes(t, "a failure at 15.9 s, the window 6..15 s", a, c, 2, 1)
	a, c = o.count(reading(26), outcomesWindow)
	wantOutcomes(t, "at 26 s, everything has left", a, c, 0, 0)
}

// Counts pending since the last placement are spread evenly over the time
// since: a window shorter than that time holds its share of them, so that
// successes long before a failure weigh less than those just before it.
func TestOutcomesSpread(t *testing.T) {
	var o outcomes
	o.failure(reading(1), outcomesWindow)
	for range 100 {
		o.success()
	}
	// 40 s since the last placement: the 10 s window holds a quarter of the
	// 100 successes, and the failure that places them, which happened
	// now, whole.
	a, c := o.failure(reading(41), outcomesWindow)
	wantOutcomes(t, "40 s after the last placement", a, c, 100.0/4+1, 100.0/4)

	// Within a window of the last placement, all of them count.
	for range 10 {
		o.success()
	}
	a, c = o.failure(reading(45), outcomesWindow)
	wantOutcomes(t, "4 s after", a, c, 100.0/4+1+11, 100.0/4+10)

	// An accept that places the counts is placed whole too.
	for range 100 {
		o.success()
	}
	a, c = o.accept(reading(85), outcomesWindow)
	wantOutcomes(t, "an accept 40 s after", a, c, 100.0/4+1, 100.0/4+1)
}

// The running totals wrap at 32 bits each; a placement counts what was
// added since the last one across the wrap. An accept that wraps the low
// word carries one attempt into the high word (documented as the price of
// one atomic add: once in four billion accepts).
func TestOutcomesTotalsWrap(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		start                  uint64
		wantAttempts, accepted float64
	}{
		{"attempts wrap", (1<<32-2)<<32 | 1000, 5, 5},
		{"accepts wrap", 2000<<32 | (1<<32 - 2), 5 + 1, 5},
		{"both wrap", (1<<32-2)<<32 | (1<<32 - 3), 5 + 1, 5},
	} {
		var o outcomes
		o.total.Store(tt.start)
		o.taken.Store(tt.start) // counts were placed up to start
		for range 5 {
			o.success()
		}
		a, c := o.count(reading(1), outcomesWindow)
		wantOutcomes(t, tt.name, a, c, tt.wantAttempts, tt.accepted)
	}
}

// Successes, accepts and failures from many goroutines at once lose no
// count and place none twice: each placement takes exactly the counts
// added since the one before.
func TestOutcomesConcurrent(t *testing.T) {
	var o outcomes
	const workers, rounds = 8, 50000
	now := reading(3) // one clock reading: every placement's share is whole
	together(workers, rounds, func(g, i int) {
		switch (i + g) % 4 {
		case 0:
			o.failure(now, outcomesWindow)
		case 1:
			o.success()
		default:
			o.accept(now, outcomesWindow)
		}
	})
	a, c := o.count(now, outcomesWindow)
	wantOutcomes(t, "after every goroutine", a, c, workers*rounds, workers*rounds*3/4)
}

// TestAdaptiveLongHealthBeforeAFailure: a scope that succeeded ten times a
// second for an hour, and whose service then fails every attempt, starts
// client-side throttling within about a second, as a young scope does: the
// hour's successes are spread over the hour, not all placed in the window
// that ends at the first failure (which held 36,000 accepts, not the 100 of
// its 10 s, and refused no retry for a whole window).
func TestAdaptiveLongHealthBeforeAFailure(t *testing.T) {
	for _, scope := range []string{"", "service"} {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Streak: -1, Now: clock.Now, Rand: alwaysRefuse})
		for range 36_000 {
			clock.Advance(100 * time.Millisecond)
			passOnce(t, a, scope)
		}
		refused := -1
		for i := range 1000 { // 100 failing requests a second, for 10 s
			clock.Advance(10 * time.Millisecond)
			if err := failOnce(t, a, scope, errAdaptive503); err != nil {
				if err != errThrottledClient {
					t.Fatalf("scope %q: failure %d refused with %v, want client-side throttling", scope, i+1, err)
				}
				refused = i
				break
			}
		}
		// Throttling begins once the window's attempts pass twice its
		// accepts: 100 successes in the last 10 s, so about 100 failures on.
		if refused < 90 || refused > 150 {
			t.Fatalf("scope %q: the first retry refused was that of failure %d, want about the 100th", scope, refused+1)
		}
	}
}

// TestAdaptiveLongHealthBeforeAFailureAcrossScopes: the same across scopes:
// an hour of successes under a thousand host names (each used too seldom
// to be judged by its own window, so that they count towards every
// scope's), then failures each under a host name never seen (each new
// scope has no evidence of its own), meet the strategy-wide throttling
// within about a second.
func TestAdaptiveLongHealthBeforeAFailureAcrossScopes(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Streak: -1, Now: clock.Now, Rand: alwaysRefuse})
	for i := range 36_000 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, fmt.Sprint("h", i%1000))
	}
	refused := -1
	for i := range 1000 {
		clock.Advance(10 * time.Millisecond)
		if err := failOnce(t, a, fmt.Sprint("new", i), errAdaptive503); err != nil {
			if err != errThrottledAll {
				t.Fatalf("failure %d refused with %v, want the strategy-wide client-side throttling", i+1, err)
			}
			refused = i
			break
		}
	}
	if refused < 90 || refused > 150 {
		t.Fatalf("the first retry refused was that of failure %d, want about the 100th", refused+1)
	}
}
