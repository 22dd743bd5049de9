package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry/cmd/retry/internal/chart"
	"github.com/retrykit/retry/cmd/retry/internal/sim"
)

const simUsage = `usage: retry sim [flags]

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

Rows (outage to throttle): naive retries; retrykit's Standard, with a
quota per client or one shared, with a retry budget, and Adaptive, the
default; AWS's adaptive retry mode as the AWS SDKs ship it; and the
documented defaults of three Go libraries, written with retrykit's parts:
avast/retry-go v4.7 and v5.1, hashicorp/go-retryablehttp v0.7.8 (which
waits a 429's or 503's Retry-After instead of its backoff) and
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
  retry sim --clients 1000 --rate 5000 --json results.json

Flags:
`

// discard is io.Discard, named so for parseSimFlags, whose stdio parameter
// hides the io package.
var discard = io.Discard

// simCommand implements "retry sim".
func simCommand(ctx context.Context, args []string, io stdio) int {
	f, code, ok := parseSimFlags(args, io)
	if !ok {
		return code
	}
	progress := newProgress(io.err, f.quiet)
	switch f.scenario {
	case "occ":
		return simOCC(ctx, io, progress, f.clients, f.seed, f.jsonPath, f.pick)
	case string(sim.Layers):
		s := sim.DefaultLayers(f.clients, f.rate, f.duration, f.seed)
		f.override(&s.Capacity, &s.Timeout, &s.Start, &s.End, &s.Shed)
		return simLayers(ctx, io, progress, s, f.jsonPath, f.svgPath, f.pick)
	}
	s, err := sim.Defaults(sim.Kind(f.scenario), f.clients, f.rate, f.duration, f.seed)
	if err == nil {
		f.override(&s.Capacity, &s.Timeout, &s.Start, &s.End, &s.Shed)
		s.RejectCost = f.reject
		err = s.Check()
	}
	if err == nil {
		err = fitsMachine(s)
	}
	if err != nil {
		fmt.Fprintln(io.err, "retry sim:", err)
		return 2
	}
	return simScenario(ctx, io, progress, s, f.jsonPath, f.svgPath, f.pick)
}

// simFlags are retry sim's flags as given, and which were given.
type simFlags struct {
	scenario, svgPath, jsonPath, pick string
	clients                           int
	rate, capacity, reject            float64
	duration, timeout, start, end     time.Duration
	seed                              uint64
	shed, quiet                       bool
	given                             map[string]bool
}

// parseSimFlags parses and checks retry sim's flags. ok is false when the
// command is over: -h was printed (code 0) or a flag was wrong (code 2).
func parseSimFlags(args []string, io stdio) (f simFlags, code int, ok bool) {
	fs := flag.NewFlagSet("retry sim", flag.ContinueOnError)
	fs.SetOutput(discard) // -h prints the usage to stdout, errors a hint
	fs.StringVar(&f.scenario, "scenario", "outage", "outage, brownout, overload, throttle, occ or layers")
	fs.IntVar(&f.clients, "clients", 100, "number of clients")
	fs.Float64Var(&f.rate, "rate", 1000, "requests per second, all clients together")
	fs.DurationVar(&f.duration, "duration", time.Minute, "how long clients send requests, 2s to 24h")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the randomness: the same seed gives the same results")
	fs.StringVar(&f.svgPath, "svg", "", "write a chart of offered load and successes over time to `FILE`, one panel per policy (a PNG if FILE ends in .png)")
	fs.StringVar(&f.jsonPath, "json", "", "write the raw results to `FILE`; - writes them to stdout instead of the table")
	fs.Float64Var(&f.capacity, "capacity", 0, "attempts per second the server serves (default: per scenario)")
	fs.DurationVar(&f.timeout, "timeout", 0, "how long clients wait for an attempt's answer, up to 1h (default 1s)")
	fs.DurationVar(&f.start, "incident-start", 0, "when the incident starts (default: a sixth into the run)")
	fs.DurationVar(&f.end, "incident-end", 0, "when the incident ends (default: half way, a third for overload)")
	fs.BoolVar(&f.shed, "shed", false, "the server drops work whose client has given up")
	fs.Float64Var(&f.reject, "reject-cost", 0, "throttle: the share of an attempt's work a 429 costs the server, from 0 (a front-door limiter) to 1 (like any attempt)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.pick, "policies", "", "only the rows whose name contains one of these comma-separated `WORDS` (any case), e.g. Standard,adaptive")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(io.out, simUsage)
			fs.SetOutput(io.out)
			fs.PrintDefaults()
			return f, 0, false
		}
		return f, flagError(io.err, "sim", fs, err), false
	}
	if fs.NArg() > 0 {
		return f, usageError(io.err, "sim", fmt.Sprintf("unexpected argument %q", fs.Arg(0))), false
	}
	// A flag given is used as given, even 0, so that Check rejects nonsense
	// instead of a default quietly standing in for it.
	f.given = make(map[string]bool)
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if msg := f.misfit(); msg != "" {
		return f, usageError(io.err, "sim", msg), false
	}
	return f, 0, true
}

