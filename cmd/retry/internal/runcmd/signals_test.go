//go:build unix

package runcmd

import (
	"bytes"
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

// startNoTerminal is startRetry, but retry runs in a session of its own,
// without a controlling terminal, however the tests are run: no terminal
// sends it or its command anything, and it passes every signal on. Its
// stderr goes to a file, so that a command that outlives it does not hold
// up Wait.
func startNoTerminal(t *testing.T, args ...string) (*exec.Cmd, clitest.FileText) {
	t.Helper()
	errOut := clitest.FileText(filepath.Join(t.TempDir(), "stderr"))
	f, err := os.Create(string(errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(clitest.Bin(), args...)
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
}

// trapper returns a shell script that writes its pid to a file, started, and
// appends a line to another, got, for every signal sig it receives. With
// exit, it exits 128+sig half a second after the first (time for a second
// to arrive and be counted); without, it runs until it is killed.
func trapper(t *testing.T, sig syscall.Signal, exit bool) (script, started, got string) {
	t.Helper()
	dir := t.TempDir()
	started, got = filepath.Join(dir, "started"), filepath.Join(dir, "got")
	name := strings.TrimPrefix(cli.SignalName(sig), "SIG")
	script = fmt.Sprintf(`trap "echo %[1]s >> '%[2]s'" %[1]s; echo $$ >> '%[3]s'; `, name, got, started)
	if exit {
		script += fmt.Sprintf(`while [ ! -s '%s' ]; do sleep 0.05; done; sleep 0.5; exit %d`, got, 128+int(sig))
	} else {
		script += `while :; do sleep 0.05; done`
	}
	return script, started, got
}

// killStarted kills the processes whose pids are in the file started.
func killStarted(t *testing.T, started string) {
	for _, p := range lines(t, started) {
		if pid, _ := strconv.Atoi(p); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// signalledBy returns the signal that killed cmd, or 0.
func signalledBy(cmd *exec.Cmd) syscall.Signal {
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// TestRunForwardsSignals: without a terminal, retry is where a signal comes,
// and the command gets it from retry, once.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		name := cli.SignalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			script, started, got := trapper(t, sig, true)
			cmd, errOut := startNoTerminal(t, runArgs([]string{"--attempts", "5"}, "sh", "-c", script)...)
			clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := clitest.WaitExit(t, cmd)
			if code != 128+int(sig) {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, 128+int(sig), errOut)
			}
			if got := lines(t, got); len(got) != 1 {
				t.Errorf("the command caught %s %d times, want once", name, len(got))
			}
			if n := len(lines(t, started)); n != 1 {
				t.Errorf("%d attempts, want 1: a signal ends the run", n)
			}
			if want := "retry: stopped by " + name + " during attempt 1"; !strings.Contains(errOut.String(), want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
		})
	}
}

// TestRunSecondSignalKillsTheAttempt: a second signal, one that is not the
// first's copy, ends retry at once, though the command ignores the first:
// retry kills the attempt's processes, and then itself with the signal.
func TestRunSecondSignalKillsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		name := cli.SignalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			script, started, got := trapper(t, sig, false)
			t.Cleanup(func() { killStarted(t, started) })
			cmd, errOut := startNoTerminal(t, runArgs([]string{"--kill-after", "30s"}, "sh", "-c", script)...)
			clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			clitest.WaitFor(t, "the command to catch the first signal", func() bool { return len(lines(t, got)) > 0 })
			// Past the window in which the same signal is the first's copy: a real
			// wait, as the window runs on retry's clock, in another process. retry
			// stamps the first signal before the command can catch it, but on a
			// goroutine of its own that shows no sign of it: the 300 ms are for that
			// goroutine to have run.
			time.Sleep(copyWindow + 300*time.Millisecond)
			// Not cmd.ProcessState, which only cmd.Wait sets.
			if exitedUnwaited(cmd.Process.Pid) {
				t.Fatal("retry exited on the first signal, though the command runs on")
			}
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			clitest.WaitExit(t, cmd)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("retry took %s to exit after the second signal", elapsed)
			}
			// A second SIGQUIT ends retry with its status, not Go's dump of
			// its goroutines.
			if s := signalledBy(cmd); s != sig && (sig != syscall.SIGQUIT || cmd.ProcessState.ExitCode() != 128+int(sig)) {
				t.Errorf("retry ended with %v, want to be killed by %s; stderr:\n%s", cmd.ProcessState, name, errOut)
			}
			checkGone(t, started)
			if want := "retry: second " + name + ": killed sh (pid "; !strings.Contains(errOut.String(), want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
		})
	}
}

// TestRunKeepsSIGHUPIgnored: under nohup, retry and its command ignore
// SIGHUP: retry does not listen for it, which would undo that.
func TestRunKeepsSIGHUPIgnored(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	nohup := []string{"-c", `trap "" HUP; exec "$0" "$@"`, clitest.Bin()}
	args := runArgs([]string{"--attempts", "1"}, "sh", "-c", fmt.Sprintf(`echo $$ >> '%s'; while :; do sleep 0.05; done`, pids))
	cmd := exec.Command("sh", append(nohup, args...)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); killStarted(t, pids) })
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, pids)) > 0 })
	child, _ := strconv.Atoi(lines(t, pids)[0])
	for _, pid := range []int{cmd.Process.Pid, child} {
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel discards a signal sent to a process that ignores it: what
	// shows that nothing comes of the SIGHUPs is that both ignore it (where
	// /proc tells), and that retry, which would hear a SIGHUP before the
	// SIGTERM sent after it, says nothing of it.
	for _, pid := range []int{cmd.Process.Pid, child} {
		if ignored, ok := ignores(pid, syscall.SIGHUP); ok && !ignored {
			t.Errorf("process %d (retry %d, its command %d) does not ignore SIGHUP, though it was started with it ignored", pid, cmd.Process.Pid, child)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := clitest.WaitExit(t, cmd); code != 128+int(syscall.SIGTERM) || strings.Contains(errOut.String(), "SIGHUP") {
		t.Errorf("exit status %d after SIGHUP, then SIGTERM: want %d, stopped by SIGTERM alone; stderr:\n%s", code, 128+int(syscall.SIGTERM), errOut.String())
	}
}

func TestRunSignalKillsACommandThatIgnoresIt(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	cmd, errOut := clitest.Start(t, runArgs([]string{"--kill-after", "200ms"},
		"sh", "-c", fmt.Sprintf(`trap "" TERM; echo $$ >> '%s'; exec sleep 30`, pids))...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, pids)) > 0 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := clitest.WaitExit(t, cmd); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGKILL), errOut)
	}
	got := lines(t, pids)
	if len(got) != 1 {
		t.Errorf("%d attempts, want 1", len(got))
	}
	for _, p := range got {
		if pid, _ := strconv.Atoi(p); !gone(pid) {
			t.Errorf("process %d is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestRunSignalDuringTheWaitEndsTheRun(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "1")
	cmd, errOut := clitest.Start(t, "run", "--delay", "30s", "--jitter", "none", "--", "sh", "-c", script)
	errOut.Await(t, "retry: attempt 1/3 failed: exit status 1; next in ") // the wait begins
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := clitest.WaitExit(t, cmd)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("took %s to stop", elapsed)
	}
	if code != 128+int(syscall.SIGINT) {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGINT), errOut)
	}
	if n := count(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	if !strings.Contains(errOut.String(), "retry: stopped by SIGINT") {
		t.Errorf("stderr %q does not say it was stopped by SIGINT", errOut)
	}
}
