package sim

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// named returns the policy named name.
func named(t *testing.T, name string) Policy {
	t.Helper()
	for _, p := range Policies() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no policy %q", name)
	return Policy{}
}

// TestDefaultTargets holds the strategy users get when they configure
// nothing to the targets it was built for, in every scenario at its defaults
// and the default seed: with 100 clients (the default fleet) and with 1,000
// sending the same total load, each client with a strategy of its own.
//
// One server:
//   - outage: amplification during the incident at most 1.10x, success at
//     least no retries';
//   - overload: recovery at most 1.1 times no retries', success at least
//     no retries';
//   - brownout: success at least 99 %;
//   - throttle, with a 429 costing the server nothing and costing it a whole
//     attempt: amplification during the incident at most 1.15x, success at
//     least no retries'.
//
// Ten replicas behind a load balancer:
//   - partial incidents (replica-*, rolling-deploy, zone-*): success at
//     least Standard's (quota per client) less 0.5 points, and at least no
//     retries' plus 75 % of the best retrying row's gain over it;
//     amplification during the incident at most Standard's plus 0.05;
//   - whole-service incidents (blip, flapping): success at least
//     Standard's less 0.5 points; amplification during the incident at most
//     1.30x at 100 clients.
func TestDefaultTargets(t *testing.T) {
	if raceEnabled {
		// A run is one goroutine; the race detector finds nothing in it and
		// makes these 200 runs take minutes. The README's test command, and
		// CI's, hold the targets without it.
		t.Skip("the targets are checked without the race detector")
	}
	type target struct {
		kind   Kind
		reject float64
	}
	targets := []target{{Outage, 0}, {Overload, 0}, {Brownout, 0}, {Throttle, 0}, {Throttle, 1}}
	for _, k := range ReplicaKinds() {
		targets = append(targets, target{k, 0})
	}
	for _, clients := range []int{100, 1000} {
		for _, tg := range targets {
			name := fmt.Sprintf("%s/%d", tg.kind, clients)
			if tg.reject > 0 {
				name = fmt.Sprintf("%s-reject-cost-%g/%d", tg.kind, tg.reject, clients)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s, err := Defaults(tg.kind, clients, 1000, time.Minute, 1)
				if err != nil {
					t.Fatal(err)
				}
				s.RejectCost = tg.reject
				run := func(name string) Result { return runOnce(t, s, name) }
				none, def := run("no retries"), run(Default+", per client")
				t.Logf("%s: amplification %.3fx (incident %.3fx), success %.2f%% (no retries %.2f%%), recovery %v (no retries %v, recovered %v), p99 %v",
					tg.kind, def.Amplification(), def.IncidentAmplification(), 100*def.SuccessRate(), 100*none.SuccessRate(), def.Recovery, none.Recovery, def.Recovered, def.P99)
				switch tg.kind {
				case Outage:
					atMost(t, "amplification during the incident", def.IncidentAmplification(), 1.10)
					atLeast(t, "success", def.SuccessRate(), none.SuccessRate())
				case Overload:
					if !def.Recovered {
						t.Errorf("the server never recovered")
					}
					atMost(t, "recovery (s)", def.Recovery.Seconds(), 1.1*none.Recovery.Seconds())
					atLeast(t, "success", def.SuccessRate(), none.SuccessRate())
				case Brownout:
					atLeast(t, "success", def.SuccessRate(), 0.99)
				case Throttle:
					atMost(t, "amplification during the incident", def.IncidentAmplification(), 1.15)
					atLeast(t, "success", def.SuccessRate(), none.SuccessRate())
				case Blip, Flapping:
					std := run("Standard, quota per client")
					atLeast(t, "success against Standard's", def.SuccessRate(), std.SuccessRate()-0.005)
					if clients == 100 {
						atMost(t, "amplification during the incident", def.IncidentAmplification(), 1.30)
					}
				default: // a partial incident
					std := run("Standard, quota per client")
					best := none.SuccessRate()
					for _, p := range Policies() {
						// The rows with a breaker, and the fleet-shared
						// ones, are the default's own, and no retry
						// policy of their own.
						if p.Name != "no retries" && p.Breaker == nil && !strings.HasPrefix(p.Name, FleetAdaptive) {
							best = max(best, run(p.Name).SuccessRate())
						}
					}
					atLeast(t, "success against Standard's", def.SuccessRate(), std.SuccessRate()-0.005)
					atLeast(t, "success against the best gain", def.SuccessRate(), none.SuccessRate()+0.75*(best-none.SuccessRate()))
					atMost(t, "amplification during the incident", def.IncidentAmplification(), std.IncidentAmplification()+0.05)
				}
			})
		}
	}
}

