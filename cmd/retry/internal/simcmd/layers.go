package simcmd

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/retrykit/retry/cmd/retry/internal/chart"
	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// simLayers runs the layered scenario s.
func simLayers(ctx context.Context, std cli.Stdio, progress *progress, s sim.LayersScenario, jsonPath, svgPath, pick string) int {
	err := s.Check()
	if err == nil {
		err = layersFitMachine(s)
	}
	if err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	all := sim.LayerPolicies()
	rows := make([]sim.Policy, len(all))
	for i, p := range all {
		rows[i] = p.Policy
	}
	picked, err := pickPolicies(rows, pick)
	if err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	rules := make(map[string]sim.LayerPolicy)
	for _, p := range all {
		rules[p.Name] = p
	}
	results, err := simulate(progress, picked, func(p sim.Policy, report func(float64)) (sim.LayersResult, error) {
		return sim.RunLayers(ctx, s, rules[p.Name], report)
	})
	if err != nil {
		return interrupted(ctx, std)
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintln(std.Out, s.Describe())
		fmt.Fprintln(std.Out)
		printLayers(std.Out, s.Rate, results)
	}
	if err := writeLayers(std, s, results, jsonPath, svgPath); err != nil {
		fmt.Fprintln(std.Err, "retry sim:", err)
		return 1
	}
	return 0
}

// writeLayers writes a layered run's JSON to jsonPath and its chart to
// svgPath, each if its path is set.
func writeLayers(std cli.Stdio, s sim.LayersScenario, results []sim.LayersResult, jsonPath, svgPath string) error {
	if jsonPath != "" {
		if err := writeJSON(std.Out, jsonPath, layersJSON(s, results)); err != nil {
			return err
		}
	}
	if svgPath == "" {
		return nil
	}
	title := fmt.Sprintf("layers: from %s to %s the database behind the back tier fails every attempt", formatDuration(s.Start), formatDuration(s.End))
	subtitle := fmt.Sprintf("users send %.0f req/s through front, middle and back tiers that each retry; offered: the back's attempts to the database (capacity %.0f/s); one panel per row",
		s.Rate, s.Capacity)
	return writeRunChart(std, svgPath, title, subtitle, s.Start, s.End, s.Capacity, results, func(r sim.LayersResult) (chart.Series, float64) {
		return chart.Series{Name: r.Policy, Offered: r.Offered, Goodput: r.Goodput}, r.Step
	})
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
