package retry

import (
	"context"
	"testing"
	"time"
)

// TestZeroAllocations pins the promise that the success path, and a run with
// retries that then succeeds, allocate nothing but the marks on the attempts'
// contexts (see CallerRetries): one for a call that succeeds at once or
// retries within its first four attempts, two for one that makes up to 20
// attempts its strategy foresees, one more each time its attempts double
// past those (see marker), and nothing at all when told Unmarked. The race
// detector makes sync.Pool drop items at random, so it is skipped there.
func TestZeroAllocations(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	standard := NewStandard(StandardOptions{})
	adaptive := NewAdaptive(AdaptiveOptions{})
	budgeted := NewStandard(StandardOptions{Budget: NewBudget(BudgetOptions{})})
	simple := &Simple{Backoff: Constant(0)}
	twoRetries := retriesThenSuccess(2)
	fiveRetries := retriesThenSuccess(5)
	sixAttempts := &Simple{Backoff: Constant(0), MaxAttempts: 6}
	opts := []Option{Scope("svc"), AttemptTimeout(0)}
	attempts := 0
	trace := WithTrace(&Trace{AttemptDone: func(context.Context, string, int, error) { attempts++ }})
	attemptContexts := WithTrace(&Trace{AttemptStart: func(ctx context.Context, _ string, _ int) context.Context { return ctx }})
	nineAttempts := &Simple{Backoff: Constant(0), MaxAttempts: 9}
	twentyOneAttempts := &Simple{Backoff: Constant(0), MaxAttempts: 21}
	twentyRetries := retriesThenSuccess(20)
	eightRetries := retriesThenSuccess(8)
	// A type that wraps a strategy goes through the Strategy methods and
	// single-use tokens rather than the built-in fast path.
	wrapped := &struct{ Strategy }{NewStandard(StandardOptions{})}
	wrappedSimple := &struct{ Strategy }{&Simple{Backoff: Constant(0)}}
	doWith := func(s Strategy, op func(context.Context) error) func([]Option) {
		return func(o []Option) { _ = Do(ctx, s, op, o...) }
	}
	tests := []struct {
		name   string
		run    func([]Option)
		opts   []Option
		allocs float64 // for the marks
	}{
		{"success", doWith(standard, succeed), nil, 1},
		{"success with Adaptive", doWith(adaptive, succeed), nil, 1},
		{"success with Adaptive in a scope", doWith(adaptive, succeed), []Option{Scope("svc")}, 1},
		{"success with Standard and a Budget", doWith(budgeted, succeed), nil, 1},
		{"success with options", doWith(standard, succeed), opts, 1},
		{"success with zero options", doWith(standard, succeed), []Option{{}, {}}, 1},
		{"success through a closed circuit", doWith(standard, succeed), []Option{WithBreaker(NewBreaker(BreakerOptions{}))}, 1},
		{"success through a closed circuit in a scope", doWith(standard, succeed), []Option{Scope("svc"), WithBreaker(NewBreaker(BreakerOptions{}))}, 1},
		{"success with options that set nothing", doWith(standard, succeed), []Option{Scope(""), AttemptTimeout(0), WithTrace(nil), LongPoll()}, 1},
		{"success with a Trace", doWith(standard, succeed), []Option{trace}, 1},
		{"two zero-delay retries", doWith(simple, twoRetries), nil, 1},
		{"two retries with a Trace", doWith(simple, twoRetries), []Option{trace}, 1},
		// Each attempt made in a context of the Trace's has a block of its own.
		{"two retries with a Trace's attempt contexts", doWith(simple, twoRetries), []Option{attemptContexts}, 2},
		{"five zero-delay retries", doWith(sixAttempts, fiveRetries), nil, 2},
		{"eight zero-delay retries", doWith(nineAttempts, eightRetries), nil, 2},
		// The first growth holds 16 attempts at most: the 21st allocates again.
		{"twenty zero-delay retries", doWith(twentyOneAttempts, twentyRetries), nil, 3},
		{"success through tokens", doWith(wrapped, succeed), nil, 1},
		{"two retries through tokens", doWith(wrappedSimple, twoRetries), nil, 1},
		// Beyond the attempts foreseen for a Strategy of another type (3),
		// each allocation holds twice the marks of the one before.
		{"five retries through tokens", doWith(&struct{ Strategy }{sixAttempts}, fiveRetries), nil, 2},
		{"eight retries through tokens", doWith(&struct{ Strategy }{nineAttempts}, eightRetries), nil, 3},
		{"DoValue", func(o []Option) {
			_, _ = DoValue(ctx, standard, func(context.Context) (int, error) { return 1, nil }, o...)
		}, nil, 1},
	}
	for _, tt := range tests {
		unmarked := append(tt.opts[:len(tt.opts):len(tt.opts)], Unmarked())
		tt.run(tt.opts) // warm the pool
		if got := testing.AllocsPerRun(1000, func() { tt.run(tt.opts) }); got != tt.allocs {
			t.Errorf("%s: %v allocations per call, want %v", tt.name, got, tt.allocs)
		}
		if got := testing.AllocsPerRun(1000, func() { tt.run(unmarked) }); got != 0 {
			t.Errorf("%s, Unmarked: %v allocations per call, want 0", tt.name, got)
		}
	}
}

func TestRefusalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip()
	}
	s := NewStandard(StandardOptions{})
	perm := Permanent(errBoom)
	f := func() { tok, _ := s.AcquireInitialToken(""); _, _ = s.RefreshToken(tok, perm) }
	f()
	if n := testing.AllocsPerRun(1000, f); n != 0 {
		t.Fatalf("policy refusal: %v allocs", n)
	}
	e := NewStandard(StandardOptions{Bucket: NewTokenBucket(0)})
	g := func() { tok, _ := e.AcquireInitialToken(""); _, _ = e.RefreshToken(tok, errTransient) }
	g()
	if n := testing.AllocsPerRun(1000, g); n > 1 {
		t.Fatalf("quota refusal: %v allocs, want 1 (the QuotaError)", n)
	}
}

// The marks of a call whose options compose Traces share a block when no
// Trace gives the attempts contexts of their own: the composed Trace has an
// AttemptStart only if one of them has.
func TestComposedTracesShareTheMarks(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	twoRetries := retriesThenSuccess(2)
	done := WithTrace(&Trace{AttemptDone: func(context.Context, string, int, error) {}})
	called := WithTrace(&Trace{Done: func(context.Context, string, int, time.Duration, error) {}})
	started := WithTrace(&Trace{AttemptStart: func(ctx context.Context, _ string, _ int) context.Context { return ctx }})
	for _, tt := range []struct {
		name  string
		opts  []Option
		marks float64
	}{
		{"two Traces without AttemptStart", []Option{done, called}, 1},
		{"a Trace with AttemptStart after one without", []Option{done, started}, 2},
		{"a Trace with AttemptStart before one without", []Option{started, called}, 2},
	} {
		run := func(opts []Option) func() {
			return func() { _ = Do(ctx, &Simple{Backoff: Constant(0)}, twoRetries, opts...) }
		}
		unmarked := append(tt.opts[:len(tt.opts):len(tt.opts)], Unmarked())
		if got := testing.AllocsPerRun(1000, run(tt.opts)) - testing.AllocsPerRun(1000, run(unmarked)); got != tt.marks {
			t.Errorf("%s: the marks of three attempts cost %v allocations, want %v", tt.name, got, tt.marks)
		}
	}
}

// retriesThenSuccess returns an operation that fails k times with a
// retryable error and then succeeds, over and over: each call of a loop
// that retries it k times ends in a success.
func retriesThenSuccess(k int) func(context.Context) error {
	n := 0
	return func(context.Context) error {
		if n++; n%(k+1) != 0 {
			return errTransient
		}
		return nil
	}
}

// TestOptionsWrittenAtTheCall: options written in the call itself, as most
// callers write them, stay on the caller's stack: the loop keeps no pointer
// into them (a WithTicket's ticket among them) past what it copies.
func TestOptionsWrittenAtTheCall(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	standard := NewStandard(StandardOptions{})
	simple := &Simple{Backoff: Constant(0)}
	twoRetries := retriesThenSuccess(2)
	for name, call := range map[string]func(){
		"success":     func() { _ = Do(ctx, standard, succeed, Scope("svc"), Unmarked()) },
		"two retries": func() { _ = Do(ctx, simple, twoRetries, Scope("svc"), Unmarked()) },
		"a ticket":    func() { _ = Do(ctx, simple, twoRetries, WithTicket(BreakerTicket{}), Unmarked()) },
	} {
		call()
		if got := testing.AllocsPerRun(1000, call); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, got)
		}
	}
}

// TestClockReadsAllocateNothing: the Breaker's doc promises that a closed
// circuit costs an attempt no allocation, and TestZeroAllocations' that a
// run with retries that then succeeds allocates nothing but the marks; both
// read the clock, whose every reading once moved its time.Time to the heap.
// Most successes read no clock, so they are counted in runs of 4096: the
// integer average of testing.AllocsPerRun would hide one allocation in 64
// calls.
func TestClockReadsAllocateNothing(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are not meaningful under -race or -short")
	}
	ctx := context.Background()
	b := NewBreaker(BreakerOptions{FailureRate: 2}) // never opens
	adaptive := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Backoff: Constant(0)}})
	two := retriesThenSuccess(2)
	one := retriesThenSuccess(1)
	simple := &Simple{Backoff: Constant(0)}
	for name, call := range map[string]func(){
		"a failure through a closed circuit (Allow, Done)": func() { tk, _ := b.Allow(""); tk.Done(ctx, errBrk500) },
		"two retries through a closed circuit, Unmarked":   func() { _ = Do(ctx, simple, two, WithBreaker(b), Unmarked()) },
		// Every 64th success through a closed circuit is placed in its
		// window, at a clock reading; AllocsPerRun's integer average hides
		// one allocation in 64 calls, not in 64 times 64.
		"4096 successes through a closed circuit, Unmarked": func() {
			for range 4096 {
				_ = Do(ctx, simple, succeed, WithBreaker(b), Unmarked())
			}
		},
		// Adaptive's success path reads the clock for its latency probes
		// and window counts, now and then.
		"4096 successes with Adaptive, Unmarked": func() {
			for range 4096 {
				_ = Do(ctx, adaptive, succeed, Unmarked())
			}
		},
		"a retry with Adaptive, Unmarked": func() { _ = Do(ctx, adaptive, one, Unmarked()) },
	} {
		call()
		if got := testing.AllocsPerRun(1000, call); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, got)
		}
	}
}
