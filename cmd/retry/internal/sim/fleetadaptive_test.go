package sim

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestFleetAdaptiveTargets holds the rows "Adaptive (default),
// fleet-shared" (each client's strategy bound to one store of the fleet's
// evidence, synced every 100 ms or 1 s) to the targets of a fleet of quiet
// processes, at 100 and 1,000 clients sending 1,000 req/s in all, and at
// 10,000 (a request every 10 s each, where a strategy per client sees too
// little: it amplifies the outage 1.59x), at 100 clients here and at all
// three with RETRYKIT_HEAVY=1 (CI sets it), whose runs take minutes more:
//   - outage: amplification during the incident at most 1.10x;
//   - overload: recovery no later than no retries';
//   - brownout: success at least 99 %;
//   - throttle with a 429 that costs the server a whole attempt:
//     amplification during the incident at most 1.15x;
//   - partial incidents (replica-*, rolling-deploy, zone-*): success at
//     least Standard's (quota per client) less 0.5 points;
//   - whole-service incidents (blip, flapping): success at least no
//     retries' and the one shared strategy's, less 0.5 points, and with
//     the 100 ms sync amplification during the incident at most 1.30x,
//     the default's target there. (With a 1 s sync the fleet's view lags
//     flapping of 1 s down in every 2 and it amplifies it 1.67x, as a
//     strategy per client does, 1.54x to 1.77x.)
//     Standard per client buys its 1.1 more points of flapping at 1,000
//     and 10,000 clients by doubling the load during the incident (2.00x):
//     against a service that is down everywhere, the fleet-shared rows
//     stop retrying as the one shared strategy does, which is what they
//     are for.
func TestFleetAdaptiveTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("the targets are checked without the race detector")
	}
	rows := []string{FleetAdaptive + ", 100ms sync", FleetAdaptive + ", 1s sync"}
	type target struct {
		kind   Kind
		reject float64
	}
	targets := []target{{Outage, 0}, {Overload, 0}, {Brownout, 0}, {Throttle, 1}}
	for _, k := range ReplicaKinds() {
		targets = append(targets, target{k, 0})
	}
	sizes := []int{100}
	if os.Getenv("RETRYKIT_HEAVY") == "1" {
		sizes = append(sizes, 1000, 10000)
	}
	for _, clients := range sizes {
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
				none := runOnce(t, s, "no retries")
				var std, one Result
				switch {
				case tg.kind == Blip || tg.kind == Flapping:
					one = runOnce(t, s, Default+", one shared")
				case tg.kind.Replicated():
					std = runOnce(t, s, "Standard, quota per client")
				}
				for _, row := range rows {
					r := runOnce(t, s, row)
					t.Logf("%s: amplification %.3fx (incident %.3fx), success %.2f%% (no retries %.2f%%), recovery %v (no retries %v)",
						row, r.Amplification(), r.IncidentAmplification(), 100*r.SuccessRate(), 100*none.SuccessRate(), r.Recovery, none.Recovery)
					switch tg.kind {
					case Outage:
						atMost(t, row+": amplification during the incident", r.IncidentAmplification(), 1.10)
					case Overload:
						if !r.Recovered {
							t.Errorf("%s: the server never recovered", row)
						}
						atMost(t, row+": recovery (s)", r.Recovery.Seconds(), none.Recovery.Seconds())
					case Brownout:
						atLeast(t, row+": success", r.SuccessRate(), 0.99)
					case Throttle:
						atMost(t, row+": amplification during the incident", r.IncidentAmplification(), 1.15)
					case Blip, Flapping:
						atLeast(t, row+": success against no retries'", r.SuccessRate(), none.SuccessRate()-0.005)
						atLeast(t, row+": success against the one shared strategy's", r.SuccessRate(), one.SuccessRate()-0.005)
						if row == rows[0] {
							atMost(t, row+": amplification during the incident", r.IncidentAmplification(), 1.30)
						}
					default:
						atLeast(t, row+": success against Standard's", r.SuccessRate(), std.SuccessRate()-0.005)
					}
				}
			})
		}
	}
}
