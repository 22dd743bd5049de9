package sim

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// layerRow returns the row of the layered scenario named name.
func layerRow(t *testing.T, name string) LayerPolicy {
	t.Helper()
	for _, p := range LayerPolicies() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no row %q", name)
	return LayerPolicy{}
}

func runLayers(t *testing.T, s LayersScenario, p LayerPolicy) LayersResult {
	t.Helper()
	if err := s.Check(); err != nil && s.End < s.Duration {
		t.Fatal(err)
	}
	r, err := RunLayers(context.Background(), s, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLayersTargets holds the layered scenario at its defaults and the
// default seed to what issue 15 set out: naive retries at every tier send
// about 27 attempts to the database per request during the outage (3 × 3 ×
// 3), and keep it down; retrykit's default at every tier, with its rule for
// retries at one layer, at most 1.2, with 100 and with 1,000 instances per
// tier, and the database recovers at once.
func TestLayersTargets(t *testing.T) {
	back := Tiers - 1
	t.Run("naive", func(t *testing.T) {
		t.Parallel()
		naive := runLayers(t, DefaultLayers(100, 1000, time.Minute, 1), layerRow(t, "naive: 3 attempts at every tier"))
		t.Logf("naive: %.3fx, %.3fx, %.3fx; success %.3f", naive.IncidentAmplification(0), naive.IncidentAmplification(1), naive.IncidentAmplification(2), naive.SuccessRate())
		if got := naive.IncidentAmplification(back); got < 25 || got > 27.5 {
			t.Errorf("naive retries at every tier: %.2fx at the back during the outage, want about 27x", got)
		}
		if naive.Recovered {
			t.Errorf("naive retries recovered after %v, want never: 27x keeps the database down", naive.Recovery)
		}
	})
	for _, clients := range []int{100, 1000} {
		t.Run(fmt.Sprint(clients), func(t *testing.T) {
			t.Parallel()
			s := DefaultLayers(clients, 1000, time.Minute, 1)
			def := runLayers(t, s, layerRow(t, LayerDefault))
			none := runLayers(t, s, LayerPolicy{Policy: named(t, "no retries")})
			t.Logf("%d clients: %.3fx, %.3fx, %.3fx; success %.3f (no retries %.3f)", clients,
				def.IncidentAmplification(0), def.IncidentAmplification(1), def.IncidentAmplification(2), def.SuccessRate(), none.SuccessRate())
			atMost(t, "the default's amplification at the back during the outage", def.IncidentAmplification(back), 1.2)
			atLeast(t, "the default's success", def.SuccessRate(), none.SuccessRate())
			if !def.Recovered || def.Recovery > 0 {
				t.Errorf("the default recovered %v after %v, want at once", def.Recovered, def.Recovery)
			}
		})
	}
}

// The same seed gives the same run; another seed, another.
func TestLayersIsDeterministic(t *testing.T) {
	s := DefaultLayers(50, 500, 20*time.Second, 7)
	p := layerRow(t, "Standard at every tier")
	a, b := runLayers(t, s, p), runLayers(t, s, p)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with the same seed differ:\n%+v\n%+v", a, b)
	}
	s.Seed = 8
	if c := runLayers(t, s, p); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave identical runs")
	}
}

// layerTotalOutage fails every attempt at the database for the whole run;
// every queue is so fast that nothing times out unless capacity says so.
func layerTotalOutage(capacity float64) LayersScenario {
	return LayersScenario{Kind: Layers, Clients: 10, Rate: 100, Duration: 10 * time.Second, TierCapacity: 1e7, Capacity: capacity,
		Timeout: time.Second, Start: 0, End: time.Hour, Seed: 3}
}

func immediate(rule LayerRule) LayerPolicy {
	return LayerPolicy{policy("3 immediate attempts", func() retry.Strategy {
		return &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}
	}), rule}
}

