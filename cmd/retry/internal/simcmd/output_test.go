package simcmd

import (
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"

	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
)

// --svg - writes the SVG to stdout, alone (the table goes to stderr), as
// --json - does the JSON; a name whose extension is neither .svg nor .png is
// refused before the run, rather than given an SVG it does not name.
func TestSimSVGToStdout(t *testing.T) {
	t.Parallel()
	out, errOut, code := clitest.Run(t, "", simArgs("--policies", "no retries", "--svg", "-")...)
	if code != 0 || !strings.HasPrefix(out, "<?xml") || !strings.HasSuffix(strings.TrimSpace(out), "</svg>") {
		t.Errorf("--svg -: exit %d, stdout starts %.40q and ends %.40q, want an SVG alone; stderr:\n%s", code, out, out[max(len(out)-40, 0):], errOut)
	}
	if !strings.Contains(errOut, "amplification") {
		t.Errorf("--svg -: stderr %q, want the table there", errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--svg", "chart.jpg"}, ".svg"},
		{[]string{"--svg", "chart"}, ".png"},
		{[]string{"--svg", "-", "--json", "-"}, "both want stdout"},
	} {
		if _, errOut, code := clitest.Run(t, "", simArgs(tc.args...)...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestSimSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if _, errOut, code := clitest.Run(t, "", simArgs("--svg", path)...); code != 0 {
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
	if _, errOut, code := clitest.Run(t, "", simArgs("--svg", png, "--scenario", "throttle")...); code != 0 {
		t.Fatalf("--svg chart.png: exit %d: %s", code, errOut)
	}
	if data, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG\r\n")) {
		t.Fatalf("--svg chart.png did not write a PNG: %v, %.8q", err, data)
	}
}

// --json - puts the JSON alone on stdout, for every scenario, and occ's
// names its scenario.
func TestSimJSONToStdout(t *testing.T) {
	for _, args := range [][]string{simArgs("--json", "-"), {"sim", "--scenario", "occ", "--clients", "20", "--json", "-"}} {
		out, errOut, code := clitest.Run(t, "", args...)
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
		out, errOut, code := clitest.Run(t, "", args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 2 {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %q; want 2, no table, one line and a pointer to -h", args, code, out, errOut)
		}
	}
}
