package simcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

const usage = `usage: retry sim [flags]

Simulates, in virtual time, a fleet of clients calling a server through
retrykit's strategies, and prints what each retry policy did to the server.
It never sleeps: a minute of traffic runs in a second or two.

The server is one queue that serves a fixed number of attempts per second.
Every attempt it queues costs it the same work, whether it succeeds, fails, or is
answered after its client stopped waiting (1 s): that is how retries can keep
a server down after the incident that hurt it is over. (--shed makes it drop
work whose client has given up, as few servers do.) A client is one caller
with a strategy of its own, like a separate process: "quota per client" gives
each a Standard of its own, "one shared quota" one Standard for all of them,
as the callers in one process would share it.

Scenarios, and what a failed attempt costs the server in each:
  outage    the server fails every attempt for a while, then recovers;
            a failure costs a whole attempt's work, queued like the others
  brownout  30% of attempts fail at random for a while; the same
  overload  the server's capacity drops below the offered load for a
            while; attempts fail by timing out in the queue
  throttle  beyond half the offered load, 429 with Retry-After: 1. By
            default a 429 comes from a front-door rate limiter: answered
            at once, it costs the server nothing. --reject-cost 1 charges
            it like any other attempt instead (a limiter inside the
            server, behind its queue); a fraction, part of one
  occ       AWS's "Exponential Backoff And Jitter" experiment: clients
            contending on one optimistic-concurrency resource
  layers    retries that nest, in a model of its own: users, who do not
            retry, call a front tier, which calls a middle tier, which
            calls a back tier, which calls a database: the outage's server
            (--capacity), failing every attempt for a while. Each tier is
            --clients instances, each with a strategy of its own and a
            FIFO queue, serving 10 × --rate attempts per second in all; a
            tier serves an attempt by calling the next through its
            strategy, and answers failure if that call gives up. Every
            caller waits --timeout per attempt; a tier whose caller
            stopped waiting finishes the work anyway (--shed: its queue
            drops it). Rows: naive retries, Standard and Adaptive at every
            tier, and retrykit's rule for retries at one layer as httpretry
            and forrst ship it: a tier serving a request that says it is a
            retry (Retry-Attempt 2 or more) makes one attempt for an
            answered failure and returns it ("layer-aware default
            (today)"); "every attempt marked" marks first attempts too.
            Columns: the attempts each tier sent per request sent during
            the outage (the back's to the database), the database's
            busiest second, success, recovery

Replica scenarios: the service is --replicas replicas (10) behind a load
balancer that picks a replica for each attempt, retries included, and has
no health checks (--balance random, the default, or round-robin). Each
replica is a queue like the server above, serving an equal share of the
capacity. A replica that is down refuses connections: an attempt sent to
it fails at once and costs nothing. Going down resets the attempts it
holds, queued or in service: they fail at that instant, and their work is
dropped. A refusal and a reset are transient failures, as httpretry
classifies them for an idempotent call; the incident is from a sixth of
the run to its half, as in outage:
  replica-down       one replica is down for the whole incident
  replica-blackhole  one replica accepts attempts and never answers: they
                     time out, and cost it no work
  replica-slow       one replica adds latency to each answer, exponential
                     with mean 1s; an answer later than --timeout is a
                     timeout
  rolling-deploy     the replicas restart one at a time, each down for an
                     equal slice of the incident (2s at the defaults)
  zone-blip          a zone, 30% of the replicas (at least 1), is down for
                     the incident's first 2s
  zone-flap          a zone is down 1s in every 2 of the incident
  blip               every replica is down for the incident's first 2s
  flapping           every replica is down 1s in every 2 of the incident

Rows (every scenario but occ and layers): naive retries; retrykit's
Standard, with a quota per client or one shared, with a retry budget,
and Adaptive, the default: per client, one shared, and per client
judging by the evidence the fleet shares in a store (redisquota's
FleetAdaptive, in memory), which each client syncs with every 100ms or
1s; also with a circuit breaker at its defaults (retry.Breaker: per
client, or one shared; while its circuit is open a request fails at
once, without an attempt), and with a breaker per client bound to one
circuit the fleet shares in a store (redisquota's FleetBreaker, in
memory), synced the same way; AWS's adaptive retry mode as the AWS SDKs ship it; and the
documented defaults of three Go libraries, written with retrykit's
parts: avast/retry-go v4.7 and v5.1, hashicorp/go-retryablehttp v0.7.8
(which waits a 429's or 503's Retry-After instead of its backoff) and
cenkalti/backoff v5.0.3 (which, like retry-go, does not read Retry-After
by default). --policies picks rows by words of their names.

Columns:
  amplification  attempts sent per request issued, over the run and during
                 the incident
  success        share of requests that succeeded before the run ended
  unfinished     requests still retrying when the run ended (2 timeouts
                 after the last request was sent); they count as failed
  p50, p99       latency of requests, failures included, from issue to final
                 answer; "≥" when cut off by the end of the run
  recovery       how long after the incident the server was healthy again
                 (90% of attempts succeeding, to the end of the run); never
                 if retries kept it down

Examples:
  retry sim
  retry sim --scenario overload --svg overload.svg
  retry sim --scenario occ --clients 200
  retry sim --scenario rolling-deploy --replicas 20 --balance round-robin
  retry sim --clients 1000 --rate 5000 --json results.json

Flags:
  --scenario NAME     outage (the default), brownout, overload, throttle,
                      occ or layers; or a replica scenario (above)
  --clients N         number of clients (default 100)
  --rate R            requests per second, all clients together (default 1000)
  --duration D        how long clients send requests, from 2s to 24h
                      (default 1m)
  --seed N            seed of the randomness: the same seed gives the same
                      results (default 1)
  --capacity R        attempts per second the server serves (default: per
                      scenario)
  --timeout D         how long clients wait for an attempt's answer, up to 1h
                      (default 1s)
  --incident-start D  when the incident starts, D into the run (default: a
                      sixth into it)
  --incident-end D    when the incident ends, D into the run (default: half
                      way, a third for overload)
  --shed              the server drops work whose client has given up
  --reject-cost F     throttle: the share of an attempt's work a 429 costs the
                      server, from 0 (a front-door limiter, the default) to 1
                      (like any attempt)
  --replicas N        replica scenarios: how many replicas share the capacity
                      (default 10)
  --balance B         replica scenarios: how the load balancer picks each
                      attempt's replica, random (the default) or round-robin
  --policies WORDS    only the rows whose name contains one of these
                      comma-separated WORDS (any case), e.g. Standard,adaptive
  --svg FILE          write a chart of offered load and successes over time to
                      FILE, one panel per policy: an SVG, a PNG if FILE ends
                      in .png, an SVG on stdout if FILE is -
  --json FILE         write the raw results to FILE; - writes them to stdout
                      instead of the table
  --quiet             no progress line

D is a duration such as 250ms, 1.5s or 2m, or a number of seconds.
`