// runs holds the runs of the target tests, which share many: a scenario
// and a policy give the same result every time.
var runs sync.Map // of *memo, by scenario and policy name

type memo struct {
	once sync.Once
	r    Result
	err  error
}

// runOnce runs the policy named name in s, or returns the result of the
// run that did.
func runOnce(t *testing.T, s Scenario, name string) Result {
	t.Helper()
	p := named(t, name)
	m, _ := runs.LoadOrStore(fmt.Sprintf("%+v\x00%s", s, name), new(memo))
	run := m.(*memo)
	run.once.Do(func() { run.r, run.err = Run(context.Background(), s, p) })
	if run.err != nil {
		t.Fatal(run.err)
	}
	return run.r
}

func atMost(t *testing.T, what string, got, limit float64) {
	t.Helper()
	if got > limit+1e-9 {
		t.Errorf("%s = %.4f, want at most %.4f", what, got, limit)
	}
}

func atLeast(t *testing.T, what string, got, limit float64) {
	t.Helper()
	if got < limit-1e-9 {
		t.Errorf("%s = %.4f, want at least %.4f", what, got, limit)
	}
}

// TestExplore prints the chosen policies in every scenario; for development
// (SIM_EXPLORE=policy names separated by |, SIM_CLIENTS=n, SIM_REJECT_COST=
// the throttle's reject cost).
func TestExplore(t *testing.T) {
	names := os.Getenv("SIM_EXPLORE")
	if names == "" {
		t.Skip("set SIM_EXPLORE")
	}
	clients, reject := 100, 0.0
	fmt.Sscan(os.Getenv("SIM_CLIENTS"), &clients)
	fmt.Sscan(os.Getenv("SIM_REJECT_COST"), &reject)
	for _, kind := range []Kind{Outage, Overload, Brownout, Throttle} {
		s, _ := Defaults(kind, clients, 1000, time.Minute, 1)
		if kind == Throttle {
			s.RejectCost = reject
		}
		for _, name := range strings.Split(names, "|") {
			r, err := Run(context.Background(), s, named(t, name))
			if err != nil {
				t.Fatal(err)
			}
			rec := "never"
			if r.Recovered {
				rec = r.Recovery.String()
			}
			t.Logf("%-9s %-32s amp %.4f inc %.4f succ %7.3f%% unf %5d p50 %8v p99 %8v rec %s", kind, name, r.Amplification(), r.IncidentAmplification(), 100*r.SuccessRate(), r.Unfinished, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), rec)
		}
	}
}

