package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/sim"
)

// small keeps the end-to-end runs quick.
var small = []string{"--clients", "20", "--rate", "200", "--duration", "20s"}

func simArgs(extra ...string) []string { return append(append([]string{"sim"}, small...), extra...) }

func TestSimIsDeterministicForASeed(t *testing.T) {
	dir := t.TempDir()
	run := func(seed, name string) (string, []byte) {
		path := filepath.Join(dir, name)
		out, errOut, code := runRetry(t, "", simArgs("--seed", seed, "--json", path)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return out, data
	}
	out1, json1 := run("7", "a.json")
	out2, json2 := run("7", "b.json")
	if out1 != out2 || string(json1) != string(json2) {
		t.Fatal("two runs with the same seed differ")
	}
	_, json3 := run("8", "c.json")
	if string(json1) == string(json3) {
		t.Fatal("seeds 7 and 8 gave identical results")
	}
}

func TestSimTableMatchesJSON(t *testing.T) {
	for _, scenario := range []string{"outage", "brownout", "overload", "throttle"} {
		t.Run(scenario, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			out, errOut, code := runRetry(t, "", simArgs("--scenario", scenario, "--json", path)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Results []struct {
					Policy                string  `json:"policy"`
					Requests              int     `json:"requests"`
					Attempts              int     `json:"attempts"`
					Succeeded             int     `json:"succeeded"`
					Amplification         float64 `json:"amplification"`
					IncidentAmplification float64 `json:"incident_amplification"`
					SuccessRate           float64 `json:"success_rate"`
					Recovered             bool    `json:"recovered"`
					Unfinished            int     `json:"unfinished"`
					Offered               []float64
				} `json:"results"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Results) < 8 {
				t.Fatalf("%d policies in the JSON, want the whole table", len(doc.Results))
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, r := range doc.Results {
				if r.Requests == 0 || float64(r.Attempts)/float64(r.Requests) != r.Amplification {
					t.Fatalf("%s: amplification %v is not attempts/requests = %d/%d", r.Policy, r.Amplification, r.Attempts, r.Requests)
				}
				var row string
				for _, l := range lines {
					if strings.HasPrefix(l, r.Policy+" ") {
						row = l
					}
				}
				if row == "" {
					t.Fatalf("no table row for %q in:\n%s", r.Policy, out)
				}
				want := []string{
					fmt.Sprintf("%.2fx", r.Amplification),
					fmt.Sprintf("%.2fx", r.IncidentAmplification),
					fmt.Sprintf("%.1f%%", 100*r.SuccessRate),
				}
				fields := strings.Fields(strings.TrimPrefix(row, r.Policy))
				if len(fields) != 7 || fields[0] != want[0] || fields[1] != want[1] || fields[2] != want[2] || fields[3] != fmt.Sprint(r.Unfinished) {
					t.Fatalf("row %q does not match the JSON %v, unfinished %d", row, want, r.Unfinished)
				}
				if (fields[6] == "never") == r.Recovered {
					t.Fatalf("row %q says recovery %q, JSON says recovered=%v", row, fields[6], r.Recovered)
				}
			}
		})
	}
}

func TestSimOCC(t *testing.T) {
	out, errOut, code := runRetry(t, "", "sim", "--scenario", "occ", "--clients", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"no jitter", "full jitter", "equal jitter", "decorrelated jitter", "calls per client"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if _, errOut, code := runRetry(t, "", simArgs("--svg", path)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	for {
		_, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
	}
	// A panel per policy, named, under a title that states the scenario.
	for _, want := range []string{"<svg", ">Standard, one shared quota<", ">no retries<", ">outage: from 3.3s to 10s every attempt fails<"} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("the SVG lacks %q", want)
		}
	}
	png := filepath.Join(t.TempDir(), "chart.png")
	if _, errOut, code := runRetry(t, "", simArgs("--svg", png, "--scenario", "throttle")...); code != 0 {
		t.Fatalf("--svg chart.png: exit %d: %s", code, errOut)
	}
	if data, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG\r\n")) {
		t.Fatalf("--svg chart.png did not write a PNG: %v, %.8q", err, data)
	}
}

func TestSimUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--scenario", "flood"},
		{"sim", "--clients", "0"},
		{"sim", "--rate", "-5"},
		{"sim", "extra"},
		{"sim", "--no-such-flag"},
		{"sim", "--incident-start", "40s", "--incident-end", "20s"},
		simArgs("--incident-end", "20s"), // the run lasts 20s: the incident must end before it
		{"sim", "--rate", "1e-9"},
		{"sim", "--clients", "20000000"},
		{"sim", "--duration", "500ms"},
		{"sim", "--rate", "1", "--duration", "25h"}, // past what a pending event's time holds
		{"sim", "--timeout", "2h"},
		{"sim", "--scenario", "occ", "--clients", "100000"},
		// Given nonsense is rejected, not replaced by the default.
		{"sim", "--capacity", "0"},
		{"sim", "--timeout", "0"},
		{"sim", "--incident-start", "-1s"},
		// occ has no use for these: it says so rather than ignore them.
		{"sim", "--scenario", "occ", "--svg", "x.svg"},
		{"sim", "--scenario", "occ", "--rate", "5"},
		{"sim", "--scenario", "occ", "--duration", "1m"},
		{"sim", "--scenario", "occ", "--shed"},
		{"sim", "--scenario", "occ", "--reject-cost", "1"},
		// A 429's cost is the throttle scenario's alone, between 0 and 1.
		{"sim", "--reject-cost", "1"},
		{"sim", "--scenario", "overload", "--reject-cost", "0"},
		{"sim", "--scenario", "throttle", "--reject-cost", "-0.5"},
		{"sim", "--scenario", "throttle", "--reject-cost", "1.5"},
		{"sim", "--scenario", "throttle", "--reject-cost", "NaN"},
	} {
		_, errOut, code := runRetry(t, "", args...)
		// One line, the usage line for a flag used wrongly, and a pointer to
		// -h: never the whole help.
		if code != 2 || errOut == "" || strings.Count(errOut, "\n") > 3 || strings.Contains(errOut, "Flags:") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a one-line message", args, code, errOut)
		}
	}
	out, errOut, code := runRetry(t, "", "sim", "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "-scenario") || !strings.Contains(out, "amplification") {
		t.Fatalf("-h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(out, "-1ns") {
		t.Errorf("-h shows a default of -1ns:\n%s", out)
	}
}

// sim's durations are read as run's and http's are: a plain number is
// seconds.
func TestSimDurationsInSeconds(t *testing.T) {
	out, errOut, code := runRetry(t, "", "sim", "--quiet", "--policies", "no retries", "--timeout", "2", "--duration", "20", "--json", "-")
	if code != 0 || !strings.Contains(out, `"timeout_ns": 2000000000`) || !strings.Contains(out, `"duration_ns": 20000000000`) {
		t.Errorf("--timeout 2 --duration 20: exit %d, stderr %q; want a run of 20 s with a 2 s timeout:\n%.400s", code, errOut, out)
	}
}

// --json - puts the JSON alone on stdout, for every scenario, and occ's
// names its scenario.
func TestSimJSONToStdout(t *testing.T) {
	for _, args := range [][]string{simArgs("--json", "-"), {"sim", "--scenario", "occ", "--clients", "20", "--json", "-"}} {
		out, errOut, code := runRetry(t, "", args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		var doc struct {
			Name     string         `json:"name"`
			Scenario map[string]any `json:"scenario"`
			Results  []any          `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%q: stdout is not JSON alone: %v\n%s", args, err, out)
		}
		if len(doc.Results) == 0 || doc.Name == "" && doc.Scenario["kind"] == nil {
			t.Errorf("%q: JSON %.200s has no results or does not name its scenario", args, out)
		}
	}
}

// An output that cannot be written is found before the run, not after it.
func TestSimChecksOutputPathsFirst(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		simArgs("--json", filepath.Join(dir, "no", "such.json")),
		simArgs("--svg", dir),
		{"sim", "--scenario", "occ", "--json", filepath.Join(dir, "no", "such.json")},
	} {
		out, errOut, code := runRetry(t, "", args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 2 {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %q; want 2, no table, one line and a pointer to -h", args, code, out, errOut)
		}
	}
}

// --policies keeps the rows it names, in their usual order, with the same
// numbers as in the full table; a word that names no row is a usage error.
func TestSimPolicies(t *testing.T) {
	full, errOut, code := runRetry(t, "", simArgs("--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	some, errOut, code := runRetry(t, "", simArgs("--quiet", "--policies", "ADAPTIVE,no retries")...)
	if code != 0 {
		t.Fatalf("--policies: exit %d: %s", code, errOut)
	}
	rows := func(out string) map[string]string {
		m := make(map[string]string)
		for _, line := range strings.Split(out, "\n") {
			if name, _, ok := strings.Cut(line, "  "); ok {
				m[name] = strings.Join(strings.Fields(line[len(name):]), " ")
			}
		}
		return m
	}
	all, picked := rows(full), rows(some)
	want := []string{"no retries", "AWS adaptive mode, per client", "Adaptive (default), per client", "Adaptive (default), one shared",
		"Adaptive + Breaker, per client", "Adaptive + Breaker, one shared",
		"Adaptive + fleet breaker, 100ms sync", "Adaptive + fleet breaker, 1s sync"}
	if len(picked) != len(want)+1 { // and the header
		t.Errorf("--policies picked %d rows, want %d:\n%s", len(picked)-1, len(want), some)
	}
	for _, name := range want {
		if picked[name] == "" || picked[name] != all[name] {
			t.Errorf("row %q: %q with --policies, %q in the full table", name, picked[name], all[name])
		}
	}
	if i, j := strings.Index(some, "no retries"), strings.Index(some, "AWS adaptive"); i < 0 || j < i {
		t.Errorf("rows out of their usual order:\n%s", some)
	}
	// The rows for other libraries name the library and its versions, and
	// words of those names pick them.
	libraries, _, code := runRetry(t, "", simArgs("--quiet", "--policies", "retry-go,retryablehttp,cenkalti")...)
	for _, want := range []string{"avast/retry-go v4/v5 defaults: 10 att.", "go-retryablehttp v0.7 defaults: 4 retries, 1s-30s", "cenkalti/backoff v5 defaults:"} {
		if code != 0 || !strings.Contains(libraries, "\n"+want) || !strings.Contains(full, "\n"+want) {
			t.Errorf("no row named %q:\n%s", want, libraries)
		}
	}
	if n := strings.Count(libraries, " defaults: "); n != 3 {
		t.Errorf("--policies retry-go,retryablehttp,cenkalti picked %d library rows, want 3:\n%s", n, libraries)
	}
	_, errOut, code = runRetry(t, "", "sim", "--policies", "nosuch")
	if code != 2 || !strings.Contains(errOut, `no row's name contains "nosuch"`) {
		t.Errorf("--policies nosuch: exit %d, stderr %q; want 2 and why", code, errOut)
	}
}

// The help says what a failure costs the server in each scenario, and
// --reject-cost 1 charges throttle's 429s like any other attempt: the
// description says so, and the quota per client falls below no retries'
// success (the default, a free 429, keeps it at or above).
func TestSimRejectCost(t *testing.T) {
	help, _, _ := runRetry(t, "", "sim", "-h")
	for _, want := range []string{"front-door rate limiter", "-reject-cost", "a failure costs a whole attempt's work"} {
		if !strings.Contains(help, want) {
			t.Errorf("sim -h lacks %q", want)
		}
	}
	success := func(extra ...string) (header string, rates map[string]float64) {
		t.Helper()
		args := append([]string{"sim", "--scenario", "throttle", "--quiet", "--policies", "no retries,Standard, quota per client"}, extra...)
		out, errOut, code := runRetry(t, "", append(args, "--json", "-")...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		var doc struct {
			Scenario struct {
				RejectCost float64 `json:"reject_cost"`
			} `json:"scenario"`
			Results []struct {
				Policy      string  `json:"policy"`
				SuccessRate float64 `json:"success_rate"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		rates = make(map[string]float64)
		for _, r := range doc.Results {
			rates[r.Policy] = r.SuccessRate
		}
		table, _, _ := runRetry(t, "", args...)
		header, _, _ = strings.Cut(table, "\n")
		return fmt.Sprintf("%s (reject_cost %v)", header, doc.Scenario.RejectCost), rates
	}
	header, free := success()
	if !strings.Contains(header, "costing the server nothing") || free["Standard, quota per client"] < free["no retries"] {
		t.Errorf("default: %s: success %v; want free 429s and the quota per client at least no retries'", header, free)
	}
	header, charged := success("--reject-cost", "1")
	if !strings.Contains(header, "costing the server as much as any attempt") || !strings.Contains(header, "reject_cost 1") ||
		charged["Standard, quota per client"] > charged["no retries"]-0.03 {
		t.Errorf("--reject-cost 1: %s: success %v; want charged 429s and the quota per client clearly below no retries", header, charged)
	}
}

// Where stderr is not a terminal, progress is a plain line every few
// seconds with the share done and the time left (in virtual time: a
// policy's run reports every second, and takes ten).
func TestSimProgressPlainLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := newProgress(&buf, false)
		for i := range 2 {
			for s := range 10 {
				time.Sleep(time.Second)
				p.update(i, 2, "policy "+fmt.Sprint(i), float64(s+1)/10)
			}
		}
		p.done()
		want := "retry sim: 25% done, 1/2: policy 0, about 15s left\n" +
			"retry sim: 50% done, 1/2: policy 0, about 10s left\n" +
			"retry sim: 75% done, 2/2: policy 1, about 5s left\n" +
			"retry sim: 100% done, 2/2: policy 1, about 0s left\n"
		if buf.String() != want {
			t.Errorf("progress:\n%s\nwant:\n%s", buf.String(), want)
		}
		var quiet bytes.Buffer
		q := newProgress(&quiet, true)
		time.Sleep(time.Minute)
		q.update(0, 1, "x", 0.5)
		if quiet.Len() != 0 {
			t.Errorf("--quiet progress: %q", quiet.String())
		}
	})
}

// The guard on the requests of a run is what this machine's memory holds.
func TestSimRequestGuardFollowsTheMachine(t *testing.T) {
	limit, memory := sim.MaxRequests()
	if memory == 0 {
		t.Skip("this system does not say how much memory is available")
	}
	if limit > 1_000_000_000 {
		t.Skipf("this machine may simulate %d requests: more than a run can hold", limit)
	}
	// A run of 1.5 times the limit, in as many seconds.
	rate := fmt.Sprint(int(math.Sqrt(1.5 * float64(limit))))
	_, errOut, code := runRetry(t, "", "sim", "--quiet", "--rate", rate, "--duration", rate+"s", "--clients", "1000")
	// The binary reads the available memory again, a moment later: its
	// limit may differ from the test's by what other processes did since.
	var said int64
	if m := regexp.MustCompile(`at most (\d+)`).FindStringSubmatch(errOut); m != nil {
		said, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if code != 2 || !strings.Contains(errOut, "available memory") || math.Abs(float64(said)/float64(limit)-1) > 0.1 {
		t.Errorf("--rate %s --duration %ss: exit %d, stderr %q; want 2 and the machine's limit, about %d", rate, rate, code, errOut, limit)
	}
}

// A layered run's memory follows its user requests in flight, each with the
// calls it makes at every tier, and its clients: a short run at a high rate,
// which the guard on rate × duration lets through, is refused if those do
// not fit; a small run with a long timeout is not.
func TestSimLayersGuardCountsRequestsInFlight(t *testing.T) {
	limit, memory := sim.MaxMemory()
	if memory == 0 {
		t.Skip("this system does not say how much memory is available")
	}
	s := sim.DefaultLayers(100, 1, 2*time.Second, 1)
	perRate := s.InFlight() / s.Rate * sim.LayerBytesPerRequest // bytes per req/s
	rate := (1.5*float64(limit) - float64(s.Clients)*sim.LayerBytesPerClient) / perRate
	if total, _ := sim.MaxRequests(); rate*2 > float64(total) {
		t.Fatalf("rate %.0f for 2s is beyond the guard on all requests too; the test means to show the one on requests in flight", rate)
	}
	_, errOut, code := runRetry(t, "", "sim", "--quiet", "--scenario", "layers", "--rate", fmt.Sprint(int(rate)), "--duration", "2s")
	if code != 2 || !strings.Contains(errOut, "in flight") || !strings.Contains(errOut, "available memory") {
		t.Errorf("--scenario layers --rate %.0f --duration 2s: exit %d, stderr %q; want 2 and the memory the machine holds", rate, code, errOut)
	}
	// Users send requests for --duration only: a long timeout does not
	// make 12,000 requests more.
	if _, errOut, code := runRetry(t, "", "sim", "--quiet", "--scenario", "layers", "--duration", "12s", "--timeout", "1h"); code != 0 {
		t.Errorf("--scenario layers --duration 12s --timeout 1h: exit %d, stderr %q; want a run", code, errOut)
	}
}

// On a terminal, progress is one line redrawn in place, at most every
// progressRedraw, with the share done and the time left; done clears it.
func TestSimProgressOnATerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := newProgress(&buf, false)
		p.terminal = true // as newProgress finds a terminal
		p.update(0, 4, "no retries", 0)
		for range 3 {
			time.Sleep(time.Second)
			p.update(1, 4, "Standard", 0.5)
			p.update(1, 4, "Standard", 0.6) // too soon: not drawn
		}
		p.done()
		lines := strings.Split(buf.String(), "\r")
		want := []string{"", "0% done, 1/4: no retries",
			"37% done, 2/4: Standard, about 2s left ",
			"37% done, 2/4: Standard, about 3s left ",
			"37% done, 2/4: Standard, about 5s left "}
		if len(lines) != len(want)+2 || strings.TrimSpace(lines[len(lines)-2]) != "" || lines[len(lines)-1] != "" {
			t.Fatalf("progress on a terminal: %q; want %d redraws and the line cleared", buf.String(), len(want)-1)
		}
		for i, w := range want {
			if strings.TrimRight(lines[i], " ") != strings.TrimRight(w, " ") {
				t.Errorf("redraw %d: %q, want %q", i, lines[i], w)
			}
		}
	})
}

// The layered scenario through the built binary: its table says what its
// JSON says, row for row, the same seed gives the same output, the rows
// show naive retries multiplying to about 27x at the back and retrykit's
// default not, and the flags that have no meaning in it are refused.
func TestSimLayers(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, extra ...string) (string, []byte) {
		t.Helper()
		path := filepath.Join(dir, name)
		out, errOut, code := runRetry(t, "", simArgs(append([]string{"--scenario", "layers", "--quiet", "--json", path}, extra...)...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return out, data
	}
	out, data := run("a.json")
	if again, data2 := run("b.json"); again != out || string(data2) != string(data) {
		t.Fatal("two runs with the same seed differ")
	}
	if _, data3 := run("c.json", "--seed", "8"); string(data3) == string(data) {
		t.Fatal("seeds 1 and 8 gave identical results")
	}
	var doc struct {
		Scenario struct {
			Kind string `json:"kind"`
		} `json:"scenario"`
		Tiers   []string `json:"tiers"`
		Results []struct {
			Policy                string    `json:"policy"`
			Requests              int       `json:"requests"`
			Attempts              []int     `json:"attempts"`
			Amplification         []float64 `json:"amplification"`
			IncidentAmplification []float64 `json:"incident_amplification"`
			SuccessRate           float64   `json:"success_rate"`
			Unfinished            int       `json:"unfinished"`
			Recovered             bool      `json:"recovered"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scenario.Kind != "layers" || strings.Join(doc.Tiers, ",") != "front,middle,back" || len(doc.Results) != 5 {
		t.Fatalf("JSON: kind %q, tiers %q, %d rows; want layers, front,middle,back and 5 rows", doc.Scenario.Kind, doc.Tiers, len(doc.Results))
	}
	amp := make(map[string]float64)
	for _, r := range doc.Results {
		if len(r.IncidentAmplification) != 3 || r.Requests == 0 || float64(r.Attempts[2])/float64(r.Requests) != r.Amplification[2] {
			t.Fatalf("%s: amplification %v is not attempts/requests = %v/%d", r.Policy, r.Amplification, r.Attempts, r.Requests)
		}
		amp[r.Policy] = r.IncidentAmplification[2]
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, r.Policy+"  ") {
				row = l
			}
		}
		fields := strings.Fields(strings.TrimPrefix(row, r.Policy))
		want := []string{fmt.Sprintf("%.2fx", r.IncidentAmplification[0]), fmt.Sprintf("%.2fx", r.IncidentAmplification[1]),
			fmt.Sprintf("%.2fx", r.IncidentAmplification[2]), fmt.Sprintf("%.2fx", r.Amplification[2])}
		if len(fields) != 8 || strings.Join(fields[:4], " ") != strings.Join(want, " ") ||
			fields[5] != fmt.Sprintf("%.1f%%", 100*r.SuccessRate) || fields[6] != fmt.Sprint(r.Unfinished) || (fields[7] == "never") == r.Recovered {
			t.Fatalf("row %q does not match the JSON: %v, success %v, unfinished %d, recovered %v", row, want, r.SuccessRate, r.Unfinished, r.Recovered)
		}
	}
	if naive := amp["naive: 3 attempts at every tier"]; naive < 25 || naive > 27.5 {
		t.Errorf("naive retries at every tier: %.2fx at the back during the outage, want about 27x", naive)
	}
	if def, ok := amp[sim.LayerDefault]; !ok || def > 1.2 {
		t.Errorf("%s: %.2fx at the back during the outage (row present: %v), want at most 1.2x", sim.LayerDefault, def, ok)
	}

	for _, args := range [][]string{
		{"sim", "--scenario", "layers", "--reject-cost", "1"},
		{"sim", "--scenario", "layers", "--capacity", "0"},
		{"sim", "--scenario", "layers", "--timeout", "0"},
		{"sim", "--scenario", "layers", "--clients", "0"},
		{"sim", "--scenario", "layers", "--incident-end", "2m"},
		{"sim", "--scenario", "layers", "--policies", "nosuch"},
	} {
		_, errOut, code := runRetry(t, "", args...)
		if code != 2 || errOut == "" || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a one-line message", args, code, errOut)
		}
	}
	help, _, _ := runRetry(t, "", "sim", "-h")
	if !strings.Contains(help, "layers    retries that nest, in a model of its own") || !strings.Contains(help, "occ or layers") {
		t.Errorf("sim -h does not describe the layers scenario:\n%s", help)
	}

	// --policies picks rows; --svg draws a panel per row.
	svg := filepath.Join(dir, "layers.svg")
	some, errOut, code := runRetry(t, "", simArgs("--scenario", "layers", "--quiet", "--policies", "layer-aware", "--svg", svg)...)
	if code != 0 {
		t.Fatalf("--policies layer-aware --svg: exit %d: %s", code, errOut)
	}
	if strings.Contains(some, "naive") || !strings.Contains(some, sim.LayerDefault) || !strings.Contains(some, "every attempt marked") {
		t.Errorf("--policies layer-aware: rows\n%s", some)
	}
	if chart, err := os.ReadFile(svg); err != nil || !strings.Contains(string(chart), ">"+sim.LayerDefault+"<") {
		t.Errorf("--svg: %v, or no panel for %q", err, sim.LayerDefault)
	}
}