// Run implements "retry sim": it parses args and returns the exit status.
func Run(ctx context.Context, args []string, std cli.Stdio) int {
	f, code, ok := parseSimFlags(args, std)
	if !ok {
		return code
	}
	progress := newProgress(std.Err, f.quiet)
	if f.svgPath == "-" {
		std = reserveStdout(std)
	}
	switch f.scenario {
	case "occ":
		return simOCC(ctx, std, progress, f.clients, f.seed, f.jsonPath, f.pick)
	case string(sim.Layers):
		s := sim.DefaultLayers(f.clients, f.rate, f.duration, f.seed)
		f.override(&s.Capacity, &s.Timeout, &s.Start, &s.End, &s.Shed)
		return simLayers(ctx, std, progress, s, f.jsonPath, f.svgPath, f.pick)
	}
	s, err := sim.Defaults(sim.Kind(f.scenario), f.clients, f.rate, f.duration, f.seed)
	if err == nil {
		f.override(&s.Capacity, &s.Timeout, &s.Start, &s.End, &s.Shed)
		s.RejectCost = f.reject
		if s.Kind.Replicated() {
			s.Replicas, s.Balance = f.replicas, sim.Balance(f.balance)
		}
		err = s.Check()
	}
	if err == nil {
		err = fitsMachine(s)
	}
	if err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	return simScenario(ctx, std, progress, s, f.jsonPath, f.svgPath, f.pick)
}

