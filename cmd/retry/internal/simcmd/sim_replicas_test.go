package simcmd

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// --replicas and --balance shape the replica scenarios only: given to any
// other they are a usage error that says so, and a bad value is one too.
func TestSimReplicaFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--replicas", "3"},
		{"sim", "--scenario", "throttle", "--balance", "round-robin"},
		{"sim", "--scenario", "layers", "--replicas", "10"},
		{"sim", "--scenario", "overload", "--balance", "random"}, // even the default
	} {
		_, errOut, code := clitest.Run(t, "", args...)
		if code != 2 || !strings.Contains(errOut, "replica scenarios only") || strings.Count(errOut, "\n") > 3 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and that the flag is the replica scenarios'", args, code, errOut)
		}
	}
	for _, args := range [][]string{
		{"sim", "--scenario", "occ", "--replicas", "3"},
		{"sim", "--scenario", "blip", "--replicas", "0"},
		{"sim", "--scenario", "blip", "--replicas", "100000"},
		{"sim", "--scenario", "zone-flap", "--balance", "least-loaded"},
		{"sim", "--scenario", "replica-down", "--reject-cost", "1"},
		{"sim", "--scenario", "rolling-deploy", "--replicas", "10000", "--incident-start", "10s", "--incident-end", "11s"},
	} {
		_, errOut, code := clitest.Run(t, "", args...)
		if code != 2 || errOut == "" || strings.Count(errOut, "\n") > 3 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a one-line message", args, code, errOut)
		}
	}
	help, _, _ := clitest.Run(t, "", "sim", "-h")
	for _, k := range sim.ReplicaKinds() {
		if !strings.Contains(help, "\n  "+string(k)+" ") {
			t.Errorf("-h does not describe %s", k)
		}
	}
	for _, want := range []string{"-replicas", "-balance", "round-robin", "costs nothing", "resets the attempts"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
}

// A replica scenario's JSON says its replicas and balance, as the flags set
// them, and its table matches it; the single-server scenarios' JSON has
// neither.
func TestSimReplicaJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	out, errOut, code := clitest.Run(t, "", simArgs("--scenario", "zone-flap", "--replicas", "4", "--balance", "round-robin", "--json", path)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenario map[string]any `json:"scenario"`
		Results  []struct {
			Policy      string  `json:"policy"`
			SuccessRate float64 `json:"success_rate"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scenario["kind"] != "zone-flap" || doc.Scenario["replicas"] != 4.0 || doc.Scenario["balance"] != "round-robin" {
		t.Errorf("scenario %v, want zone-flap with 4 replicas, round-robin", doc.Scenario)
	}
	if len(doc.Results) != len(sim.Policies()) {
		t.Fatalf("%d results, want a row per policy, %d", len(doc.Results), len(sim.Policies()))
	}
	if !strings.Contains(out, "4 replicas of capacity 75/s each (300/s in all) behind a round-robin balancer") ||
		!strings.Contains(out, "1 of 4 replicas refuses connections 1s in every 2s") {
		t.Errorf("the description does not state the replicas and the incident:\n%s", out)
	}
	for _, r := range doc.Results {
		row := fmt.Sprintf("%.1f%%", 100*r.SuccessRate)
		if line := lineOf(out, r.Policy+" "); !strings.Contains(line, " "+row+" ") {
			t.Errorf("row %q lacks the JSON's success %s", line, row)
		}
	}
	single, _, code := clitest.Run(t, "", simArgs("--json", "-", "--policies", "no retries")...)
	if code != 0 || strings.Contains(single, `"replicas"`) || strings.Contains(single, `"balance"`) {
		t.Errorf("the outage's JSON names replicas or a balance:\n%.600s", single)
	}
}

func lineOf(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// --svg draws a replica scenario's chart, titled with its incident.
func TestSimReplicaSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if _, errOut, code := clitest.Run(t, "", simArgs("--scenario", "rolling-deploy", "--svg", path, "--policies", "no retries,adaptive")...); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">rolling-deploy: from 3.3s to 10s the replicas restart one at a time", "10 replicas of capacity 30/s each", ">no retries<"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}

// The memory guard holds for the replica scenarios: their requests cost
// what the single server's do, and a run too big for the machine is
// refused before it starts.
func TestSimReplicaGuard(t *testing.T) {
	limit, memory := sim.MaxRequests()
	if memory == 0 {
		t.Skip("this system does not say how much memory is available")
	}
	if limit > 1_000_000_000 {
		t.Skipf("this machine may simulate %d requests: more than a run can hold", limit)
	}
	rate := fmt.Sprint(int(math.Sqrt(1.5 * float64(limit))))
	_, errOut, code := clitest.Run(t, "", "sim", "--quiet", "--scenario", "flapping", "--rate", rate, "--duration", rate+"s", "--clients", "1000")
	if code != 2 || !strings.Contains(errOut, "available memory") {
		t.Errorf("flapping, --rate %s --duration %ss: exit %d, stderr %q; want 2 and the machine's limit", rate, rate, code, errOut)
	}
}
