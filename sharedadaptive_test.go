package retry

import (
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/sharedevidence"
)

// bindFleet binds a, syncs it once with store at the hand clock's time and
// returns the process, for a test to sync again.
func bindFleet(t *testing.T, a *Adaptive, store *sharedevidence.Memory, clock *handClock) func() {
	t.Helper()
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	sync := func() {
		views := store.Sync(time.Duration(clock.Now().UnixNano()), p.Window(), p.Reports(), nil)
		p.Sent()
		p.Apply(views, sharedevidence.Fresh(100*time.Millisecond, 100*time.Millisecond))
	}
	return sync
}

// TestFleetAdaptiveDecidesAsTheFleet: processes that each see too little
// to judge a service decide, once synced, as one Adaptive that saw
// everything would: a failing service's first failure in a process is
// not retried when the fleet's streak is long; a black-holed replica's
// timeout is retried when the fleet's successes answer in their usual
// time, though the process timed none; and when the view goes stale the
// process decides on its own again.
func TestFleetAdaptiveDecidesAsTheFleet(t *testing.T) {
	t.Run("streak", func(t *testing.T) {
		clock := newHandClock()
		store := &sharedevidence.Memory{}
		var procs []*Adaptive
		var syncs []func()
		for range 10 {
			a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
			procs = append(procs, a)
			syncs = append(syncs, bindFleet(t, a, store, clock))
		}
		// Every process succeeds, and the fleet hears of it; then every
		// process fails once: no process alone has a streak of 3.
		for _, a := range procs {
			passOnce(t, a, "")
		}
		clock.Advance(100 * time.Millisecond)
		for _, s := range syncs {
			s()
		}
		for _, a := range procs {
			if err := failOnce(t, a, "", errAdaptive503); err != nil {
				t.Fatalf("a process's first failure before any sync: %v, want a retry", err)
			}
		}
		// Two rounds of syncs: a process's view holds what was reported
		// before its own sync.
		for range 2 {
			clock.Advance(100 * time.Millisecond)
			for _, s := range syncs {
				s()
			}
		}
		fresh := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		if err := failOnce(t, fresh, "", errAdaptive503); err != nil {
			t.Fatalf("an unbound process's first failure: %v, want a retry", err)
		}
		err := failOnce(t, procs[0], "", errAdaptive503)
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("after the fleet failed 10 in a row: %v, want ErrBudgetExhausted", err)
		}
		// A success of the process's own since its report: its own streak
		// governs until the next sync.
		passOnce(t, procs[1], "")
		if err := failOnce(t, procs[1], "", errAdaptive503); err != nil {
			t.Fatalf("after a success of its own: %v, want a retry", err)
		}
		// Stale: the process's own evidence again.
		clock.Advance(time.Second)
		if err := failOnce(t, procs[2], "", errAdaptive503); err != nil {
			t.Fatalf("with a stale view and a streak of 2 of its own: %v, want a retry", err)
		}
	})
	t.Run("latency", func(t *testing.T) {
		clock := newHandClock()
		store := &sharedevidence.Memory{}
		// One process times many successes, in several tenths of the
		// window; another has timed none.
		busy := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		quiet := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		syncBusy := bindFleet(t, busy, store, clock)
		syncQuiet := bindFleet(t, quiet, store, clock)
		for range 40 {
			tok, err := busy.AcquireInitialToken("")
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Millisecond)
			if err := busy.RecordSuccess(tok); err != nil {
				t.Fatal(err)
			}
			clock.Advance(90 * time.Millisecond)
			syncBusy()
		}
		passOnce(t, quiet, "")
		if err := failOnce(t, quiet, "", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("a timeout in a process with no latency evidence, unsynced: %v, want ErrNotRetryable", err)
		}
		syncQuiet()
		if err := failOnce(t, quiet, "", errAdaptiveTimeout); err != nil {
			t.Fatalf("a timeout once the fleet's successes answer in their usual time: %v, want a retry", err)
		}
	})
	t.Run("throttling", func(t *testing.T) {
		clock := newHandClock()
		store := &sharedevidence.Memory{}
		var syncs []func()
		var procs []*Adaptive
		for range 20 {
			a := NewAdaptive(AdaptiveOptions{Streak: -1, Now: clock.Now, Rand: alwaysRefuse})
			procs = append(procs, a)
			syncs = append(syncs, bindFleet(t, a, store, clock))
		}
		// Each process: one failure; the fleet: 20 attempts, none accepted.
		for _, a := range procs {
			if err := failOnce(t, a, "", errAdaptive503); err != nil {
				t.Fatalf("a process's first failure: %v, want a retry", err)
			}
		}
		for range 2 {
			clock.Advance(100 * time.Millisecond)
			for _, s := range syncs {
				s()
			}
		}
		if err := failOnce(t, procs[0], "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("the fleet accepts nothing: %v, want ErrBudgetExhausted (client-side throttling)", err)
		}
	})
}