// simFlags are retry sim's flags as given, and which were given.
type simFlags struct {
	scenario, svgPath, jsonPath, pick string
	balance                           string
	clients, replicas                 int
	rate, capacity, reject            float64
	duration, timeout, start, end     time.Duration
	seed                              uint64
	shed, quiet                       bool
	given                             map[string]bool
}

// parseSimFlags parses and checks retry sim's flags. ok is false when the
// command is over: -h was printed (code 0) or a flag was wrong (code 2).
func parseSimFlags(args []string, std cli.Stdio) (f simFlags, code int, ok bool) {
	fs := f.flagSet()
	if status, done := cli.ParseDone(std, "sim", usage, cli.Parse(fs, args)); done {
		return f, status, false
	}
	if fs.NArg() > 0 {
		return f, cli.UsageError(std.Err, "sim", fmt.Sprintf("unexpected argument %q", fs.Arg(0))), false
	}
	// A flag given is used as given, even 0, so that Check rejects nonsense
	// instead of a default quietly standing in for it.
	f.given = make(map[string]bool)
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if msg := f.misfit(); msg != "" {
		return f, cli.UsageError(std.Err, "sim", msg), false
	}
	return f, 0, true
}

// flagSet returns the flags of "retry sim", which set f's fields to their
// defaults and then to the flags given.
func (f *simFlags) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("retry sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage to stdout, errors a hint
	fs.StringVar(&f.scenario, "scenario", "outage", "")
	fs.IntVar(&f.clients, "clients", 100, "")
	fs.Float64Var(&f.rate, "rate", 1000, "")
	f.duration = time.Minute
	fs.Var(cli.DurationValue(&f.duration), "duration", "")
	fs.Uint64Var(&f.seed, "seed", 1, "")
	fs.StringVar(&f.svgPath, "svg", "", "")
	fs.StringVar(&f.jsonPath, "json", "", "")
	fs.Float64Var(&f.capacity, "capacity", 0, "")
	fs.Var(cli.DurationValue(&f.timeout), "timeout", "")
	fs.Var(cli.DurationValue(&f.start), "incident-start", "")
	fs.Var(cli.DurationValue(&f.end), "incident-end", "")
	fs.BoolVar(&f.shed, "shed", false, "")
	fs.Float64Var(&f.reject, "reject-cost", 0, "")
	fs.IntVar(&f.replicas, "replicas", sim.DefaultReplicas, "")
	fs.StringVar(&f.balance, "balance", string(sim.Random), "")
	fs.BoolVar(&f.quiet, "quiet", false, "")
	fs.StringVar(&f.pick, "policies", "", "")
	return fs
}

// misfit says why the flags cannot go together, or "".
func (f *simFlags) misfit() string {
	for _, path := range []string{f.jsonPath, f.svgPath} {
		if err := checkOutputPath(path); err != nil {
			return err.Error()
		}
	}
	if err := checkChartPath(f.svgPath); err != nil {
		return err.Error()
	}
	if f.jsonPath == "-" && f.svgPath == "-" {
		return "--json - and --svg - both want stdout: send one of them to a file"
	}
	if f.scenario == "occ" {
		for _, name := range []string{"rate", "duration", "svg", "capacity", "timeout", "incident-start", "incident-end", "shed", "reject-cost", "replicas", "balance"} {
			if f.given[name] {
				return "--" + name + " does not apply to the occ scenario (it takes --clients, --seed, --json and --quiet)"
			}
		}
	}
	if f.given["reject-cost"] && f.scenario != string(sim.Throttle) && f.scenario != "occ" {
		return "--reject-cost applies to the throttle scenario only, whose 429s it prices; in " + f.scenario + " every attempt costs the server a whole attempt's work"
	}
	for _, name := range []string{"replicas", "balance"} {
		if f.given[name] && !sim.Kind(f.scenario).Replicated() && f.scenario != "occ" {
			return "--" + name + " applies to the replica scenarios only (" + replicaScenarios() + "); in " + f.scenario + " the server is one queue"
		}
	}
	return ""
}

