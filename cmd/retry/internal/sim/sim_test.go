package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// run simulates p in s, failing the test on an error.
func run(t *testing.T, s Scenario, p Policy) Result {
	t.Helper()
	r, err := Run(context.Background(), s, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func policy(name string, mk func() retry.Strategy) Policy {
	return Policy{Name: name, New: func(Env) func(int) retry.Strategy {
		s := mk()
		return func(int) retry.Strategy { return s }
	}}
}

func byName(t *testing.T, name string) Policy {
	t.Helper()
	for _, p := range Policies() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no policy %q", name)
	return Policy{}
}

func mustDefaults(t *testing.T, k Kind) Scenario {
	t.Helper()
	s, err := Defaults(k, 50, 500, 30*time.Second, 7)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// totalOutage fails every attempt of the whole run, on a server fast enough
// that no attempt ever times out.
func totalOutage() Scenario {
	return Scenario{Kind: Outage, Clients: 20, Rate: 200, Duration: 20 * time.Second, Capacity: 1e7,
		Timeout: time.Second, Start: 0, End: time.Hour, Seed: 3}
}

func TestNoRetriesMeansAmplificationOne(t *testing.T) {
	for _, k := range []Kind{Outage, Brownout, Overload, Throttle} {
		r := run(t, mustDefaults(t, k), byName(t, "no retries"))
		if r.Requests == 0 || r.Attempts != r.Requests || r.IncidentAttempts != r.IncidentRequests {
			t.Errorf("%s: %d attempts for %d requests (%d for %d in the incident), want equal",
				k, r.Attempts, r.Requests, r.IncidentAttempts, r.IncidentRequests)
		}
	}
}

func TestImmediateRetriesInATotalOutageMultiplyByTheAttempts(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		p := policy("immediate", func() retry.Strategy { return &retry.Simple{MaxAttempts: n, Backoff: retry.Constant(0)} })
		r := run(t, totalOutage(), p)
		if r.Succeeded != 0 || r.Attempts != n*r.Requests {
			t.Fatalf("%d attempts: %d attempts for %d requests (%d succeeded), want exactly %d×", n, r.Attempts, r.Requests, r.Succeeded, n)
		}
		if got := r.Amplification(); got != float64(n) {
			t.Fatalf("amplification %v, want %d", got, n)
		}
	}
}

func TestSharedQuotaBoundsAmplificationInALongOutage(t *testing.T) {
	r := run(t, totalOutage(), byName(t, "Standard, one shared quota"))
	// 500 tokens pay for 35 retries of 14; nothing succeeds, so nothing
	// refills the bucket.
	if extra := r.Attempts - r.Requests; extra != 500/14 {
		t.Fatalf("%d retries in a total outage with one shared quota of 500, want %d", extra, 500/14)
	}
	perClient := run(t, totalOutage(), byName(t, "Standard, quota per client"))
	if extra := perClient.Attempts - perClient.Requests; extra > 20*(500/14) {
		t.Fatalf("%d retries with 20 clients' quotas, want at most %d", extra, 20*(500/14))
	}
	if r.Amplification() > 1.02 {
		t.Fatalf("amplification %.3f with a shared quota, want about 1", r.Amplification())
	}
}

func TestRunsAreDeterministic(t *testing.T) {
	for _, k := range []Kind{Outage, Brownout, Overload, Throttle} {
		s := mustDefaults(t, k)
		p := byName(t, "exp 100ms-10s full jitter, 3 att.")
		a, b := run(t, s, p), run(t, s, p)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs with seed %d differ", k, s.Seed)
		}
		s.Seed++
		if c := run(t, s, p); reflect.DeepEqual(a, c) {
			t.Fatalf("%s: seeds %d and %d give identical runs", k, s.Seed-1, s.Seed)
		}
	}
}

func TestRetryStormKeepsAnOverloadedServerDown(t *testing.T) {
	s := mustDefaults(t, Overload)
	none := run(t, s, byName(t, "no retries"))
	if !none.Recovered {
		t.Fatal("without retries the server should recover once its capacity returns")
	}
	storm := run(t, s, byName(t, "immediate, 3 attempts"))
	if storm.Recovered || storm.SuccessRate() >= none.SuccessRate() {
		t.Fatalf("immediate retries: recovered %v, success %.3f (no retries: %.3f); want a storm that keeps the server down",
			storm.Recovered, storm.SuccessRate(), none.SuccessRate())
	}
	quota := run(t, s, byName(t, "Standard, one shared quota"))
	if !quota.Recovered {
		t.Fatal("with a shared retry quota the server should recover")
	}
}

func TestBrownoutRetriesRaiseSuccess(t *testing.T) {
	s := mustDefaults(t, Brownout)
	none := run(t, s, byName(t, "no retries"))
	jitter := run(t, s, byName(t, "exp 100ms-10s full jitter, 3 att."))
	// 30 % of attempts fail during a third of the run: about 10 % of
	// requests fail without retries, about 0.3³ of those with three attempts.
	if none.SuccessRate() > 0.93 || none.SuccessRate() < 0.87 {
		t.Fatalf("no retries: success %.3f, want about 0.90", none.SuccessRate())
	}
	if jitter.SuccessRate() < 0.98 {
		t.Fatalf("three attempts: success %.3f, want above 0.98", jitter.SuccessRate())
	}
}

func TestThrottleHonoursRetryAfter(t *testing.T) {
	s := mustDefaults(t, Throttle)
	r := run(t, s, byName(t, "immediate, 3 attempts"))
	// Every retry after a 429 waits the Retry-After of 1 s, so none of the
	// requests that needed one finishes in under a second.
	if r.P99 < time.Second {
		t.Fatalf("p99 %v: retries after 429 did not wait the 1 s Retry-After", r.P99)
	}
}

func TestSeriesAddUp(t *testing.T) {
	r := run(t, mustDefaults(t, Outage), byName(t, "Standard, quota per client"))
	var offered, goodput float64
	for i := range r.Offered {
		offered += r.Offered[i]
		goodput += r.Goodput[i]
	}
	if int(offered) > r.Attempts || int(goodput) > r.Succeeded || offered < 0.9*float64(r.Attempts) {
		t.Fatalf("series: %v attempts, %v successes; totals %d, %d", offered, goodput, r.Attempts, r.Succeeded)
	}
	if len(r.Offered) != 30 || r.Step != 1 {
		t.Fatalf("%d points of %vs, want 30 of 1s", len(r.Offered), r.Step)
	}
}

func TestOCCJitterCutsCalls(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := DefaultOCC(50, seed)
		results := map[string]OCCResult{}
		for _, p := range OCCPolicies(s.Base, s.Max) {
			r, err := RunOCC(context.Background(), s, p)
			if err != nil {
				t.Fatal(err)
			}
			if r.GaveUp != 0 || r.Calls < s.Clients {
				t.Fatalf("%s: %d calls, %d gave up", p.Name, r.Calls, r.GaveUp)
			}
			results[p.Name] = r
		}
		none := results["exponential, no jitter"]
		for _, name := range []string{"exponential, full jitter", "exponential, decorrelated jitter"} {
			if j := results[name]; j.Calls >= none.Calls || j.Completion >= none.Completion {
				t.Fatalf("seed %d: %s made %d calls in %v, no jitter %d in %v: jitter should need fewer calls and less time",
					seed, name, j.Calls, j.Completion, none.Calls, none.Completion)
			}
		}
	}
}