// TestFleetAdaptiveReportsOnlyWhatIsNew: a process sends each count once,
// and a scope dropped and made again starts from nothing rather than from
// a difference that wraps.
func TestFleetAdaptiveReportsOnlyWhatIsNew(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	passOnce(t, a, "s")
	_ = failOnce(t, a, "s", errAdaptiveTimeout)
	r := p.Reports()
	if len(r) != 1 || r[0].Attempts != 2 || r[0].Accepts != 1 || r[0].Timeouts != 1 || !r[0].Reset || r[0].Tail != 1 {
		t.Fatalf("first report: %+v, want 2 attempts, 1 accepted, 1 timeout, a reset with a tail of 1", r)
	}
	p.Sent()
	_ = failOnce(t, a, "s", errAdaptive503)
	r = p.Reports()
	if len(r) != 1 || r[0].Attempts != 1 || r[0].Accepts != 0 || r[0].Timeouts != 0 || r[0].Reset || r[0].Tail != 1 {
		t.Fatalf("second report: %+v, want 1 attempt and a tail of 1 to add", r)
	}
	p.Sent()
	r = p.Reports()
	if len(r) != 1 || r[0].Attempts != 0 || r[0].Tail != 0 {
		t.Fatalf("a report with nothing new: %+v", r)
	}
}

// TestFleetAdaptiveReportsAScopeMadeAgain: a scope dropped for room and
// made again reports what it counted since, whether it carries its name's
// counts on or starts from nothing: never the name's whole history again,
// nor a difference that wraps.
func TestFleetAdaptiveReportsAScopeMadeAgain(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxScopes: 2}, Now: clock.Now, Rand: noRefusal})
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	for range 5 {
		passOnce(t, a, "s")
	}
	_ = failOnce(t, a, "s", errAdaptiveTimeout)
	p.Reports()
	p.Sent()
	for _, other := range []string{"x", "y", "z", "w"} {
		clock.Advance(time.Second)
		passOnce(t, a, other)
	}
	clock.Advance(time.Second)
	_ = failOnce(t, a, "s", errAdaptive503)
	for _, r := range p.Reports() {
		if r.Scope == "s" && (r.Attempts != 1 || r.Accepts != 0 || r.Timeouts != 0 || r.Probes != 0) {
			t.Fatalf("the scope made again reports %+v, want its one failed attempt", r)
		}
	}
}

// TestFleetAdaptiveScopeTakingOverAnotherReportsItsOwn: a scope made when
// the strategy holds as many as it may takes over the state of the one it
// drops, of another name (so that dropping cannot lift a failing scope's
// refusals); its reports carry only what it counted itself, and never the
// other name's view: the fleet's evidence of the new name is the new
// name's.
func TestFleetAdaptiveScopeTakingOverAnotherReportsItsOwn(t *testing.T) {
	clock := newHandClock()
	store := &sharedevidence.Memory{}
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxScopes: 1}, Now: clock.Now, Rand: noRefusal})
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	sync := func() []sharedevidence.Report {
		r := append([]sharedevidence.Report(nil), p.Reports()...)
		views := store.Sync(time.Duration(clock.Now().UnixNano()), p.Window(), r, nil)
		p.Sent()
		p.Apply(views, sharedevidence.Fresh(100*time.Millisecond, 100*time.Millisecond))
		return r
	}
	for range 50 {
		passOnce(t, a, "a")
	}
	for range 6 {
		_ = failOnce(t, a, "a", errAdaptive503)
	}
	clock.Advance(100 * time.Millisecond)
	sync()
	clock.Advance(10 * time.Millisecond)
	_ = failOnce(t, a, "b", errAdaptive503) // "a" is dropped, "b" takes over
	if sc := a.quota("b").(*adaptiveScope); sc.fleet.view.Load() != nil {
		t.Errorf("scope b holds a view before any sync reported it: another name's")
	}
	clock.Advance(100 * time.Millisecond)
	for _, r := range sync() {
		if r.Scope == "b" && (r.Attempts != 1 || r.Accepts != 0 || r.Reset || r.Tail != 1 || r.Probes != 0 || r.WorkedAgo >= 0) {
			t.Errorf("scope b's first report: %+v; want its one failed attempt", r)
		}
	}
}

