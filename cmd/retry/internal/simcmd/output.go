package simcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/chart"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// writeRunChart draws the chart of a run to path, as writeChart does:
// under title and subtitle, one panel per result, with the series and the
// seconds per point that panel returns for it, the incident from start to
// end shaded, and the server's capacity dashed. Every scenario's chart is
// set up here, so that they all read the same.
func writeRunChart[R any](std cli.Stdio, path, title, subtitle string, start, end time.Duration, capacity float64, results []R, panel func(R) (chart.Series, float64)) error {
	c := chart.Chart{
		Title:    title,
		Subtitle: subtitle,
		Step:     1,
		Incident: [2]float64{start.Seconds(), end.Seconds()},
		Capacity: capacity,
	}
	for _, r := range results {
		s, step := panel(r)
		c.Step = step
		c.Series = append(c.Series, s)
	}
	return writeChart(std, path, c)
}

// writeChart draws c, one panel per series, into the file at path (an SVG,
// or a PNG if path ends in .png), or as an SVG to stdout if path is "-",
// and says where.
func writeChart(std cli.Stdio, path string, c chart.Chart) error {
	var buf bytes.Buffer
	write := chart.WriteSVG
	if strings.HasSuffix(strings.ToLower(path), ".png") {
		write = chart.WritePNG // for a quick look where no SVG viewer is at hand
	}
	if err := write(&buf, c); err != nil {
		return fmt.Errorf("drawing the chart: %w", err)
	}
	if path == "-" {
		out := std.Out
		if r, ok := out.(chartStdout); ok {
			out = r.stdout
		}
		_, err := out.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(std.Err, "retry sim: chart written to", path)
	return nil
}

// chartStdout is the standard output of a run with --svg -, which is the
// chart's alone, so that "retry sim --svg - > chart.svg" writes an SVG:
// what else the run writes there, its table, goes to w, standard error,
// and writeChart writes the chart to stdout.
type chartStdout struct {
	w      io.Writer // where the table goes
	stdout io.Writer
}

func (c chartStdout) Write(p []byte) (int, error) { return c.w.Write(p) }

// reserveStdout returns std for a run whose chart goes to stdout.
func reserveStdout(std cli.Stdio) cli.Stdio {
	std.Out = chartStdout{w: std.Err, stdout: std.Out}
	return std
}

// checkChartPath returns why --svg cannot write a chart at path: its
// extension names a format it does not write.
func checkChartPath(path string) error {
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case path == "" || path == "-" || ext == ".svg" || ext == ".png":
		return nil
	default:
		return fmt.Errorf("--svg %s: a chart is written as SVG (a FILE ending in .svg, or - for stdout) or PNG (.png), not %q", path, ext)
	}
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
