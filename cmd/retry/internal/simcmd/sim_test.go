package simcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// TestMain builds the retry command, which the tests run as a user would.
func TestMain(m *testing.M) {
	os.Exit(clitest.Main(m))
}

// small keeps the end-to-end runs quick.
var small = []string{"--clients", "20", "--rate", "200", "--duration", "20s"}

func simArgs(extra ...string) []string { return append(append([]string{"sim"}, small...), extra...) }

func TestSimIsDeterministicForASeed(t *testing.T) {
	dir := t.TempDir()
	run := func(seed, name string) (string, []byte) {
		path := filepath.Join(dir, name)
		out, errOut, code := clitest.Run(t, "", simArgs("--seed", seed, "--json", path)...)
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
			out, errOut, code := clitest.Run(t, "", simArgs("--scenario", scenario, "--json", path)...)
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
		_, errOut, code := clitest.Run(t, "", args...)
		// One line, the usage line for a flag used wrongly, and a pointer to
		// -h: never the whole help.
		if code != 2 || errOut == "" || strings.Count(errOut, "\n") > 3 || strings.Contains(errOut, "Flags:") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a one-line message", args, code, errOut)
		}
	}
	out, errOut, code := clitest.Run(t, "", "sim", "-h")
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
	out, errOut, code := clitest.Run(t, "", "sim", "--quiet", "--policies", "no retries", "--timeout", "2", "--duration", "20", "--json", "-")
	if code != 0 || !strings.Contains(out, `"timeout_ns": 2000000000`) || !strings.Contains(out, `"duration_ns": 20000000000`) {
		t.Errorf("--timeout 2 --duration 20: exit %d, stderr %q; want a run of 20 s with a 2 s timeout:\n%.400s", code, errOut, out)
	}
}

// --policies keeps the rows it names, in their usual order, with the same
// numbers as in the full table; a word that names no row is a usage error.
func TestSimPolicies(t *testing.T) {
	full, errOut, code := clitest.Run(t, "", simArgs("--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	some, errOut, code := clitest.Run(t, "", simArgs("--quiet", "--policies", "ADAPTIVE,no retries")...)
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
		"Adaptive, fleet-shared, 100ms sync", "Adaptive, fleet-shared, 1s sync",
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
	libraries, _, code := clitest.Run(t, "", simArgs("--quiet", "--policies", "retry-go,retryablehttp,cenkalti")...)
	for _, want := range []string{"avast/retry-go v4/v5 defaults: 10 att.", "go-retryablehttp v0.7 defaults: 4 retries, 1s-30s", "cenkalti/backoff v5 defaults:"} {
		if code != 0 || !strings.Contains(libraries, "\n"+want) || !strings.Contains(full, "\n"+want) {
			t.Errorf("no row named %q:\n%s", want, libraries)
		}
	}
	if n := strings.Count(libraries, " defaults: "); n != 3 {
		t.Errorf("--policies retry-go,retryablehttp,cenkalti picked %d library rows, want 3:\n%s", n, libraries)
	}
	_, errOut, code = clitest.Run(t, "", "sim", "--policies", "nosuch")
	if code != 2 || !strings.Contains(errOut, `no row's name contains "nosuch"`) {
		t.Errorf("--policies nosuch: exit %d, stderr %q; want 2 and why", code, errOut)
	}
}

// The help says what a failure costs the server in each scenario, and
// --reject-cost 1 charges throttle's 429s like any other attempt: the
// description says so, and the quota per client falls below no retries'
// success (the default, a free 429, keeps it at or above).
func TestSimRejectCost(t *testing.T) {
	help, _, _ := clitest.Run(t, "", "sim", "-h")
	for _, want := range []string{"front-door rate limiter", "-reject-cost", "a failure costs a whole attempt's work"} {
		if !strings.Contains(help, want) {
			t.Errorf("sim -h lacks %q", want)
		}
	}
	success := func(extra ...string) (header string, rates map[string]float64) {
		t.Helper()
		args := append([]string{"sim", "--scenario", "throttle", "--quiet", "--policies", "no retries,Standard, quota per client"}, extra...)
		out, errOut, code := clitest.Run(t, "", append(args, "--json", "-")...)
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
		table, _, _ := clitest.Run(t, "", args...)
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
	_, errOut, code := clitest.Run(t, "", "sim", "--quiet", "--rate", rate, "--duration", rate+"s", "--clients", "1000")
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

// The help names every flag as it is spelled, --name, never Go's -name.
func TestSimHelpSpellsFlags(t *testing.T) {
	var f simFlags
	clitest.CheckHelp(t, usage, f.flagSet())
}

// An unknown flag is named as it was typed, with the nearest flag sim
// has; -name is --name, as Go's flag package reads it.
func TestSimUnknownFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-balanse", "random"}, "unknown flag -balanse; did you mean --balance?"},
		{[]string{"--incident", "3s"}, "unknown flag --incident; did you mean --incident-end?"},
		{[]string{"--scenario=layers", "--policy", "naive"}, "unknown flag --policy; did you mean --policies?"},
		{[]string{"--attempts", "3"}, "unknown flag --attempts"},
	} {
		clitest.CheckMisuse(t, Run, "sim", "usage: retry sim [flags]", tc.args, tc.want)
	}
	// Both spellings of a known flag are read alike.
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"-balance", "random", "--scenario", "flood"}, cli.Stdio{Out: &out, Err: &errOut}); code != 2 || !strings.HasPrefix(errOut.String(), "retry sim: ") || strings.Contains(errOut.String(), "flag") {
		t.Errorf("-balance random --scenario flood: exit %d, stderr %q; want 2 for the scenario alone", code, errOut.String())
	}
}