func TestOCCWithoutNetworkSpreadCollidesInLockstep(t *testing.T) {
	// With every trip exactly Hop long, clients that collide once retry in
	// step forever without jitter: one commit per round, n(n+1)/2 calls.
	s := DefaultOCC(20, 1)
	s.Hop, s.Work = 0, time.Millisecond
	r, err := RunOCC(context.Background(), s, OCCPolicies(s.Base, s.Max)[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 20*21/2 {
		t.Fatalf("%d calls, want %d", r.Calls, 20*21/2)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, mustDefaults(t, Outage), Policies()[0]); err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := RunOCC(ctx, DefaultOCC(10, 1), OCCPolicies(time.Millisecond, time.Second)[0]); err != context.Canceled {
		t.Fatalf("occ: err = %v, want context.Canceled", err)
	}
}

func TestCheckRejectsBadScenarios(t *testing.T) {
	good := mustDefaults(t, Outage)
	bad := []func(*Scenario){
		func(s *Scenario) { s.Clients = 0 },
		func(s *Scenario) { s.Rate = 0 },
		func(s *Scenario) { s.Duration = 0 },
		func(s *Scenario) { s.Capacity = -1 },
		func(s *Scenario) { s.Timeout = 0 },
		func(s *Scenario) { s.End = s.Start - 1 },
		func(s *Scenario) { s.Rate = 1e9 },
		func(s *Scenario) { s.Kind = "flood" },
		func(s *Scenario) { s.Kind, s.FailRate = Brownout, 1.5 },
		func(s *Scenario) { s.Kind, s.DegradedCapacity = Overload, 0 },
		func(s *Scenario) { s.Kind, s.ThrottleRate = Throttle, 0 },
		func(s *Scenario) { s.RejectCost = 1 }, // an outage's failures have no 429 to price
		func(s *Scenario) { s.Kind, s.ThrottleRate, s.RejectCost = Throttle, 100, -0.5 },
		func(s *Scenario) { s.Kind, s.ThrottleRate, s.RejectCost = Throttle, 100, 1.5 },
		func(s *Scenario) { s.Kind, s.ThrottleRate, s.RejectCost = Throttle, 100, math.NaN() },
	}
	for i, f := range bad {
		s := good
		f(&s)
		if s.Check() == nil {
			t.Errorf("case %d: %+v passed Check", i, s)
		}
	}
	if _, err := Defaults("flood", 1, 1, time.Second, 1); err == nil {
		t.Error("Defaults accepted an unknown kind")
	}
}

// A 429 costs the server nothing by default (a front-door limiter). With
// RejectCost 1 it waits in the queue and takes an attempt's work like any
// other, and then quotas per client, which let each client's retries of
// its 429s through, cost success: in the default throttle scenario the
// per-client Standard falls below no retries, and a 429 is no longer
// answered at once.
func TestRejectCostChargesA429LikeAnAttempt(t *testing.T) {
	s, err := Defaults(Throttle, 100, 1000, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.RejectCost != 0 {
		t.Fatalf("the default throttle scenario charges a 429 %v of an attempt, want 0", s.RejectCost)
	}
	none, quota := byName(t, "no retries"), byName(t, "Standard, quota per client")
	free, freeNone := run(t, s, quota), run(t, s, none)
	if free.SuccessRate() < freeNone.SuccessRate() {
		t.Fatalf("free 429s: Standard per client %.3f, no retries %.3f; want at least no retries'", free.SuccessRate(), freeNone.SuccessRate())
	}
	s.RejectCost = 1
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	charged, base := run(t, s, quota), run(t, s, none)
	if charged.SuccessRate() >= base.SuccessRate()-0.03 {
		t.Fatalf("429s charged as attempts: Standard per client %.3f, no retries %.3f; want clearly below", charged.SuccessRate(), base.SuccessRate())
	}
	// Without retries the limiter's share of the load still fits the
	// server, but every 429 now waits behind queued work.
	if base.P50 <= freeNone.P50 {
		t.Fatalf("no retries: p50 %v with charged 429s, not above the free 429s'", base.P50)
	}
}

// The percentiles of the streamed histogram are the exact ones to within
// its precision, and say whether a cut-off latency is among those below.
func TestHistogramPercentiles(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 100, 10007} {
		var h histogram
		vals := make([]time.Duration, n)
		cut := make(map[time.Duration]bool)
		for i := range vals {
			// From nanoseconds to about 20 minutes, evenly in log scale.
			vals[i] = time.Duration(math.Exp(rnd.Float64() * math.Log(1.2e12)))
			c := rnd.IntN(10) == 0
			h.add(vals[i], c)
			cut[vals[i]] = cut[vals[i]] || c
		}
		slices.Sort(vals)
		for _, p := range []float64{0.01, 0.5, 0.99, 1} {
			i := min(max(int(math.Ceil(p*float64(n)))-1, 0), n-1)
			want, wantCut := vals[i], false
			for _, v := range vals[:i+1] {
				wantCut = wantCut || cut[v]
			}
			got, gotCut := h.percentile(p)
			if d := math.Abs(float64(got - want)); d > float64(want)/(1<<subBits) {
				t.Errorf("n %d: p%v = %v, want %v (within 2^-%d)", n, 100*p, got, want, subBits)
			}
			// A cut latency in the same bin as the percentile, but above
			// it, may count: the histogram cannot tell them apart.
			if gotCut != wantCut && !(gotCut && sameBin(h.minCut, want)) {
				t.Errorf("n %d: p%v cut = %v, want %v", n, 100*p, gotCut, wantCut)
			}
		}
	}
	var empty histogram
	if v, cut := empty.percentile(0.5); v != 0 || cut {
		t.Errorf("empty histogram: %v, %v", v, cut)
	}
}

func sameBin(a, b time.Duration) bool {
	as, am := locate(a)
	bs, bm := locate(b)
	return as == bs && am == bm
}

// A run's memory follows the requests in flight, not the requests made:
// ten times the requests, with as many in flight at once, take no more
// request slots, and the latencies a histogram of fixed size.
func TestRunMemoryDoesNotGrowWithRequests(t *testing.T) {
	slots := func(d time.Duration, name string) (int, int) {
		s, err := Defaults(Brownout, 50, 500, d, 1)
		if err != nil {
			t.Fatal(err)
		}
		r := runner{s: s, p: byName(t, name), ctx: context.Background()}
		res, err := r.run()
		if err != nil {
			t.Fatal(err)
		}
		return int(r.reqs.used), res.Requests
	}
	for _, name := range []string{"no retries", "Standard, quota per client", "avast/retry-go v4/v5 defaults: 10 att., 100ms·2^n"} {
		short, n1 := slots(20*time.Second, name)
		long, n2 := slots(200*time.Second, name)
		if n2 < 9*n1 || long > 2*short || long > 200 {
			t.Errorf("%s: %d slots for %d requests, %d for %d; want as few for ten times the requests, and few",
				name, short, n1, long, n2)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	data := []byte("MemTotal:       24683600 kB\nMemFree:        23650000 kB\nMemAvailable:   22264116 kB\nHugePages_Total:       0\n")
	if got := parseMeminfo(data, "MemAvailable"); got != 22264116*1024 {
		t.Errorf("MemAvailable = %d, want %d", got, 22264116*1024)
	}
	if got := parseMeminfo(data, "HugePages_Total"); got != 0 {
		t.Errorf("HugePages_Total = %d", got)
	}
	for _, bad := range []string{"", "MemAvailable:", "MemAvailable: x kB", "MemAvailable: 5 MB", "MemAvailable: 99999999999999999999 kB", "MemAvailable 5 kB"} {
		if got := parseMeminfo([]byte(bad), "MemAvailable"); got != 0 {
			t.Errorf("%q: %d, want 0", bad, got)
		}
	}
	if v, ok := parseCgroupBytes([]byte("max\n")); ok {
		t.Errorf("max: %d, ok", v)
	}
	if v, ok := parseCgroupBytes([]byte("1073741824\n")); !ok || v != 1<<30 {
		t.Errorf("1073741824: %d, %v", v, ok)
	}
	if n, mem := MaxRequests(); n <= 0 || mem > 0 && uint64(n) > mem/BytesPerRequest {
		t.Errorf("MaxRequests() = %d for %d bytes", n, mem)
	}
}

// FuzzParseMeminfo: no panic, and a value found is a whole number of kB or
// a plain number.
func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte("MemAvailable:   22264116 kB\n"), "MemAvailable")
	f.Add([]byte("a: 1\nb:2 kB"), "b")
	f.Fuzz(func(t *testing.T, data []byte, field string) {
		_ = parseMeminfo(data, field)
		_, _ = parseCgroupBytes(data)
	})
}
