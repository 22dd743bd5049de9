//go:build unix

package runcmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

func TestSignalSeries(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	term, intr := syscall.SIGTERM, syscall.SIGINT
	type sent struct {
		sig   syscall.Signal
		after time.Duration // since t0
	}
	for _, tc := range []struct {
		name   string
		series []sent
		want   []bool // second?
	}{
		{"one", []sent{{term, 0}}, []bool{false}},
		{"a copy at once", []sent{{term, 0}, {term, 0}}, []bool{false, false}},
		{"a copy just inside the window", []sent{{term, 0}, {term, copyWindow - 1}}, []bool{false, false}},
		{"the same signal later", []sent{{term, 0}, {term, copyWindow}}, []bool{false, true}},
		{"another signal at once", []sent{{term, 0}, {intr, 0}}, []bool{false, true}},
		{"a copy, then a second", []sent{{intr, 0}, {intr, time.Millisecond}, {intr, time.Second}}, []bool{false, false, true}},
		// Once a second signal came, every one is: retry is on its way out.
		{"after a second", []sent{{term, 0}, {intr, 0}, {term, time.Millisecond}}, []bool{false, true, true}},
	} {
		var s signalSeries
		for i, sig := range tc.series {
			if got := s.add(sig.sig, t0.Add(sig.after)); got != tc.want[i] {
				t.Errorf("%s: signal %d (%s after %v): second %v, want %v", tc.name, i+1, cli.SignalName(sig.sig), sig.after, got, tc.want[i])
			}
		}
	}
}

// lingerer returns a shell script that writes its pid to a file, started,
// starts a process that ignores SIGTERM, writing its pid to another, kids,
// and appends a line to a third, got, for each SIGTERM it gets, which it
// catches, to run on until it is killed.
func lingerer(t *testing.T) (script, started, kids, got string) {
	t.Helper()
	dir := t.TempDir()
	started, kids, got = filepath.Join(dir, "started"), filepath.Join(dir, "kids"), filepath.Join(dir, "got")
	// A trapped signal ends the wait builtin at once, so the trap runs as
	// soon as the signal comes, and the loop waits again.
	script = fmt.Sprintf(`trap "echo TERM >> '%[3]s'" TERM; (trap "" TERM; exec sleep 100) & echo $! > '%[2]s'; `+
		`echo $$ > '%[1]s'; while :; do wait $!; done`, started, kids, got)
	t.Cleanup(func() { killStarted(t, started); killStarted(t, kids) })
	return script, started, kids, got
}

// checkGone fails the test unless the processes whose pids the files hold
// are gone, waiting for them a while: a process that SIGKILL was sent to
// may take a moment to go.
func checkGone(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		for _, p := range lines(t, f) {
			pid, _ := strconv.Atoi(p)
			for deadline := time.Now().Add(10 * time.Second); !gone(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if !gone(pid) {
				t.Errorf("process %d of the attempt outlived retry", pid)
			}
		}
	}
}

// TestRunGroupKillCopyIsNotASecondSignal: timeout(1), and supervisors like
// it, send a signal to retry and then to its process group, which reaches
// retry again. The copy does not end retry at once, leaving the attempt's
// processes behind: retry waits for --kill-after, kills them and exits
// 128+9, as after one signal. The copy is sent once retry has passed the
// first on, so that neither the kernel nor Go's runtime can merge the two
// into one, as they most often do for timeout's.
func TestRunGroupKillCopyIsNotASecondSignal(t *testing.T) {
	t.Parallel()
	script, started, kids, got := lingerer(t)
	cmd, errOut := startNoTerminal(t, runArgs([]string{"--kill-after", "500ms"}, "sh", "-c", script)...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 && len(lines(t, kids)) > 0 })
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	for len(lines(t, got)) == 0 && time.Since(first) < 20*time.Second {
		// The shell's line in a file is the only sign that it caught the
		// signal: poll, and not at waitFor's 10ms, as the copy is to come
		// soon after.
		time.Sleep(time.Millisecond)
	}
	// retry leads its group (startNoTerminal), as timeout does; the
	// attempt has its own.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	gap := time.Since(first)
	code := clitest.WaitExit(t, cmd)
	checkGone(t, started, kids)
	if gap >= copyWindow/2 {
		// The machine was too slow for the copy to come as a copy does;
		// it was a second signal, and retry killed the attempt at once.
		t.Logf("the copy followed the first signal after %v, not within %v: not checking that retry waited", gap, copyWindow/2)
		return
	}
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d (%v), want %d: the attempt killed after --kill-after; stderr:\n%s", code, cmd.ProcessState, 128+int(syscall.SIGKILL), errOut)
	}
	if strings.Contains(errOut.String(), "second") {
		t.Errorf("stderr %q: the copy was taken for a second signal", errOut)
	}
}

// TestRunUnderTimeout: timeout(1) itself, as people run retry under it.
// Whether its two signals come as one or two, retry kills its attempt after
// --kill-after and exits with the attempt's status, which timeout
// --preserve-status passes on. A regression shows in about one run in ten.
func TestRunUnderTimeout(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1) here")
	}
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			script, started, kids, _ := lingerer(t)
			// "timeout 1": a second for the attempt to start, even on a
			// busy machine; the test is skipped if it had not.
			args := append([]string{"--preserve-status", "-s", "TERM", "1", clitest.Bin()}, runArgs([]string{"--kill-after", "300ms"}, "sh", "-c", script)...)
			output := clitest.FileText(filepath.Join(t.TempDir(), "output"))
			f, err := os.Create(string(output))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// A file, not a pipe, which processes left behind would hold open.
			cmd := exec.Command("timeout", args...)
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			code := clitest.WaitExit(t, cmd)
			if len(lines(t, started)) == 0 {
				t.Skipf("the command had not started when timeout signalled; output:\n%s", output)
			}
			if code != 128+int(syscall.SIGKILL) {
				t.Errorf("exit status %d, want %d: the attempt killed after --kill-after; output:\n%s", code, 128+int(syscall.SIGKILL), output)
			}
			checkGone(t, started, kids)
		})
	}
}