// TestBreakerTargets holds the default strategy with a circuit breaker at
// its defaults ("Adaptive + Breaker") to the targets it was built for, in
// the scenarios at their defaults and the default seed.
//
// With 100 clients, for a breaker per client and one shared by all:
//   - outage: the server sees at most 0.5x the offered load during the
//     incident (the breaker sheds first attempts), success at least no
//     retries' less 1 point, recovery within 2 s of the outage's end, the
//     server's and the callers' (99 % of the requests of every later
//     second succeed);
//   - overload: recovery no later than no retries', success at least
//     theirs;
//   - brownout: success at least 99 % (30 % failures never open it);
//   - partial replica incidents: success at least Adaptive's (per client)
//     less 0.1 points.
//
// With 1,000 clients sending the same load, a request a second each, a
// breaker per client costs nothing: success at least Adaptive's less 0.1
// points in the outage, the overload, the brownout, the throttling and
// the partial replica incidents. (In the brownout a client's window
// reaches 20 attempts only with the retries of its failures, and such a
// window has about half of them failed: the sequential test that opening
// asks for beyond the share keeps nearly all of the thousand circuits
// closed. See docs/simulator.md.)
func TestBreakerTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("the targets are checked without the race detector")
	}
	const perClient, oneShared = Breaker + ", per client", Breaker + ", one shared"
	type target struct {
		kind    Kind
		clients int
	}
	var targets []target
	for _, k := range []Kind{Outage, Overload, Brownout} {
		targets = append(targets, target{k, 100})
	}
	for _, k := range ReplicaKinds() {
		if k != Blip && k != Flapping {
			targets = append(targets, target{k, 100}, target{k, 1000})
		}
	}
	for _, k := range []Kind{Outage, Overload, Brownout, Throttle} {
		targets = append(targets, target{k, 1000})
	}
	for _, tg := range targets {
		t.Run(fmt.Sprintf("%s/%d", tg.kind, tg.clients), func(t *testing.T) {
			t.Parallel()
			s, err := Defaults(tg.kind, tg.clients, 1000, time.Minute, 1)
			if err != nil {
				t.Fatal(err)
			}
			run := func(name string) Result { return runOnce(t, s, name) }
			rows := []string{perClient, oneShared}
			if tg.clients == 1000 {
				rows = rows[:1]
			}
			var base Result // what the rows are held to: no retries, or Adaptive
			switch {
			case tg.clients == 1000 || tg.kind.Replicated():
				base = run(Default + ", per client")
			case tg.kind != Brownout:
				base = run("no retries")
			}
			if base.Policy != "" {
				t.Logf("%s: success %.3f%%, recovery %v", base.Policy, 100*base.SuccessRate(), base.Recovery)
			}
			for _, name := range rows {
				r := run(name)
				t.Logf("%s: incident amplification %.3fx, success %.3f%%, recovery %v (recovered %v)",
					name, r.IncidentAmplification(), 100*r.SuccessRate(), r.Recovery, r.Recovered)
				switch {
				case tg.clients == 1000 || tg.kind.Replicated():
					atLeast(t, name+": success against Adaptive's", r.SuccessRate(), base.SuccessRate()-0.001)
				case tg.kind == Outage:
					atMost(t, name+": amplification during the incident", r.IncidentAmplification(), 0.5)
					atLeast(t, name+": success against no retries'", r.SuccessRate(), base.SuccessRate()-0.01)
					if !r.Recovered {
						t.Errorf("%s: the server never recovered", name)
					}
					atMost(t, name+": recovery (s)", r.Recovery.Seconds(), 2)
					// The callers' recovery too: the circuits let their
					// requests through again within 2 s of the end.
					for i := int((s.End + 2*time.Second) / bucket); i < len(r.Goodput); i++ {
						atLeast(t, fmt.Sprintf("%s: successes in second %d", name, i), r.Goodput[i], 0.99*s.Rate)
					}
				case tg.kind == Overload:
					if !r.Recovered {
						t.Errorf("%s: the server never recovered", name)
					}
					atMost(t, name+": recovery (s)", r.Recovery.Seconds(), base.Recovery.Seconds())
					atLeast(t, name+": success against no retries'", r.SuccessRate(), base.SuccessRate())
				case tg.kind == Brownout:
					atLeast(t, name+": success", r.SuccessRate(), 0.99)
				}
			}
		})
	}
}

// TestBreakerRecoveryTargets: a breaker costs its callers no availability
// once the service is back. In outages of 5 to 40 s (ending at 15, 25, 40
// and 50 s) and in flapping, each breaker row succeeds within 2 points of
// no retries. Open spells that doubled (5 s, 10 s, 20 s, up to a minute)
// cost a 30 s outage 18 points: the circuit stayed open for most of the
// spell that the outage's end fell in. At 100 clients here; at 1,000 too
// with RETRYKIT_HEAVY=1 (CI sets it), whose runs take a minute more.
func TestBreakerRecoveryTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("the targets are checked without the race detector")
	}
	sizes := []int{100}
	if os.Getenv("RETRYKIT_HEAVY") == "1" {
		sizes = append(sizes, 1000)
	}
	for _, clients := range sizes {
		for _, end := range []time.Duration{15 * time.Second, 25 * time.Second, 40 * time.Second, 50 * time.Second, 0} {
			name := fmt.Sprintf("outage to %v/%d", end, clients)
			if end == 0 {
				name = fmt.Sprintf("flapping/%d", clients)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				kind := Outage
				if end == 0 {
					kind = Flapping
				}
				s, err := Defaults(kind, clients, 1000, time.Minute, 1)
				if err != nil {
					t.Fatal(err)
				}
				if end > 0 {
					s.End = end
				}
				base := runOnce(t, s, "no retries")
				for _, row := range []string{Breaker + ", per client", Breaker + ", one shared"} {
					r := runOnce(t, s, row)
					t.Logf("%s: success %.1f%% (no retries %.1f%%), incident amplification %.2fx", row, 100*r.SuccessRate(), 100*base.SuccessRate(), r.IncidentAmplification())
					atLeast(t, row+": success against no retries'", r.SuccessRate(), base.SuccessRate()-0.02)
				}
			})
		}
	}
}
