package simcmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/sim"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// heavyVar names the environment variable that turns on the simulations
// too long for the README's test command (CI sets it; so can anyone).
const heavyVar = "RETRYKIT_HEAVY"

// heavy skips t, which does what, unless RETRYKIT_HEAVY is set to 1.
func heavy(t *testing.T, what string) {
	t.Helper()
	if os.Getenv(heavyVar) != "1" {
		t.Skipf("%s: set %s=1 to run it (CI does)", what, heavyVar)
	}
}

// peakMemory runs the built command with args and returns the most memory
// it held at once (its peak resident set), in bytes, and what it printed.
func peakMemory(t *testing.T, args ...string) (int64, string) {
	t.Helper()
	// A bound only against a hang: a loaded machine running two other test
	// binaries took the big run past 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, clitest.Bin(), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("retry %q: %v\n%s", args, err, errOut.String())
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024, out.String() // Linux counts in KiB
}

// A big run holds the requests in flight, not every request it simulates,
// and a request in flight takes a few dozen bytes. The policies that hold
// most are the two that retry for a minute or more: in the run of 6
// million requests (--rate 100000 for the default minute) each keeps 5
// million requests retrying at once to the end. Both, one after the other,
// must fit in 200 MB. (The other rows hold far fewer; the whole run's peak is
// these rows'.) The run takes a minute or more: it runs when RETRYKIT_HEAVY
// is set, as CI sets it.
func TestSimBigRunMemory(t *testing.T) {
	heavy(t, "a run of 6 million requests, a minute or more")
	const limit = 200e6
	peak, out := peakMemory(t, "sim", "--quiet", "--rate", "100000",
		"--policies", "retry-go,cenkalti")
	if n := len(regexp.MustCompile(`(?m) 5000000 `).FindAllString(out, -1)); n != 2 {
		t.Fatalf("want both rows to end with 5 million requests in flight:\n%s", out)
	}
	if peak > limit {
		t.Errorf("a run of 6 million requests, 5 million in flight, took %.0f MB; want under %.0f", float64(peak)/1e6, limit/1e6)
	}
	t.Logf("peak memory: %.0f MB", float64(peak)/1e6)
}

// What the layered run's guard counts covers what the run holds, with many
// clients (each a strategy at every tier), short timeouts (retries whose
// backoffs do not shrink with them) and the README's case.
func TestSimLayersMemoryWithinFootprint(t *testing.T) {
	heavy(t, "four layered runs of up to 20,000 clients, about 15 s")
	base, _ := peakMemory(t, "sim", "--quiet", "--policies", "no retries")
	for _, tc := range []struct {
		rate, clients int
		duration      time.Duration
		timeout       time.Duration
	}{
		{10000, 20000, 2 * time.Second, time.Millisecond},
		{1000, 4000, 4 * time.Second, time.Second},
		{20000, 100, 4 * time.Second, time.Second},
	} {
		s := sim.DefaultLayers(tc.clients, float64(tc.rate), tc.duration, 1)
		s.Timeout = tc.timeout
		peak, _ := peakMemory(t, "sim", "--quiet", "--scenario", "layers", "--rate", fmt.Sprint(tc.rate),
			"--clients", fmt.Sprint(tc.clients), "--duration", tc.duration.String(), "--timeout", tc.timeout.String())
		if grown := float64(peak - base); grown > s.Footprint() {
			t.Errorf("%+v: the run took %.0f MB more than a small one; the guard counts %.0f MB", tc, grown/1e6, s.Footprint()/1e6)
		}
	}
}

// A fleet of many clients, each with a strategy of its own, costs memory of
// its own, which the guard counts beside the requests.
func TestSimClientsMemoryWithinGuard(t *testing.T) {
	base, _ := peakMemory(t, "sim", "--quiet", "--policies", "no retries")
	const clients, rate, seconds = 100000, 50000, 2
	peak, _ := peakMemory(t, "sim", "--quiet", "--clients", fmt.Sprint(clients), "--rate", fmt.Sprint(rate),
		"--duration", fmt.Sprint(seconds), "--policies", "Adaptive (default), per,Standard, quota per")
	guard := float64(rate*seconds*sim.BytesPerRequest + clients*sim.BytesPerClient)
	if grown := float64(peak - base); grown > guard {
		t.Errorf("%d clients, %d requests: the run took %.0f MB more than a small one; the guard counts %.0f MB",
			clients, rate*seconds, grown/1e6, guard/1e6)
	}
}

// The fleet rows give each client a process's side of a store and a timer
// of its own besides its strategy: the guard counts them too.
func TestSimFleetClientsMemoryWithinGuard(t *testing.T) {
	heavy(t, "two runs of 100,000 clients sharing a store, about 25 s")
	base, _ := peakMemory(t, "sim", "--quiet", "--policies", "no retries")
	const clients, rate, seconds = 100000, 50000, 2
	peak, _ := peakMemory(t, "sim", "--quiet", "--clients", fmt.Sprint(clients), "--rate", fmt.Sprint(rate),
		"--duration", fmt.Sprint(seconds), "--policies", "fleet-shared, 1s,fleet breaker, 1s")
	guard := float64(rate*seconds*sim.BytesPerRequest + clients*sim.BytesPerClient)
	if grown := float64(peak - base); grown > guard {
		t.Errorf("%d clients, %d requests: the run took %.0f MB more than a small one; the guard counts %.0f MB",
			clients, rate*seconds, grown/1e6, guard/1e6)
	}
}
