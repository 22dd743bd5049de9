package retry

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestScopeCreateRace(t *testing.T) {
	for i := range 300 {
		s := NewStandard(StandardOptions{Backoff: Constant(0)})
		scope := "x"
		if i%2 == 0 {
			scope = ""
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				tok, _ := s.AcquireInitialToken(scope)
				_, _ = s.RefreshToken(tok, errTransient)
			})
		}
		close(start)
		wg.Wait()
		if s.Available(scope) != 500-8*14 {
			t.Fatalf("scope %q: %d, want %d", scope, s.Available(scope), 500-8*14)
		}
		if scope != "" && s.scopes.count != 1 {
			t.Fatalf("count %d", s.scopes.count)
		}
	}
}

// TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard: a failing service
// reached under 20,000 scope names, far more than the strategy keeps (64
// here, so that dropping the least recently used stays cheap: 1,024 by
// default), collects no fresh allowance under each: the strategy-wide
// counts refuse nearly every retry.
func TestAdaptiveTwentyThousandHostNamesCannotDodgeTheGuard(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxScopes: 64}, Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted := 0
	for i := range 20_000 { // 1,000 a second, each host failing once
		clock.Advance(time.Millisecond)
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
			granted++
		}
	}
	// Without the strategy-wide counts, each of the 64 names kept would
	// start with an allowance of its own (128 retries in all: names
	// dropped for room pass their counts on, so the rest are refused).
	if granted > 40 {
		t.Fatalf("%d of 20,000 fresh host names retried a failing service, want at most 40", granted)
	}
}

// BenchmarkScopeChurn: every call names a scope the strategy no longer
// keeps (4,096 names in turn, 1,024 kept), so every call creates a scope
// and drops one, the least recently used: idle ones after a success, busy
// ones (their quota paid into) after a failure.
func BenchmarkScopeChurn(b *testing.B) {
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprint("host", i)
	}
	for _, bc := range []struct {
		name string
		err  error
	}{{"idle", nil}, {"busy", errTransient}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewStandard(StandardOptions{Backoff: Constant(0)})
			i := 0
			for b.Loop() {
				tok, _ := s.AcquireInitialToken(names[i%len(names)])
				if bc.err == nil {
					_ = s.RecordSuccess(tok)
				} else {
					_, _ = s.RefreshToken(tok, bc.err) // the retry's cost stays paid
				}
				i++
			}
		})
	}
}

// TestScopesDropTheLeastRecentlyUsed: dropping scopes for room takes the
// least recently used idle scope, or the least recently used of all when
// none is idle, exactly as a scan of every scope for each drop would, though
// one scan serves many drops: a scope used since the scan is no longer the
// oldest, and one that was idle at the scan and is busy now (its quota paid
// into through a token, without a lookup) is not dropped as idle, for the
// scope that replaced it would start with a full quota.
func TestScopesDropTheLeastRecentlyUsed(t *testing.T) {
	s := NewStandard(StandardOptions{MaxScopes: 8, Backoff: Constant(0)})
	name := func(i int) string { return fmt.Sprint("s", i) }
	held := func(i int) bool { return s.scopes.peek(name(i)) != nil }
	pass := func(i int) { _ = s.RecordSuccess(mustAcquire(t, s, name(i))) }
	var tok Token // s3's, taken as s3 is made
	for i := range 8 {
		if i == 3 {
			tok = mustAcquire(t, s, name(i))
			continue
		}
		pass(i)
	}
	pass(8) // a scan, which drops s0
	if held(0) || !held(1) {
		t.Fatal("s0, the oldest, was not dropped for s8")
	}
	pass(1) // s1 is now the youngest but two
	pass(9)
	if !held(1) || held(2) {
		t.Fatal("s9 dropped s1, used since the scan, rather than s2, the least recently used")
	}
	// s3 is the oldest now; it turns busy through the token taken as it
	// was made, with no lookup to make it younger.
	if _, err := s.RefreshToken(tok, errTransient); err != nil {
		t.Fatal(err)
	}
	pass(10)
	if !held(3) || held(4) {
		t.Fatal("s10 dropped s3, busy now, rather than s4, the oldest idle scope")
	}
	if got := s.Available(name(10)); got != 500 {
		t.Fatalf("s10 = %d, want 500: it replaced an idle scope", got)
	}
	// With no idle scope left, the least recently used of all go (s1 and
	// s3, the first paid into below), and what replaces them starts no
	// fuller.
	for i := range 11 {
		if held(i) {
			_, _ = s.RefreshToken(mustAcquire(t, s, name(i)), errTransient)
		}
	}
	pass(11)
	pass(12)
	if held(1) || held(3) || !held(5) {
		t.Fatalf("with every scope busy, s11 and s12 dropped others than s1 and s3, the least recently used (s1 %v, s3 %v, s5 %v held)", held(1), held(3), held(5))
	}
	if got := s.Available(name(11)); got >= 500 {
		t.Fatalf("s11 = %d: it replaced a busy scope and must not start full", got)
	}
}

// TestScopesKeepBusyWhileIdleAreHeld: an idle candidate used since the scan
// is passed over as younger, but it is idle still, so no busy scope is
// dropped for the next new one while it is held: the next scan ranks it.
// (Before, with the scan having seen no other idle scope, the oldest busy
// scope went, and its drained quota to the new name.)
func TestScopesKeepBusyWhileIdleAreHeld(t *testing.T) {
	s := NewStandard(StandardOptions{MaxScopes: 8, Backoff: Constant(0)})
	name := func(i int) string { return fmt.Sprint("s", i) }
	held := func(i int) bool { return s.scopes.peek(name(i)) != nil }
	for i := range 6 { // s0-s5 busy: a retry's cost paid
		_, _ = s.RefreshToken(mustAcquire(t, s, name(i)), errTransient)
	}
	for i := 6; i < 9; i++ { // s6, s7 idle; s8 scans and drops s6
		_ = s.RecordSuccess(mustAcquire(t, s, name(i)))
	}
	if held(6) || !held(0) {
		t.Fatal("s8 did not drop s6, the oldest idle scope")
	}
	_ = s.RecordSuccess(mustAcquire(t, s, name(7))) // s7: used since the scan, idle still
	_ = s.RecordSuccess(mustAcquire(t, s, name(9)))
	if !held(0) {
		t.Fatalf("s9 dropped s0, busy, while idle s7 and s8 were held (s7 %v, s8 %v)", held(7), held(8))
	}
	if held(7) && held(8) {
		t.Fatal("s9 dropped neither idle scope")
	}
}
