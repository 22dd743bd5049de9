package simcmd

import (
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

func TestSimOCC(t *testing.T) {
	out, errOut, code := clitest.Run(t, "", "sim", "--scenario", "occ", "--clients", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"no jitter", "full jitter", "equal jitter", "decorrelated jitter", "calls per client"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
