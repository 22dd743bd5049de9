package sim

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// TestFleetBreakerStore drives the breakers of a fleet breaker's row
// through the real binding in virtual time, as a run does: a client's own
// failures do not open its circuit (an unbound breaker's do), the fleet's
// window does, at every client within a sync; while the circuit is open a
// single probe passes in the whole fleet; its success closes every
// client's circuit within a sync.
func TestFleetBreakerStore(t *testing.T) {
	const sync = 100 * time.Millisecond
	r := &runner{}
	env := Env{Now: func() time.Time { return Epoch.Add(r.clock) }, After: r.after}
	advance := func(d time.Duration) {
		to := r.clock + d
		r.runTimers(to)
		r.clock = to
	}
	breakers := fleetBreaker(sync)(env)
	var b []*retry.Breaker
	for c := range 3 {
		// A client's breaker syncs the circuits it holds: a call makes
		// the scope's, and a released ticket counts nothing.
		b = append(b, breakers(c))
		tk, err := b[c].Allow("")
		if err != nil {
			t.Fatal(err)
		}
		tk.Release()
		advance(30 * time.Millisecond) // the clients' syncs fall at different times
	}
	states := func() (s []retry.BreakerState) {
		for _, br := range b {
			s = append(s, br.State(""))
		}
		return s
	}
	alone := retry.NewBreaker(retry.BreakerOptions{Now: env.Now})
	for range 30 {
		tk, err := b[0].Allow("")
		if err != nil {
			t.Fatalf("client 0's attempt refused before any sync: %v", err)
		}
		tk.Done(context.Background(), errFailed)
		if tk, err := alone.Allow(""); err == nil {
			tk.Done(context.Background(), errFailed)
		}
	}
	if got := b[0].State(""); got != retry.BreakerClosed || alone.State("") != retry.BreakerOpen {
		t.Fatalf("after 30 failures: bound %v, unbound %v; want closed (its own counts open nothing), open", got, alone.State(""))
	}
	// Client 0 sends its counts at 100 ms and finds the window trips; the
	// others see the circuit open at their next sync, before 260 ms.
	advance(15 * time.Millisecond) // 105 ms
	if got := b[0].State(""); got == retry.BreakerClosed {
		t.Errorf("after its sync: client 0's circuit closed, want open")
	}
	advance(160 * time.Millisecond) // 265 ms
	for c, st := range states() {
		if st == retry.BreakerClosed {
			t.Errorf("a sync after the fleet's window tripped: client %d's circuit closed, want open", c)
		}
	}
	// The spell (five attempts at the window's rate: 30 in 10 s) ends;
	// one client takes the fleet's one probe place, the others are refused.
	advance(2 * time.Second)
	var probe retry.BreakerTicket
	probes := 0
	for i := range 3 * len(b) {
		tk, err := b[i%len(b)].Allow("")
		if err == nil {
			probes++
			probe = tk
		}
	}
	if probes != 1 || !probe.Probe() {
		t.Fatalf("after the spell: %d attempts let through of %d, want one, a probe", probes, 3*len(b))
	}
	probe.Done(context.Background(), nil)
	advance(time.Millisecond)        // the verdict is synced at once
	advance(sync + time.Millisecond) // and each client syncs within an interval
	for c, st := range states() {
		if st != retry.BreakerClosed {
			t.Errorf("a sync after the probe succeeded: client %d's circuit %v, want closed", c, st)
		}
	}
}

// TestFleetBreakerTargets holds the rows "Adaptive + fleet breaker" (each
// client's breaker bound to one store it syncs with every 100 ms, or 1 s)
// to their targets, at 100 and 1,000 clients sending 1,000 req/s: in the
// outage the server sees at most 0.5x the offered load during the
// incident, where a breaker per client at 1,000 clients, each seeing a
// request a second, sends 1.10x, and success is within 2 points of no
// retries'; in the brownout (30 % failures) success is at least 99 %: the
// fleet's window does not open against a service that serves most calls.
// Outages ending at 15, 25, 40 and 50 s and flapping cost success at most
// 2 points against no retries, at 100 clients, and at 1,000 with
// RETRYKIT_HEAVY=1.
func TestFleetBreakerTargets(t *testing.T) {
	if raceEnabled {
		t.Skip("the targets are checked without the race detector")
	}
	rows := []string{FleetBreaker + ", 100ms sync", FleetBreaker + ", 1s sync"}
	type target struct {
		kind    Kind
		clients int
		end     time.Duration // the outage's end, if not the default's
	}
	var targets []target
	for _, clients := range []int{100, 1000} {
		targets = append(targets, target{Outage, clients, 0}, target{Brownout, clients, 0})
		if clients == 100 || os.Getenv("RETRYKIT_HEAVY") == "1" {
			for _, end := range []time.Duration{15 * time.Second, 25 * time.Second, 40 * time.Second, 50 * time.Second} {
				targets = append(targets, target{Outage, clients, end})
			}
			targets = append(targets, target{Flapping, clients, 0})
		}
	}
	for _, tg := range targets {
		name := fmt.Sprintf("%s/%d", tg.kind, tg.clients)
		if tg.end > 0 {
			name = fmt.Sprintf("outage to %v/%d", tg.end, tg.clients)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := Defaults(tg.kind, tg.clients, 1000, time.Minute, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tg.end > 0 {
				s.End = tg.end
			}
			var none Result
			if tg.kind != Brownout {
				none = runOnce(t, s, "no retries")
			}
			for _, row := range rows {
				r := runOnce(t, s, row)
				t.Logf("%s: incident amplification %.3fx, success %.2f%% (no retries %.2f%%)", row, r.IncidentAmplification(), 100*r.SuccessRate(), 100*none.SuccessRate())
				switch {
				case tg.kind == Brownout:
					atLeast(t, row+": success", r.SuccessRate(), 0.99)
				case tg.kind == Outage && tg.end == 0:
					atMost(t, row+": amplification during the incident", r.IncidentAmplification(), 0.5)
					fallthrough
				default:
					atLeast(t, row+": success against no retries'", r.SuccessRate(), none.SuccessRate()-0.02)
				}
			}
		})
	}
}
