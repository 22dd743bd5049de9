package simcmd

import (
	"context"
	"fmt"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// simOCC runs the OCC scenario.
func simOCC(ctx context.Context, std cli.Stdio, progress *progress, clients int, seed uint64, jsonPath, pick string) int {
	s := sim.DefaultOCC(clients, seed)
	if err := s.Check(); err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	policies, err := pickPolicies(sim.OCCPolicies(s.Base, s.Max), pick)
	if err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	results, err := simulate(progress, policies, func(p sim.Policy, _ func(float64)) (sim.OCCResult, error) { return sim.RunOCC(ctx, s, p) })
	if err != nil {
		return interrupted(ctx, std)
	}
	rows := [][]string{{"backoff", "calls", "calls per client", "completion"}}
	for _, r := range results {
		rows = append(rows, []string{r.Policy, fmt.Sprint(r.Calls), fmt.Sprintf("%.1f", float64(r.Calls)/float64(clients)), formatDuration(r.Completion)})
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintf(std.Out, "occ: %d clients each write once to one resource under optimistic concurrency: read, then commit,\n", clients)
		fmt.Fprintf(std.Out, "which fails if another client committed since the read. Network trips take |N(%v, %v)|;\n", s.Hop, s.Hop/5)
		fmt.Fprintf(std.Out, "retries back off from %v, capped at %v (the parameters of AWS's jitter experiment)\n\n", s.Base, s.Max)
		printTable(std.Out, rows)
	}
	if jsonPath != "" {
		// "name" says which scenario this is, as "kind" does in the others'.
		if err := writeJSON(std.Out, jsonPath, map[string]any{"name": "occ", "scenario": s, "results": results}); err != nil {
			fmt.Fprintln(std.Err, "retry sim:", err)
			return 1
		}
	}
	return 0
}
