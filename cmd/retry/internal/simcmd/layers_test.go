package simcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

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
	_, errOut, code := clitest.Run(t, "", "sim", "--quiet", "--scenario", "layers", "--rate", fmt.Sprint(int(rate)), "--duration", "2s")
	if code != 2 || !strings.Contains(errOut, "in flight") || !strings.Contains(errOut, "available memory") {
		t.Errorf("--scenario layers --rate %.0f --duration 2s: exit %d, stderr %q; want 2 and the memory the machine holds", rate, code, errOut)
	}
	// Users send requests for --duration only: a long timeout does not
	// make 12,000 requests more.
	if _, errOut, code := clitest.Run(t, "", "sim", "--quiet", "--scenario", "layers", "--duration", "12s", "--timeout", "1h"); code != 0 {
		t.Errorf("--scenario layers --duration 12s --timeout 1h: exit %d, stderr %q; want a run", code, errOut)
	}
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
		out, errOut, code := clitest.Run(t, "", simArgs(append([]string{"--scenario", "layers", "--quiet", "--json", path}, extra...)...)...)
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
		_, errOut, code := clitest.Run(t, "", args...)
		if code != 2 || errOut == "" || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a one-line message", args, code, errOut)
		}
	}
	help, _, _ := clitest.Run(t, "", "sim", "-h")
	if !strings.Contains(help, "layers    retries that nest, in a model of its own") || !strings.Contains(help, "occ or layers") {
		t.Errorf("sim -h does not describe the layers scenario:\n%s", help)
	}

	// --policies picks rows; --svg draws a panel per row.
	svg := filepath.Join(dir, "layers.svg")
	some, errOut, code := clitest.Run(t, "", simArgs("--scenario", "layers", "--quiet", "--policies", "layer-aware", "--svg", svg)...)
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