// replicaScenarios lists the replica scenarios' names.
func replicaScenarios() string {
	var names []string
	for _, k := range sim.ReplicaKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// override sets a scenario's fields to the flags given for them; the rest
// keep the scenario's defaults.
func (f *simFlags) override(capacity *float64, timeout, start, end *time.Duration, shed *bool) {
	if f.given["capacity"] {
		*capacity = f.capacity
	}
	if f.given["timeout"] {
		*timeout = f.timeout
	}
	if f.given["incident-start"] {
		*start = f.start
	}
	if f.given["incident-end"] {
		*end = f.end
	}
	*shed = f.shed
}

// fitsMachine returns why the machine cannot hold the requests of s, if it
// cannot: the guard is what its memory holds, not a fixed number.
// A replica scenario's requests cost what the single server's do; its
// replicas, at most sim.MaxReplicas of a few words each, are not counted.
func fitsMachine(s sim.Scenario) error {
	limit, memory := sim.MaxRequests()
	if memory > 0 { // the clients' strategies take their share first
		limit = max(0, limit-s.Clients*sim.BytesPerClient/sim.BytesPerRequest)
	}
	requests := s.Rate * s.Duration.Seconds()
	if requests <= float64(limit) {
		return nil
	}
	if memory == 0 {
		return fmt.Errorf("%.3g requests (rate × duration) is more than the %d simulated where the memory available cannot be read", requests, limit)
	}
	return fmt.Errorf("%.3g requests (rate × duration) is more than this machine's %.1f GB of available memory holds: at most %d, at %d bytes each if all are in flight at once, with %d clients at %d bytes each",
		requests, float64(memory)/1e9, limit, sim.BytesPerRequest, s.Clients, sim.BytesPerClient)
}

// layersFitMachine is fitsMachine for a layered run, whose memory follows
// the user requests it holds in flight at once, each with the calls it makes
// at every tier, and its tiers' instances.
func layersFitMachine(s sim.LayersScenario) error {
	limit, memory := sim.MaxMemory()
	need := s.Footprint()
	if memory == 0 || need <= float64(limit) {
		return nil // where memory cannot be read, the request guard alone
	}
	return fmt.Errorf("a layered run of %.0f req/s with %d clients may hold %.1f GB (%.3g user requests in flight, with their calls at every tier), more than half this machine's %.1f GB of available memory; lower the rate or the clients",
		s.Rate, s.Clients, need/1e9, s.InFlight(), float64(memory)/1e9)
}

// interrupted reports a run stopped by a signal, with the shell's status for
// it: 130 for SIGINT, 143 for SIGTERM.
func interrupted(ctx context.Context, std cli.Stdio) int {
	fmt.Fprintln(std.Err, "retry sim: interrupted")
	if cause := context.Cause(ctx); cause != nil && strings.Contains(cause.Error(), "terminated") {
		return 143
	}
	return 130
}

// simulate runs every policy, showing progress, and stops at the first error
// (the context's). run reports the share of its policy's run done.
func simulate[R any](progress *progress, policies []sim.Policy, run func(p sim.Policy, report func(float64)) (R, error)) ([]R, error) {
	defer progress.done()
	results := make([]R, 0, len(policies))
	for i, p := range policies {
		report := func(frac float64) { progress.update(i, len(policies), p.Name, frac) }
		report(0)
		r, err := run(p, report)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		// The run's requests are garbage now. Collect them before the
		// next run allocates its own, or the heap would hold two runs'
		// worth, as if both were live (a big run's memory is one run's).
		runtime.GC()
	}
	return results, nil
}

// pickPolicies returns, in their usual order, the policies whose name
// contains one of the comma-separated words in pick, ignoring case; all of
// them if pick is "". A word that picks nothing is an error that lists the
// names, so that a typo does not quietly drop a row.
func pickPolicies(all []sim.Policy, pick string) ([]sim.Policy, error) {
	if pick == "" {
		return all, nil
	}
	words := strings.Split(strings.ToLower(pick), ",")
	used := make([]bool, len(words))
	var out []sim.Policy
	for _, p := range all {
		name, picked := strings.ToLower(p.Name), false
		for i, w := range words {
			if w = strings.TrimSpace(w); w != "" && strings.Contains(name, w) {
				used[i], picked = true, true
			}
		}
		if picked {
			out = append(out, p)
		}
	}
	if i := slices.Index(used, false); i >= 0 {
		names := make([]string, len(all))
		for j, p := range all {
			names[j] = p.Name
		}
		return nil, fmt.Errorf("--policies: no row's name contains %q; the rows are: %s", strings.TrimSpace(words[i]), strings.Join(names, "; "))
	}
	return out, nil
}
