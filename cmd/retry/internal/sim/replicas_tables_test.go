package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReplicaExplore prints every policy's results in every replica
// scenario at its defaults, with 100 and 1,000 clients sending 1,000 req/s
// for a minute: for tuning the strategies against the replica model
// (SIM_REPLICAS=1; SIM_REPLICAS=zone-flap,blip picks scenarios).
func TestReplicaExplore(t *testing.T) {
	pick := os.Getenv("SIM_REPLICAS")
	if pick == "" {
		t.Skip("set SIM_REPLICAS=1, or to scenarios separated by commas")
	}
	for _, clients := range []int{100, 1000} {
		for _, kind := range ReplicaKinds() {
			if pick != "1" && !strings.Contains(","+pick+",", ","+string(kind)+",") {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", kind, clients), func(t *testing.T) {
				t.Parallel()
				s, err := Defaults(kind, clients, 1000, time.Minute, 1)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				fmt.Fprintln(&b, s.Describe())
				for _, p := range Policies() {
					r, err := Run(context.Background(), s, p)
					if err != nil {
						t.Fatal(err)
					}
					rec := "never"
					if r.Recovered {
						rec = r.Recovery.String()
					}
					fmt.Fprintf(&b, "%-50s amp %.4f inc %.4f succ %7.3f%% unf %5d p50 %8v p99 %8v rec %s\n", p.Name, r.Amplification(), r.IncidentAmplification(),
						100*r.SuccessRate(), r.Unfinished, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), rec)
				}
				t.Log("\n" + b.String())
			})
		}
	}
}

// The tables of the replica scenarios sit between these lines.
const (
	tablesBegin = "<!-- replica tables: written by go test ./cmd/retry/internal/sim -run TestReplicaTables -update -->"
	tablesEnd   = "<!-- end of replica tables -->"
)

// replicaTableRows are the policies of the replica tables of docs/replicas.md.
var replicaTableRows = []string{
	"no retries",
	"Standard, quota per client",
	Default + ", per client",
	"avast/retry-go v4/v5 defaults: 10 att., 100ms·2^n",
	"go-retryablehttp v0.7 defaults: 4 retries, 1s-30s",
	"cenkalti/backoff v5 defaults: 500ms·1.5^n, 15 min",
}

// TestReplicaTables rewrites, with -update, the tables of docs/replicas.md of the
// replica scenarios from this build: one per fleet (100 and 1,000 clients
// sending 1,000 req/s for a minute), a row per scenario and policy, and the
// success and amplification (over the run and during the incident) of
// each. Without -update it does nothing: the numbers follow the strategies,
// which change.
func TestReplicaTables(t *testing.T) {
	if !*update {
		t.Skip("-update rewrites the replica tables of docs/replicas.md")
	}
	policies := make([]Policy, len(replicaTableRows))
	for j, name := range replicaTableRows {
		policies[j] = named(t, name)
	}
	var b strings.Builder
	for i, clients := range []int{100, 1000} {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s clients:\n\n", map[int]string{100: "100", 1000: "1,000"}[clients])
		b.WriteString("| scenario | policy | success | amplification | during incident |\n| --- | --- | ---: | ---: | ---: |\n")
		kinds := ReplicaKinds()
		rows := make([][]string, len(kinds))
		var wg sync.WaitGroup
		for k, kind := range kinds {
			wg.Go(func() {
				s, err := Defaults(kind, clients, 1000, time.Minute, 1)
				if err != nil {
					t.Error(err)
					return
				}
				for j, p := range policies {
					r, err := Run(context.Background(), s, p)
					if err != nil {
						t.Error(err)
						return
					}
					scenario := ""
					if j == 0 {
						scenario = "`" + string(kind) + "`"
					}
					rows[k] = append(rows[k], fmt.Sprintf("| %s | %s | %.1f%% | %.2fx | %.2fx |\n",
						scenario, p.Name, 100*r.SuccessRate(), r.Amplification(), r.IncidentAmplification()))
				}
			})
		}
		wg.Wait()
		for _, rs := range rows {
			b.WriteString(strings.Join(rs, ""))
		}
	}
	if t.Failed() {
		return
	}
	path := filepath.Join("..", "..", "..", "..", "docs", "replicas.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(readme, []byte(tablesBegin+"\n"))
	_, after, ok2 := bytes.Cut(rest, []byte(tablesEnd))
	if !ok || !ok2 {
		t.Fatalf("%s has no lines %q and %q to write the tables between", path, tablesBegin, tablesEnd)
	}
	var out bytes.Buffer
	out.Write(before)
	out.WriteString(tablesBegin + "\n\n" + b.String() + "\n" + tablesEnd)
	out.Write(after)
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
