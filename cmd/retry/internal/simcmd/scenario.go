package simcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry/cmd/retry/internal/chart"
	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// simScenario runs every policy (or those pick names) through s, one of the
// outage-style scenarios, and prints and writes the results.
func simScenario(ctx context.Context, std cli.Stdio, progress *progress, s sim.Scenario, jsonPath, svgPath, pick string) int {
	policies, err := pickPolicies(sim.Policies(), pick)
	if err != nil {
		return cli.UsageError(std.Err, "sim", err.Error())
	}
	results, err := simulate(progress, policies, func(p sim.Policy, report func(float64)) (sim.Result, error) {
		return sim.RunWithProgress(ctx, s, p, report)
	})
	if err != nil {
		return interrupted(ctx, std)
	}
	if jsonPath != "-" { // with --json -, stdout is the JSON's alone
		fmt.Fprintln(std.Out, s.Describe())
		fmt.Fprintln(std.Out)
		printResults(std.Out, s, results)
	}
	if err := writeOutputs(std, s, results, jsonPath, svgPath); err != nil {
		fmt.Fprintln(std.Err, "retry sim:", err)
		return 1
	}
	return 0
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

func writeOutputs(std cli.Stdio, s sim.Scenario, results []sim.Result, jsonPath, svgPath string) error {
	if jsonPath != "" {
		doc := simJSON{Scenario: s}
		for _, r := range results {
			doc.Results = append(doc.Results, resultJSON{r, r.Amplification(), r.IncidentAmplification(), r.SuccessRate()})
		}
		if err := writeJSON(std.Out, jsonPath, doc); err != nil {
			return err
		}
	}
	if svgPath != "" {
		server := fmt.Sprintf("a server of capacity %.0f/s", s.Capacity)
		if s.Replicas > 0 {
			server = s.ReplicaSet()
		}
		title := fmt.Sprintf("%s: from %s to %s %s", s.Kind, formatDuration(s.Start), formatDuration(s.End), s.Incident())
		subtitle := fmt.Sprintf("%d clients send %.0f req/s to %s and wait %v for each answer; one panel per retry policy",
			s.Clients, s.Rate, server, s.Timeout)
		return writeRunChart(std, svgPath, title, subtitle, s.Start, s.End, s.Capacity, results, func(r sim.Result) (chart.Series, float64) {
			return chart.Series{Name: r.Policy, Offered: r.Offered, Goodput: r.Goodput}, r.Step
		})
	}
	return nil
}
