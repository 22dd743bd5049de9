package sim

import (
	"context"
	"fmt"
	"os"
	"strings"
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
//   - outage: amplification during the incident at most 1.10x, success at
//     least no retries';
//   - overload: recovery at most 1.1 times no retries', success at least
//     no retries';
//   - brownout: success at least 99 %;
//   - throttle: amplification during the incident at most 1.15x, success at
//     least no retries'.
func TestDefaultTargets(t *testing.T) {
	for _, clients := range []int{100, 1000} {
		for _, kind := range []Kind{Outage, Overload, Brownout, Throttle} {
			t.Run(fmt.Sprintf("%s/%d", kind, clients), func(t *testing.T) {
				t.Parallel()
				s, err := Defaults(kind, clients, 1000, time.Minute, 1)
				if err != nil {
					t.Fatal(err)
				}
				none, err := Run(context.Background(), s, named(t, "no retries"))
				if err != nil {
					t.Fatal(err)
				}
				def, err := Run(context.Background(), s, named(t, Default+", per client"))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: amplification %.3fx (incident %.3fx), success %.2f%% (no retries %.2f%%), recovery %v (no retries %v, recovered %v), p99 %v",
					kind, def.Amplification(), def.IncidentAmplification(), 100*def.SuccessRate(), 100*none.SuccessRate(), def.Recovery, none.Recovery, def.Recovered, def.P99)
				switch kind {
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
				}
			})
		}
	}
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