// misfit says why the flags cannot go together, or "".
func (f *simFlags) misfit() string {
	for _, path := range []string{f.jsonPath, f.svgPath} {
		if err := checkOutputPath(path); err != nil {
			return err.Error()
		}
	}
	if f.scenario == "occ" {
		for _, name := range []string{"rate", "duration", "svg", "capacity", "timeout", "incident-start", "incident-end", "shed", "reject-cost"} {
			if f.given[name] {
				return "--" + name + " does not apply to the occ scenario (it takes --clients, --seed, --json and --quiet)"
			}
		}
	}
	if f.given["reject-cost"] && f.scenario != string(sim.Throttle) && f.scenario != "occ" {
		return "--reject-cost applies to the throttle scenario only, whose 429s it prices; in " + f.scenario + " every attempt costs the server a whole attempt's work"
	}
	return ""
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

// simScenario runs every policy (or those pick names) through s, one of the
// outage-style scenarios, and prints and writes the results.
func simScenario(ctx context.Context, io stdio, progress *progress, s sim.Scenario, jsonPath, svgPath, pick string) int {
	policies, err := pickPolicies(sim.Policies(), pick)
	if err != nil {
		return usageError(io.err, "sim", err.Error())
	}
	results, err := simulate(progress, policies, func(p sim.Policy, report func(float64)) (sim.Result, error) {
		return sim.RunWithProgress(ctx, s, p, report)
	})
	if err != nil {
		return interrupted(ctx, io)
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintln(io.out, s.Describe())
		fmt.Fprintln(io.out)
		printResults(io.out, s, results)
	}
	if err := writeOutputs(io, s, results, jsonPath, svgPath); err != nil {
		fmt.Fprintln(io.err, "retry sim:", err)
		return 1
	}
	return 0
}

// fitsMachine returns why the machine cannot hold the requests of s, if it
// cannot: the guard is what its memory holds, not a fixed number.
func fitsMachine(s sim.Scenario) error {
	limit, memory := sim.MaxRequests()
	requests := s.Rate * s.Duration.Seconds()
	if requests <= float64(limit) {
		return nil
	}
	if memory == 0 {
		return fmt.Errorf("%.3g requests (rate × duration) is more than the %d simulated where the memory available cannot be read", requests, limit)
	}
	return fmt.Errorf("%.3g requests (rate × duration) is more than this machine's %.1f GB of available memory holds: at most %d, at %d bytes each if all are in flight at once",
		requests, float64(memory)/1e9, limit, sim.BytesPerRequest)
}

// printResults prints the table of a run: names to the left, numbers to the
// right.
func printResults(w io.Writer, s sim.Scenario, results []sim.Result) {
	rows := [][]string{{"policy", "amplification", "during incident", "success", "unfinished", "p50", "p99", "recovery"}}
	for _, r := range results {
		recovery := "never"
		if r.Recovered {
			recovery = formatDuration(r.Recovery)
		}
		rows = append(rows, []string{r.Policy, fmt.Sprintf("%.2fx", r.Amplification()), fmt.Sprintf("%.2fx", r.IncidentAmplification()),
			fmt.Sprintf("%.1f%%", 100*r.SuccessRate()), fmt.Sprint(r.Unfinished),
			atLeast(r.P50Cut) + formatDuration(r.P50), atLeast(r.P99Cut) + formatDuration(r.P99), recovery})
	}
	printTable(w, rows)
}

// atLeast marks a latency cut off by the end of the run.
func atLeast(cut bool) string {
	if cut {
		return "≥"
	}
	return ""
}

// interrupted reports a run stopped by a signal, with the shell's status for
// it: 130 for SIGINT, 143 for SIGTERM.
func interrupted(ctx context.Context, io stdio) int {
	fmt.Fprintln(io.err, "retry sim: interrupted")
	if cause := context.Cause(ctx); cause != nil && strings.Contains(cause.Error(), "terminated") {
		return 143
	}
	return 130
}

// printTable aligns rows: the first column to the left, the others to the
// right.
func printTable(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString("  " + pad + cell)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// formatDuration rounds d for a table: milliseconds below a second, tenths
// of a second below a minute.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// simJSON is the file --json writes.
type simJSON struct {
	Scenario sim.Scenario `json:"scenario"`
	Results  []resultJSON `json:"results"`
}

type resultJSON struct {
	sim.Result
	Amplification         float64 `json:"amplification"`
	IncidentAmplification float64 `json:"incident_amplification"`
	SuccessRate           float64 `json:"success_rate"`
}

func writeOutputs(io stdio, s sim.Scenario, results []sim.Result, jsonPath, svgPath string) error {
	if jsonPath != "" {
		doc := simJSON{Scenario: s}
		for _, r := range results {
			doc.Results = append(doc.Results, resultJSON{r, r.Amplification(), r.IncidentAmplification(), r.SuccessRate()})
		}
		if err := writeJSON(io.out, jsonPath, doc); err != nil {
			return err
		}
	}
	if svgPath != "" {
		c := chart.Chart{
			Title: fmt.Sprintf("%s: from %s to %s %s", s.Kind, formatDuration(s.Start), formatDuration(s.End), s.Incident()),
			Subtitle: fmt.Sprintf("%d clients send %.0f req/s to a server of capacity %.0f/s and wait %v for each answer; one panel per retry policy",
				s.Clients, s.Rate, s.Capacity, s.Timeout),
			Step:     1,
			Incident: [2]float64{s.Start.Seconds(), s.End.Seconds()},
			Capacity: s.Capacity,
		}
		for _, r := range results {
			c.Step = r.Step
			c.Series = append(c.Series, chart.Series{Name: r.Policy, Offered: r.Offered, Goodput: r.Goodput})
		}
		if err := writeChart(svgPath, c); err != nil {
			return err
		}
		fmt.Fprintln(io.err, "retry sim: chart written to", svgPath)
	}
	return nil
}

// writeChart draws c into the file at path: an SVG, or a PNG if path ends
// in .png.
func writeChart(path string, c chart.Chart) error {
	var buf bytes.Buffer
	write := chart.WriteSVG
	if strings.HasSuffix(strings.ToLower(path), ".png") {
		write = chart.WritePNG // for a quick look where no SVG viewer is at hand
	}
	if err := write(&buf, c); err != nil {
		return fmt.Errorf("drawing the chart: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// writeJSON writes v as indented JSON to the file at path, or to stdout
// when path is "-".
func writeJSON(stdout io.Writer, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// checkOutputPath returns why a file cannot be written at path, checked
// before a run that may take minutes rather than after it: its directory
// must exist, and path must not be a directory. "" and "-" need no file.
func checkOutputPath(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a file to write", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("cannot write %s: no directory %s", path, filepath.Dir(path))
	}
	return nil
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

// simOCC runs the OCC scenario.
func simOCC(ctx context.Context, io stdio, progress *progress, clients int, seed uint64, jsonPath, pick string) int {
	s := sim.DefaultOCC(clients, seed)
	if err := s.Check(); err != nil {
		fmt.Fprintln(io.err, "retry sim:", err)
		return 2
	}
	policies, err := pickPolicies(sim.OCCPolicies(s.Base, s.Max), pick)
	if err != nil {
		return usageError(io.err, "sim", err.Error())
	}
	results, err := simulate(progress, policies, func(p sim.Policy, _ func(float64)) (sim.OCCResult, error) { return sim.RunOCC(ctx, s, p) })
	if err != nil {
		return interrupted(ctx, io)
	}
	rows := [][]string{{"backoff", "calls", "calls per client", "completion"}}
	for _, r := range results {
		rows = append(rows, []string{r.Policy, fmt.Sprint(r.Calls), fmt.Sprintf("%.1f", float64(r.Calls)/float64(clients)), formatDuration(r.Completion)})
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintf(io.out, "occ: %d clients each write once to one resource under optimistic concurrency: read, then commit,\n", clients)
		fmt.Fprintf(io.out, "which fails if another client committed since the read. Network trips take |N(%v, %v)|;\n", s.Hop, s.Hop/5)
		fmt.Fprintf(io.out, "retries back off from %v, capped at %v (the parameters of AWS's jitter experiment)\n\n", s.Base, s.Max)
		printTable(io.out, rows)
	}
	if jsonPath != "" {
		// "name" says which scenario this is, as "kind" does in the others'.
		if err := writeJSON(io.out, jsonPath, map[string]any{"name": "occ", "scenario": s, "results": results}); err != nil {
			fmt.Fprintln(io.err, "retry sim:", err)
			return 1
		}
	}
	return 0
}

// progress shows how far a run is, with the time it has left: on a
// terminal one line redrawn in place, elsewhere (a log, CI) a plain line
// every progressEvery, so that a long run is seen to be alive.
type progress struct {
	w        io.Writer // nil: no progress
	terminal bool
	width    int       // of the line on the terminal
	start    time.Time // of the run
	last     time.Time // when a line was last shown
}

const (
	progressRedraw = 100 * time.Millisecond // on a terminal
	progressEvery  = 5 * time.Second        // elsewhere
)

func newProgress(w io.Writer, quiet bool) *progress {
	if quiet {
		return &progress{}
	}
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		p.terminal = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	p.last = p.start
	return p
}

// update shows that policy i of n is running, frac of it done.
func (p *progress) update(i, n int, name string, frac float64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	since := now.Sub(p.last)
	if p.terminal && since < progressRedraw && p.width > 0 || !p.terminal && since < progressEvery {
		return
	}
	p.last = now
	done := (float64(i) + min(max(frac, 0), 1)) / float64(n)
	left := ""
	if elapsed := now.Sub(p.start); elapsed >= time.Second && done > 0.005 {
		left = ", about " + formatLeft(time.Duration(float64(elapsed)*(1-done)/done)) + " left"
	}
	line := fmt.Sprintf("%d%% done, %d/%d: %s%s", int(100*done), i+1, n, name, left)
	if !p.terminal {
		fmt.Fprintln(p.w, "retry sim:", line)
		return
	}
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.width-utf8.RuneCountInString(line), 0)))
	p.width = utf8.RuneCountInString(line)
}

// formatLeft rounds an estimate of the time left to what it is worth.
func formatLeft(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Second).String()
}

func (p *progress) done() {
	if p.terminal && p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	}
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

// simLayers runs the layered scenario s.
func simLayers(ctx context.Context, io stdio, progress *progress, s sim.LayersScenario, jsonPath, svgPath, pick string) int {
	err := s.Check()
	if err == nil {
		err = fitsMachine(sim.Scenario{Rate: s.Rate, Duration: s.Duration})
	}
	if err != nil {
		fmt.Fprintln(io.err, "retry sim:", err)
		return 2
	}
	all := sim.LayerPolicies()
	rows := make([]sim.Policy, len(all))
	for i, p := range all {
		rows[i] = p.Policy
	}
	picked, err := pickPolicies(rows, pick)
	if err != nil {
		return usageError(io.err, "sim", err.Error())
	}
	rules := make(map[string]sim.LayerPolicy)
	for _, p := range all {
		rules[p.Name] = p
	}
	results, err := simulate(progress, picked, func(p sim.Policy, report func(float64)) (sim.LayersResult, error) {
		return sim.RunLayers(ctx, s, rules[p.Name], report)
	})
	if err != nil {
		return interrupted(ctx, io)
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintln(io.out, s.Describe())
		fmt.Fprintln(io.out)
		printLayers(io.out, s.Rate, results)
	}
	if err := writeLayers(io, s, results, jsonPath, svgPath); err != nil {
		fmt.Fprintln(io.err, "retry sim:", err)
		return 1
	}
	return 0
}

// writeLayers writes a layered run's JSON to jsonPath and its chart to
// svgPath, each if its path is set.
func writeLayers(io stdio, s sim.LayersScenario, results []sim.LayersResult, jsonPath, svgPath string) error {
	if jsonPath != "" {
		if err := writeJSON(io.out, jsonPath, layersJSON(s, results)); err != nil {
			return err
		}
	}
	if svgPath == "" {
		return nil
	}
	c := chart.Chart{
		Title: fmt.Sprintf("layers: from %s to %s the database behind the back tier fails every attempt", formatDuration(s.Start), formatDuration(s.End)),
		Subtitle: fmt.Sprintf("users send %.0f req/s through front, middle and back tiers that each retry; offered: the back's attempts to the database (capacity %.0f/s); one panel per row",
			s.Rate, s.Capacity),
		Step:     1,
		Incident: [2]float64{s.Start.Seconds(), s.End.Seconds()},
		Capacity: s.Capacity,
	}
	for _, r := range results {
		c.Step = r.Step
		c.Series = append(c.Series, chart.Series{Name: r.Policy, Offered: r.Offered, Goodput: r.Goodput})
	}
	if err := writeChart(svgPath, c); err != nil {
		return err
	}
	fmt.Fprintln(io.err, "retry sim: chart written to", svgPath)
	return nil
}

// layersJSON is the document --json writes for a layered run: the results
// with the figures derived from them.
func layersJSON(s sim.LayersScenario, results []sim.LayersResult) any {
	type resultJSON struct {
		sim.LayersResult
		Amplification         [sim.Tiers]float64 `json:"amplification"`
		IncidentAmplification [sim.Tiers]float64 `json:"incident_amplification"`
		SuccessRate           float64            `json:"success_rate"`
	}
	doc := struct {
		Scenario sim.LayersScenario `json:"scenario"`
		Tiers    [sim.Tiers]string  `json:"tiers"`
		Results  []resultJSON       `json:"results"`
	}{Scenario: s, Tiers: sim.TierNames}
	for _, r := range results {
		j := resultJSON{LayersResult: r, SuccessRate: r.SuccessRate()}
		for t := range sim.Tiers {
			j.Amplification[t], j.IncidentAmplification[t] = r.Amplification(t), r.IncidentAmplification(t)
		}
		doc.Results = append(doc.Results, j)
	}
	return doc
}

// printLayers prints the table of a layered run.
func printLayers(w io.Writer, rate float64, results []sim.LayersResult) {
	fmt.Fprintln(w, "front, middle, back: attempts each tier sent to the next (the back's to the database) per request sent during the outage;")
	fmt.Fprintln(w, "database peak: its busiest second's attempts per request sent in a second")
	fmt.Fprintln(w)
	rows := [][]string{{"policy", "front", "middle", "back", "back, whole run", "database peak", "success", "unfinished", "recovery"}}
	for _, r := range results {
		recovery := "never"
		if r.Recovered {
			recovery = formatDuration(r.Recovery)
		}
		row := []string{r.Policy}
		for t := range sim.Tiers {
			row = append(row, fmt.Sprintf("%.2fx", r.IncidentAmplification(t)))
		}
		row = append(row, fmt.Sprintf("%.2fx", r.Amplification(sim.Tiers-1)), fmt.Sprintf("%.2fx", slices.Max(r.Offered)/rate), fmt.Sprintf("%.1f%%", 100*r.SuccessRate()), fmt.Sprint(r.Unfinished), recovery)
		rows = append(rows, row)
	}
	printTable(w, rows)
}