// With three immediate attempts at every tier and a database that answers
// every attempt with a failure, the rule decides the count exactly. Alone:
// 3 × 3 × 3. Retries marked (today): the middle retries the front's first
// attempt (3) and makes one attempt for each of its 2 retries: 5; the back
// retries the calls of the middle's first attempts and not the others':
// 3 + 1 + 1 for the front's first attempt, 3 for each of its retries: 11.
// Every attempt marked: only the front retries.
func TestLayerRuleCountsAttempts(t *testing.T) {
	for _, c := range []struct {
		rule LayerRule
		want [Tiers]int
	}{{Alone, [Tiers]int{3, 9, 27}}, {RetriesMarked, [Tiers]int{3, 5, 11}}, {AllMarked, [Tiers]int{3, 3, 3}}} {
		r := runLayers(t, layerTotalOutage(1e7), immediate(c.rule))
		if r.Requests == 0 || r.Unfinished != 0 || r.Succeeded != 0 {
			t.Fatalf("rule %d: %d requests, %d unfinished, %d succeeded; want all answered with failure", c.rule, r.Requests, r.Unfinished, r.Succeeded)
		}
		for tier := range Tiers {
			if r.Attempts[tier] != c.want[tier]*r.Requests {
				t.Errorf("rule %d: the %s sent %d attempts for %d requests, want %d×", c.rule, TierNames[tier], r.Attempts[tier], r.Requests, c.want[tier])
			}
		}
	}
}

// The rule leaves to a tier the failures its caller cannot judge: when the
// database never answers in time, every tier retries its timeouts, marked
// or not (as httpretry.Transport keeps its retries for what is not a
// response), and the back still sends 27 attempts per request.
func TestLayerRuleLeavesTimeoutsToEachTier(t *testing.T) {
	for _, rule := range []LayerRule{Alone, RetriesMarked, AllMarked} {
		r := runLayers(t, layerTotalOutage(1e-3), immediate(rule))
		if r.Requests == 0 || r.Unfinished != 0 {
			t.Fatalf("rule %d: %d requests, %d unfinished", rule, r.Requests, r.Unfinished)
		}
		for tier, want := range [Tiers]int{3, 9, 27} {
			if r.Attempts[tier] != want*r.Requests {
				t.Errorf("rule %d: the %s sent %d attempts for %d requests, want %d×", rule, TierNames[tier], r.Attempts[tier], r.Requests, want)
			}
		}
	}
}

// With Shed a queue drops the work of a caller that has given up. At 20
// instances per tier, Standard's quotas let enough retries through to bury
// the database in work nobody waits for, and it stays down after the outage;
// shedding that work, it recovers at once.
func TestLayersShedDropsAbandonedWork(t *testing.T) {
	s := DefaultLayers(20, 200, 20*time.Second, 1)
	p := layerRow(t, "Standard at every tier")
	kept := runLayers(t, s, p)
	s.Shed = true
	shed := runLayers(t, s, p)
	if kept.Recovered || !shed.Recovered || shed.Recovery > 0 || shed.SuccessRate() <= kept.SuccessRate() {
		t.Errorf("success %.3f, recovered %v after %v when shedding; %.3f, %v without; want recovery only when shedding",
			shed.SuccessRate(), shed.Recovered, shed.Recovery, kept.SuccessRate(), kept.Recovered)
	}
}

func TestLayersCheck(t *testing.T) {
	ok := DefaultLayers(100, 1000, time.Minute, 1)
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*LayersScenario){
		"no clients":        func(s *LayersScenario) { s.Clients = 0 },
		"no database":       func(s *LayersScenario) { s.Capacity = 0 },
		"no tier capacity":  func(s *LayersScenario) { s.TierCapacity = 0 },
		"no timeout":        func(s *LayersScenario) { s.Timeout = 0 },
		"outage past end":   func(s *LayersScenario) { s.End = 2 * time.Minute },
		"outage ends first": func(s *LayersScenario) { s.End = s.Start },
	} {
		s := ok
		mutate(&s)
		if s.Check() == nil {
			t.Errorf("%s: Check accepts %+v", name, s)
		}
	}
}

// A run stops with the context's error once it is done.
func TestLayersStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunLayers(ctx, DefaultLayers(100, 1000, time.Minute, 1), layerRow(t, LayerDefault), nil); err != context.Canceled {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