// TestFleetAdaptiveForgetKeepsTheStreak: counts too old for the fleet's
// window are not sent, but the failures in a row they end with are.
func TestFleetAdaptiveForgetKeepsTheStreak(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	passOnce(t, a, "s")
	for range 2 {
		_ = failOnce(t, a, "s", errAdaptiveTimeout)
	}
	p.Reports()
	p.Forget()
	r := p.Reports()
	if len(r) != 1 || r[0].Attempts != 0 || r[0].Accepts != 0 || r[0].Timeouts != 0 || r[0].Probes != 0 || r[0].Reset || r[0].Tail != 2 {
		t.Fatalf("after Forget: %+v, want no counts and a tail of 2 to add", r)
	}
}

// TestFleetAdaptiveIdleScopesAreNotReported: a scope with nothing new for
// ten windows is left out of the syncs (each costs the store a scope's
// work), and is reported again at its next attempt.
func TestFleetAdaptiveIdleScopesAreNotReported(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Window: 100 * time.Millisecond})
	p := sharedevidence.NewProcess(sharedevidence.Bind(a))
	passOnce(t, a, "idle")
	passOnce(t, a, "busy")
	scopes := func() (names []string) {
		for _, r := range p.Reports() {
			names = append(names, r.Scope)
		}
		p.Sent()
		return names
	}
	for range 15 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, "busy")
		scopes()
	}
	if got := scopes(); len(got) != 1 || got[0] != "busy" {
		t.Fatalf("after 1.5 s, windows of 100ms, with nothing new in one scope: reports of %v, want [busy]", got)
	}
	_ = failOnce(t, a, "idle", errAdaptive503)
	if got := scopes(); len(got) != 2 {
		t.Fatalf("after a failure in the idle scope: reports of %v, want both", got)
	}
}

// TestFleetAdaptiveQuietProcessOfAThrottledFleetIsLimited: a process with
// a handful of attempts of its own, whose limiter starts from the floor,
// retries a throttle when alone; bound to a fleet whose window holds many
// attempts, it is refused as a busy process is, by its own limiter, which
// reads the fleet's attempts as its evidence of a rate (see next in
// adaptive.go: retry sim's throttle scenario at 10,000 clients shows
// 1.15x the load during the incident this way, 1.38x counting the
// process's own attempts, for the same success).
func TestFleetAdaptiveQuietProcessOfAThrottledFleetIsLimited(t *testing.T) {
	clock := newHandClock()
	store := &sharedevidence.Memory{}
	opts := AdaptiveOptions{Streak: -1, MaxWait: time.Millisecond, Now: clock.Now, Rand: noRefusal}
	var syncs []func()
	for range 20 { // the fleet: busy processes, healthy so far
		a := NewAdaptive(opts)
		syncs = append(syncs, bindFleet(t, a, store, clock))
		for range 5 {
			passOnce(t, a, "")
		}
	}
	quiet := NewAdaptive(opts)
	syncs = append(syncs, bindFleet(t, quiet, store, clock))
	passOnce(t, quiet, "") // its one request so far, which the fleet hears of
	alone := NewAdaptive(opts)
	passOnce(t, alone, "")
	for range 2 {
		clock.Advance(100 * time.Millisecond)
		for _, s := range syncs {
			s()
		}
	}
	if err := failOnce(t, alone, "", errAdaptive429); err != nil {
		t.Fatalf("a process alone, its second attempt throttled: %v, want a retry", err)
	}
	if err := failOnce(t, quiet, "", errAdaptive429); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("the same process in a fleet of 100 attempts: %v, want the limiter's refusal (ErrBudgetExhausted)", err)
	}
}
