package main

import (
	"strings"
	"testing"
)

// --svg - writes the SVG to stdout, alone (the table goes to stderr), as
// --json - does the JSON; a name whose extension is neither .svg nor .png is
// refused before the run, rather than given an SVG it does not name.
func TestSimSVGToStdout(t *testing.T) {
	t.Parallel()
	out, errOut, code := runRetry(t, "", simArgs("--policies", "no retries", "--svg", "-")...)
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
		if _, errOut, code := runRetry(t, "", simArgs(tc.args...)...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
