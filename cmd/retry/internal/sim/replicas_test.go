package sim

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// replicaDefaults is a replica scenario at its defaults, for the README's
// load: 1,000 req/s from 100 clients for a minute.
func replicaDefaults(t *testing.T, k Kind) Scenario {
	t.Helper()
	s, err := Defaults(k, 100, 1000, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runFleet runs p in s and returns the result and the run's replicas, whose
// counters say what each was sent and queued.
func runFleet(t *testing.T, s Scenario, p Policy) (Result, *fleet) {
	t.Helper()
	r := runner{s: s, p: p, ctx: context.Background()}
	res, err := r.run()
	if err != nil {
		t.Fatal(err)
	}
	return res, r.fleet
}

// seen is a failure a strategy was shown, and when.
type seen struct {
	at  time.Duration
	err error
}

// recording is a policy whose clients share one strategy that makes up to
// attempts attempts, at once, and records every failure it is shown, at the
// run's virtual time. (It decides through tokens: the runner records
// nothing for a shared stepper.)
func recording(attempts int, log *[]seen) Policy {
	return Policy{Name: "recording", New: func(env Env) func(int) retry.Strategy {
		s := &recorder{Strategy: &retry.Simple{MaxAttempts: attempts, Backoff: retry.Constant(0)}, now: env.Now, log: log}
		return func(int) retry.Strategy { return s }
	}}
}

type recorder struct {
	retry.Strategy
	now func() time.Time
	log *[]seen
}

func (r *recorder) RefreshToken(t retry.Token, err error) (retry.Token, error) {
	*r.log = append(*r.log, seen{r.now().Sub(Epoch), err})
	return r.Strategy.RefreshToken(t, err)
}

func count(log []seen, err error) int {
	n := 0
	for _, s := range log {
		if s.err == err {
			n++
		}
	}
	return n
}

// near fails the test unless got is within tolerance (a share) of want.
func near(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if math.Abs(got-want) > tolerance*want {
		t.Errorf("%s = %.1f, want %.1f ± %.0f%%", what, got, want, 100*tolerance)
	}
}

// The schedule of down windows, computed, agrees with the windows listed
// one by one: for a replica that goes down once, for each replica of a
// staggered one, and for a flapping one whose incident is not a whole
// number of periods.
func TestScheduleMatchesItsWindows(t *testing.T) {
	ms := time.Millisecond
	for _, d := range []schedule{
		{hit: 1, first: 100 * ms, length: 400 * ms, end: 500 * ms},
		{hit: 4, first: 100 * ms, stagger: 100 * ms, length: 100 * ms, end: 500 * ms},
		{hit: 2, first: 100 * ms, length: 30 * ms, period: 70 * ms, end: 400 * ms},
		{hit: 3, first: 100 * ms, length: 2000 * ms, end: 300 * ms}, // a blip longer than the incident
	} {
		for i := range d.hit + 1 {
			// The windows of replica i, listed.
			var windows [][2]time.Duration
			if i < d.hit {
				for from := d.first + time.Duration(i)*d.stagger; from < d.end; from += d.period {
					windows = append(windows, [2]time.Duration{from, min(from+d.length, d.end)})
					if d.period == 0 {
						break
					}
				}
			}
			for t0 := time.Duration(0); t0 < 600*ms; t0 += ms {
				down, next := false, maxAt
				for _, w := range windows {
					down = down || t0 >= w[0] && t0 < w[1]
					if w[0] > t0 && w[0] < next {
						next = w[0]
					}
				}
				if got := d.down(i, t0); got != down {
					t.Fatalf("%+v: replica %d at %v: down %v, want %v", d, i, t0, got, down)
				}
				if got := d.next(i, t0); got != next {
					t.Fatalf("%+v: replica %d at %v: next window at %v, want %v", d, i, t0, got, next)
				}
			}
		}
	}
}

// Without retries, a replica that swallows its attempts for the incident
// fails the requests sent to it, a tenth of the incident's (1 of 10
// replicas), and only those: success during the incident is about 90%.
func TestBlackholeFailsItsShare(t *testing.T) {
	s := replicaDefaults(t, ReplicaBlackhole)
	r, f := runFleet(t, s, byName(t, "no retries"))
	failed := float64(r.Requests - r.Succeeded)
	near(t, "requests failed", failed, float64(r.IncidentRequests)/10, 0.05)
	// Each failure waited its whole timeout.
	if r.P99 < s.Timeout {
		t.Errorf("p99 %v: the failures did not time out", r.P99)
	}
	// The hole did no work for the attempts it swallowed: it queued a
	// tenth of the attempts outside the incident only.
	near(t, "attempts the blackholed replica queued", float64(f.queued[0]), float64(r.Attempts-r.IncidentAttempts)/10, 0.05)
	var goodput float64
	for _, g := range r.Goodput[s.Start/bucket+1 : s.End/bucket] {
		goodput += g
	}
	seconds := float64((s.End-s.Start)/bucket - 1)
	near(t, "success during the incident", goodput/seconds/s.Rate, 0.9, 0.02)
}

// A replica that is down refuses its attempts at once, and a refusal costs
// it no work: without retries every failure is an attempt the down replica
// refused, which it never queued, or one of the few it held when it went
// down, reset then. The other replicas queue all their attempts. The
// strategies see refused connections when they are sent, during the
// incident, and resets at its start.
func TestReplicaDownRefusalsCostNoWork(t *testing.T) {
	s := replicaDefaults(t, ReplicaDown)
	var log []seen
	r, f := runFleet(t, s, recording(1, &log))
	failed := r.Requests - r.Succeeded
	refused, reset := count(log, errConnRefused), count(log, errConnReset)
	near(t, "requests failed", float64(failed), float64(r.IncidentRequests)/10, 0.05)
	if refused+reset != failed || reset > 10 {
		t.Errorf("%d refused and %d reset, %d requests failed; want every failure refused but a few reset", refused, reset, failed)
	}
	if f.queued[0] != f.sent[0]-refused {
		t.Errorf("the down replica was sent %d attempts and queued %d, with %d refused; want only the others queued", f.sent[0], f.queued[0], refused)
	}
	for i := 1; i < s.Replicas; i++ {
		if f.queued[i] != f.sent[i] {
			t.Errorf("replica %d queued %d of its %d attempts, want all", i, f.queued[i], f.sent[i])
		}
	}
	for _, e := range log {
		if e.at < s.Start || e.at >= s.End || e.err == errConnReset && e.at != s.Start {
			t.Fatalf("%v at %v", e.err, e.at)
		}
	}
	if r.P99 > 100*time.Millisecond {
		t.Errorf("p99 %v: refusals should be answered at once", r.P99)
	}
}

// Round-robin sends each replica the same number of attempts, give or take
// one; random, about the same.
func TestBalanceSpreadsAttempts(t *testing.T) {
	for _, b := range []Balance{RoundRobin, Random} {
		s := replicaDefaults(t, ReplicaSlow)
		s.Balance, s.Replicas = b, 7
		r, f := runFleet(t, s, byName(t, "Standard, quota per client"))
		lo, hi, total := f.sent[0], f.sent[0], 0
		for _, n := range f.sent {
			lo, hi, total = min(lo, n), max(hi, n), total+n
		}
		if total != r.Attempts {
			t.Fatalf("%s: the replicas were sent %d attempts, the run sent %d", b, total, r.Attempts)
		}
		spread := 1
		if b == Random {
			spread = int(0.05 * float64(total) / float64(s.Replicas))
		}
		if hi-lo > spread {
			t.Errorf("%s: the replicas were sent from %d to %d attempts, want at most %d apart", b, lo, hi, spread)
		}
	}
}

// A rolling deploy resets what each replica holds when it goes down: the
// strategies see resets, each at the instant a replica went down, and
// refusals while one is down, at the instant they are sent.
func TestRollingDeployResetsHeldAttempts(t *testing.T) {
	s := replicaDefaults(t, RollingDeploy)
	s.Capacity = 0.95 * s.Rate // queues long enough that every replica holds some
	var log []seen
	run(t, s, recording(1, &log))
	slice := (s.End - s.Start) / time.Duration(s.Replicas)
	resets := map[time.Duration]int{}
	for _, e := range log {
		switch e.err {
		case errConnReset:
			if (e.at-s.Start)%slice != 0 || e.at < s.Start || e.at >= s.End {
				t.Fatalf("a reset at %v, when no replica went down", e.at)
			}
			resets[e.at]++
		case errConnRefused:
			if e.at < s.Start || e.at >= s.End {
				t.Fatalf("a refusal at %v, outside the deploy", e.at)
			}
		default:
			// Timeouts: requests queued behind a busy replica.
		}
	}
	if len(resets) != s.Replicas {
		t.Errorf("resets at %d instants (%v), want one per replica, %d", len(resets), resets, s.Replicas)
	}
	near(t, "refusals", float64(count(log, errConnRefused)), (s.End-s.Start).Seconds()*s.Rate/float64(s.Replicas), 0.05)
}

// A replica that restarts drops the work it had queued: it comes back with
// an empty queue, and answers at once. One replica, slower than the load,
// builds a backlog of 20 s of work by the time it restarts at 40 s; back at
// 45 s it answers the first attempts sent to it within their timeout,
// where the backlog would have kept it busy until a minute.
func TestRestartDropsTheQueue(t *testing.T) {
	s := Scenario{Kind: RollingDeploy, Clients: 10, Rate: 100, Duration: 50 * time.Second, Capacity: 50,
		Timeout: time.Second, Start: 40 * time.Second, End: 45 * time.Second, Seed: 1, Replicas: 1, Balance: RoundRobin}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	var log []seen
	r := run(t, s, recording(1, &log))
	if n := count(log, errConnReset); n < 50 {
		t.Errorf("%d attempts reset when the replica went down; want those of the last second or more", n)
	}
	if r.Goodput[45] < 40 {
		t.Errorf("%v successes in the second after the restart, want about the capacity, 50", r.Goodput[45])
	}
	if r.Goodput[39] != 0 {
		t.Errorf("%v successes in the second before the restart, want none: the backlog times every attempt out", r.Goodput[39])
	}
}

// A slow replica's answers take an extra Exp(1 s); those later than the
// timeout are timeouts: without retries about a tenth of e^-1 of the
// incident's requests fail (1 of 10 replicas, an answer later than about a
// second).
func TestSlowReplicaTimesOutSome(t *testing.T) {
	s := replicaDefaults(t, ReplicaSlow)
	var log []seen
	r := run(t, s, recording(1, &log))
	near(t, "requests failed", float64(r.Requests-r.Succeeded), float64(r.IncidentRequests)/10*math.Exp(-1), 0.1)
	if n := count(log, errTimeout); n != len(log) {
		t.Errorf("%d of %d failures are timeouts, want all", n, len(log))
	}
}

// A blip takes every replica down for 2 s: without retries the requests of
// those 2 s fail, and those reset when it started; with retries that wait
// out the blip, nearly none do.
func TestBlipFailsItsSeconds(t *testing.T) {
	s := replicaDefaults(t, Blip)
	none := run(t, s, byName(t, "no retries"))
	near(t, "requests failed", float64(none.Requests-none.Succeeded), blipFor.Seconds()*s.Rate, 0.02)
	patient := run(t, s, byName(t, "avast/retry-go v4/v5 defaults: 10 att., 100ms·2^n"))
	if patient.SuccessRate() < 0.999 {
		t.Errorf("retries over 10 s: success %.4f, want about all", patient.SuccessRate())
	}
}

// Without retries, every replica scenario sends one attempt per request;
// runs are the same for a seed and differ for another; and the replicas'
// random draws come from streams of their own: the requests are issued as
// in the outage scenario with the same seed.
func TestReplicaRunsAreDeterministic(t *testing.T) {
	outage := run(t, mustDefaults(t, Outage), byName(t, "no retries"))
	for _, k := range ReplicaKinds() {
		s, err := Defaults(k, 50, 500, 30*time.Second, 7)
		if err != nil {
			t.Fatal(err)
		}
		none := run(t, s, byName(t, "no retries"))
		if none.Attempts != none.Requests || none.IncidentAttempts != none.IncidentRequests {
			t.Errorf("%s: %d attempts for %d requests without retries", k, none.Attempts, none.Requests)
		}
		if none.Requests != outage.Requests || none.IncidentRequests != outage.IncidentRequests {
			t.Errorf("%s: %d requests (%d in the incident), the outage %d (%d)", k, none.Requests, none.IncidentRequests, outage.Requests, outage.IncidentRequests)
		}
		p := byName(t, "exp 100ms-10s full jitter, 3 att.")
		a, b := run(t, s, p), run(t, s, p)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed %d differ", k, s.Seed)
		}
		s.Seed++
		if c := run(t, s, p); reflect.DeepEqual(a, c) {
			t.Errorf("%s: seeds %d and %d give identical runs", k, s.Seed-1, s.Seed)
		}
	}
}

// Check wants replicas in the replica scenarios only, a known balance, and
// a rolling deploy that gives each replica time to restart.
func TestCheckReplicas(t *testing.T) {
	good := replicaDefaults(t, RollingDeploy)
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for i, f := range []func(*Scenario){
		func(s *Scenario) { s.Replicas = 0 },
		func(s *Scenario) { s.Replicas = MaxReplicas + 1 },
		func(s *Scenario) { s.Balance = "least-loaded" },
		func(s *Scenario) { s.Balance = "" },
		func(s *Scenario) { s.End = s.Start + 5*time.Millisecond },
		func(s *Scenario) { s.RejectCost = 0.5 },
		func(s *Scenario) { s.Kind = Outage },                // an outage has one server
		func(s *Scenario) { s.Kind, s.Replicas = Outage, 0 }, // and no balance
	} {
		s := good
		f(&s)
		if s.Check() == nil {
			t.Errorf("case %d: %+v passed Check", i, s)
		}
	}
	for _, k := range ReplicaKinds() {
		if !k.Replicated() {
			t.Errorf("%s is not Replicated", k)
		}
		s := replicaDefaults(t, k)
		if s.Replicas != DefaultReplicas || s.Balance != Random || s.Incident() == "" {
			t.Errorf("%s: %d replicas, balance %q, incident %q", k, s.Replicas, s.Balance, s.Incident())
		}
	}
	if s := replicaDefaults(t, ZoneFlap); s.Hit() != 3 {
		t.Errorf("a zone of %d replicas of 10, want 3", s.Hit())
	}
	if Outage.Replicated() || Layers.Replicated() {
		t.Error("a single-server scenario is Replicated")
	}
	// httpretry's classes for an idempotent call: a 503's.
	for _, err := range []error{errConnRefused, errConnReset} {
		if retry.Classify(err) != retry.Classify(errFailed) {
			t.Errorf("%v is classified %+v, a 503 %+v", err, retry.Classify(err), retry.Classify(errFailed))
		}
	}
}
