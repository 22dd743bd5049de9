package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/) and, with TestReplicaTables, the README's tables")

// goldenScenarios are short runs of the single-server scenarios, with the
// options that change how the server serves (shedding, a priced 429).
func goldenScenarios(t *testing.T) map[string]Scenario {
	t.Helper()
	out := map[string]Scenario{}
	for _, k := range []Kind{Outage, Brownout, Overload, Throttle} {
		s, err := Defaults(k, 20, 200, 30*time.Second, 5)
		if err != nil {
			t.Fatal(err)
		}
		out[string(k)] = s
	}
	shed := out[string(Overload)]
	shed.Shed = true
	out["overload-shed"] = shed
	priced := out[string(Throttle)]
	priced.RejectCost = 0.5
	out["throttle-reject-cost"] = priced
	return out
}

// goldenPolicies are the policies whose strategies have fixed numbers
// (retry.Simple's): the rows of Standard and Adaptive follow those
// strategies' defaults, which are tuned, and would fail the golden test for
// reasons other than the model.
func goldenPolicies() []Policy {
	var out []Policy
	for _, p := range Policies() {
		if !strings.Contains(p.Name, "Standard") && !strings.Contains(strings.ToLower(p.Name), "adaptive") {
			out = append(out, p)
		}
	}
	return out
}

// TestSingleServerGolden holds the single-server model to its results as
// they were before the replica model joined the runner
// (testdata/single-server.json, written by the code of that time), in
// short runs of every scenario. A change to these numbers is a change to
// the model, never a side effect; -update rewrites the file when the change
// is meant.
func TestSingleServerGolden(t *testing.T) {
	got := map[string][]Result{}
	for name, s := range goldenScenarios(t) {
		for _, p := range goldenPolicies() {
			r, err := Run(context.Background(), s, p)
			if err != nil {
				t.Fatal(err)
			}
			got[name] = append(got[name], r)
		}
	}
	data, err := json.MarshalIndent(got, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "single-server.json")
	if *update {
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(data, '\n'), want) {
		var old map[string][]Result
		if err := json.Unmarshal(want, &old); err != nil {
			t.Fatal(err)
		}
		for name, rs := range got {
			for i, r := range rs {
				if i >= len(old[name]) {
					t.Errorf("%s: %s: no golden result", name, r.Policy)
					continue
				}
				a, _ := json.Marshal(r)
				b, _ := json.Marshal(old[name][i])
				if !bytes.Equal(a, b) {
					t.Errorf("%s: %s differs from before the replica model:\n got %s\nwant %s", name, r.Policy, a, b)
				}
			}
		}
		t.Fatal("the single-server model's results changed")
	}
}
