//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fast keeps the waits between attempts tiny.
var fast = []string{"--delay", "1ms", "--max-delay", "5ms"}

// runArgs is "run", the fast flags, extra flags, "--" and the command.
func runArgs(flags []string, command ...string) []string {
	args := append([]string{"run"}, fast...)
	args = append(args, flags...)
	return append(append(args, "--"), command...)
}

// counter returns a shell script that counts its runs in a file in dir,
// prints "attempt N" on stdout and "warning N" on stderr, and exits with
// the status status(N) says, as shell arithmetic on $n. It also returns
// a function that reads the count.
func counter(t *testing.T, status string) (script string, count func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "count")
	script = fmt.Sprintf(`n=$(cat '%[1]s' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '%[1]s'; `+
		`echo "attempt $n"; echo "warning $n" >&2; exit $((%[2]s))`, file, status)
	count = func() int {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return 0 // being written
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("count file: %v", err)
		}
		return n
	}
	return script, count
}

// lines returns the lines of the file at path, none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func TestRunSucceedsAfterFailures(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n < 3 ? 1 : 0") // fails twice, then succeeds
	out, errOut, code := runRetry(t, "", runArgs(nil, "sh", "-c", script)...)
	if code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if want := "attempt 1\nattempt 2\nattempt 3\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	// The command's own stderr, and a line from retry for each retried
	// failure; the delay is jittered.
	want := regexp.MustCompile(`^warning 1\nretry: attempt 1/3 failed: exit status 1; next in [0-9.]+(µs|ms|s)\n` +
		`warning 2\nretry: attempt 2/3 failed: exit status 1; next in [0-9.]+(µs|ms|s)\nwarning 3\n$`)
	if !want.MatchString(errOut) {
		t.Errorf("stderr %q, want it to match %s", errOut, want)
	}
}

// --quiet leaves the command's stderr alone, without lines from retry.
func TestRunQuietLeavesTheCommandsStderr(t *testing.T) {
	t.Parallel()
	script, _ := counter(t, "n < 3 ? 1 : 0")
	_, errOut, code := runRetry(t, "", runArgs([]string{"-q"}, "sh", "-c", script)...)
	if want := "warning 1\nwarning 2\nwarning 3\n"; code != 0 || errOut != want {
		t.Errorf("exit status %d, stderr %q; want 0 and the command's own %q", code, errOut, want)
	}
}

func TestRunExitStatusIsTheLastAttempts(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n + 10") // 11, 12, 13
	_, errOut, code := runRetry(t, "", runArgs(nil, "sh", "-c", script)...)
	if code != 13 {
		t.Errorf("exit status %d, want 13, the last attempt's", code)
	}
	if n := count(); n != 3 {
		t.Errorf("%d attempts, want the default 3", n)
	}
	if want := "retry: giving up after 3 attempts: exit status 13\n"; !strings.HasSuffix(errOut, want) {
		t.Errorf("stderr %q, want it to end with %q", errOut, want)
	}
}

func TestRunAttempts(t *testing.T) {
	t.Parallel()
	for _, attempts := range []int{1, 2, 5} {
		t.Run(strconv.Itoa(attempts), func(t *testing.T) {
			t.Parallel()
			script, count := counter(t, "1")
			_, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", strconv.Itoa(attempts)}, "sh", "-c", script)...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if n := count(); n != attempts {
				t.Errorf("%d attempts, want %d", n, attempts)
			}
			want := fmt.Sprintf("retry: giving up after %d attempts: exit status 1\n", attempts)
			if attempts == 1 {
				want = "retry: giving up after 1 attempt: exit status 1\n"
			}
			if !strings.HasSuffix(errOut, want) {
				t.Errorf("stderr %q, want it to end with %q", errOut, want)
			}
		})
	}
}

func TestRunOnExit(t *testing.T) {
	t.Parallel()
	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "3")
		_, errOut, code := runRetry(t, "", runArgs([]string{"--on-exit", "3"}, "sh", "-c", script)...)
		if code != 3 || count() != 3 {
			t.Errorf("exit status %d after %d attempts, want 3 after 3; stderr:\n%s", code, count(), errOut)
		}
	})
	t.Run("not retried", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "4")
		_, errOut, code := runRetry(t, "", runArgs([]string{"--on-exit", "3", "--on-exit", "5,6"}, "sh", "-c", script)...)
		if code != 4 || count() != 1 {
			t.Errorf("exit status %d after %d attempts, want 4 after 1", code, count())
		}
		if want := "retry: exit status 4 is not retried (--on-exit 3,5,6)\n"; !strings.HasSuffix(errOut, want) {
			t.Errorf("stderr %q, want it to end with %q", errOut, want)
		}
	})
	t.Run("success after a retried status", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "n == 1 ? 75 : 0")
		_, errOut, code := runRetry(t, "", runArgs([]string{"--on-exit", "75"}, "sh", "-c", script)...)
		if code != 0 || count() != 2 {
			t.Errorf("exit status %d after %d attempts, want 0 after 2; stderr:\n%s", code, count(), errOut)
		}
	})
}

func TestRunCommandCannotBeExecuted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{write("not-executable", "#!/bin/sh\nexit 0\n", 0o644), 126, "permission denied"},
		{write("garbage", "\x00\x01\x02\xfegarbage\n", 0o755), 126, "exec format error"},
		{dir, 126, "permission denied"},
		{write("bad-interpreter", "#!/retry-no-such-interpreter\n", 0o755), 127, "the interpreter named on its #! line"},
	} {
		_, errOut, code := runRetry(t, "", runArgs(nil, tc.path)...)
		if code != tc.code {
			t.Errorf("%s: exit status %d, want %d; stderr:\n%s", filepath.Base(tc.path), code, tc.code, errOut)
		}
		if want := fmt.Sprintf("retry: cannot run %q: ", tc.path); !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: stderr %q, want %q and %q", filepath.Base(tc.path), errOut, want, tc.want)
		}
	}

	// A file in $PATH that is not executable: a shell says "permission
	// denied", 126, where exec.LookPath says "not found".
	write("retry-test-not-executable", "#!/bin/sh\nexit 0\n", 0o644)
	cmd := exec.Command(retryBin, runArgs(nil, "retry-test-not-executable")...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 126 {
		t.Errorf("in $PATH: exit status %d, want 126; stderr:\n%s", code, errOut.String())
	}
	if want := "is not executable (permission denied)"; !strings.Contains(errOut.String(), want) {
		t.Errorf("in $PATH: stderr %q does not say %q", errOut.String(), want)
	}
}

func TestRunCommandNotFound(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"retry-no-such-command", "./retry-no-such-command"} {
		_, errOut, code := runRetry(t, "", runArgs(nil, name, "arg")...)
		if code != 127 {
			t.Errorf("%s: exit status %d, want 127", name, code)
		}
		if !strings.Contains(errOut, `cannot run "`+name+`"`) {
			t.Errorf("%s: stderr %q does not say the command cannot be run", name, errOut)
		}
	}
}

// gone reports whether no process has the given pid.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestRunTimeoutStopsAndRetriesAHangingAttempt(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	start := time.Now()
	_, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", "2", "--timeout", "500ms"},
		"sh", "-c", fmt.Sprintf("echo $$ >> '%s'; exec sleep 30", pids))...)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("took %s: the hanging attempts were not stopped", elapsed)
	}
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d (SIGTERM)", code, 128+int(syscall.SIGTERM))
	}
	got := lines(t, pids)
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2", len(got))
	}
	for _, p := range got {
		pid, _ := strconv.Atoi(p)
		if !gone(pid) {
			t.Errorf("process %d of a timed-out attempt is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if want := "retry: giving up after 2 attempts: timed out after 500ms, killed by SIGTERM (status 143)\n"; !strings.HasSuffix(errOut, want) {
		t.Errorf("stderr %q, want it to end with %q", errOut, want)
	}
}

func TestRunTimeoutKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	start := time.Now()
	_, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", "1", "--timeout", "500ms", "--kill-after", "300ms"},
		"sh", "-c", fmt.Sprintf(`trap "" TERM; echo $$ >> '%s'; exec sleep 30`, pids))...)
	elapsed := time.Since(start)
	if elapsed < 800*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("took %s, want the timeout and the grace, 800ms, and not much more", elapsed)
	}
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d, want %d (SIGKILL)", code, 128+int(syscall.SIGKILL))
	}
	for _, p := range lines(t, pids) {
		if pid, _ := strconv.Atoi(p); !gone(pid) {
			t.Errorf("process %d is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if !strings.Contains(errOut, "killed by SIGKILL") {
		t.Errorf("stderr %q does not say the command was killed by SIGKILL", errOut)
	}
}

// startNoTerminal is startRetry, but retry runs in a session of its own,
// without a controlling terminal, however the tests are run: no terminal
// sends it or its command anything, and it passes every signal on. Its
// stderr goes to a file, so that a command that outlives it does not hold
// up Wait.
func startNoTerminal(t *testing.T, args ...string) (*exec.Cmd, fileText) {
	t.Helper()
	errOut := fileText(filepath.Join(t.TempDir(), "stderr"))
	f, err := os.Create(string(errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(retryBin, args...)
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
}

// fileText is a file whose String is its content.
type fileText string

func (f fileText) String() string {
	data, _ := os.ReadFile(string(f))
	return string(data)
}

// trapper returns a shell script that writes its pid to a file, started, and
// appends a line to another, got, for every signal sig it receives. With
// exit, it exits 128+sig half a second after the first (time for a second
// to arrive and be counted); without, it runs until it is killed.
func trapper(t *testing.T, sig syscall.Signal, exit bool) (script, started, got string) {
	t.Helper()
	dir := t.TempDir()
	started, got = filepath.Join(dir, "started"), filepath.Join(dir, "got")
	name := strings.TrimPrefix(signalName(sig), "SIG")
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
		name := signalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			script, started, got := trapper(t, sig, true)
			cmd, errOut := startNoTerminal(t, runArgs([]string{"--attempts", "5"}, "sh", "-c", script)...)
			waitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd)
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

// TestRunSecondSignalEndsRetry: a second signal is passed on too, and ends
// retry at once, though the command is still running.
func TestRunSecondSignalEndsRetry(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		name := signalName(sig)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			script, started, got := trapper(t, sig, false)
			t.Cleanup(func() { killStarted(t, started) })
			cmd, errOut := startNoTerminal(t, runArgs([]string{"--kill-after", "30s"}, "sh", "-c", script)...)
			waitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the command to catch the first signal", func() bool { return len(lines(t, got)) > 0 })
			time.Sleep(100 * time.Millisecond)
			if cmd.ProcessState != nil {
				t.Fatal("retry exited on the first signal, though the command runs on")
			}
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("retry took %s to exit after the second signal", elapsed)
			}
			// A second SIGQUIT ends retry with its status, not Go's dump of
			// its goroutines.
			if s := signalledBy(cmd); s != sig && (sig != syscall.SIGQUIT || cmd.ProcessState.ExitCode() != 128+int(sig)) {
				t.Errorf("retry ended with %v, want to be killed by %s; stderr:\n%s", cmd.ProcessState, name, errOut)
			}
			waitFor(t, "the command to catch the second signal", func() bool { return len(lines(t, got)) >= 2 })
			time.Sleep(100 * time.Millisecond)
			if n := len(lines(t, got)); n != 2 {
				t.Errorf("the command caught %s %d times, want twice", name, n)
			}
			if want := "retry: second " + name + ": not waiting for sh (pid "; !strings.Contains(errOut.String(), want) {
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
	nohup := []string{"-c", `trap "" HUP; exec "$0" "$@"`, retryBin}
	args := runArgs([]string{"--attempts", "1"}, "sh", "-c", fmt.Sprintf(`echo $$ >> '%s'; while :; do sleep 0.05; done`, pids))
	cmd := exec.Command("sh", append(nohup, args...)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); killStarted(t, pids) })
	waitFor(t, "the command to start", func() bool { return len(lines(t, pids)) > 0 })
	child, _ := strconv.Atoi(lines(t, pids)[0])
	for _, pid := range []int{cmd.Process.Pid, child} {
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if cmd.ProcessState != nil || gone(child) {
		t.Fatalf("SIGHUP ended retry or its command, which were started with it ignored; stderr:\n%s", errOut.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d after SIGTERM, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), errOut.String())
	}
}

func TestRunSignalKillsACommandThatIgnoresIt(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	cmd, errOut := startRetry(t, runArgs([]string{"--kill-after", "200ms"},
		"sh", "-c", fmt.Sprintf(`trap "" TERM; echo $$ >> '%s'; exec sleep 30`, pids))...)
	waitFor(t, "the command to start", func() bool { return len(lines(t, pids)) > 0 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 128+int(syscall.SIGKILL) {
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
	cmd, errOut := startRetry(t, "run", "--delay", "30s", "--jitter", "none", "--", "sh", "-c", script)
	waitFor(t, "the first attempt", func() bool { return count() > 0 })
	time.Sleep(50 * time.Millisecond) // let the attempt end and the wait begin
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd)
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

func TestRunPassesStdinThrough(t *testing.T) {
	t.Parallel()
	out, errOut, code := runRetry(t, "hello\n", "run", "--", "cat")
	if code != 0 || out != "hello\n" {
		t.Errorf("echo hello | retry run -- cat: exit status %d, stdout %q; stderr:\n%s", code, out, errOut)
	}
}

func TestRunSharesStdinBetweenAttempts(t *testing.T) {
	t.Parallel()
	// Each attempt reads one line; the second finds the line the first left.
	script := `read line; echo "got $line"; [ "$line" = two ]`
	out, errOut, code := runRetry(t, "one\ntwo\nthree\n", runArgs(nil, "sh", "-c", script)...)
	if code != 0 || out != "got one\ngot two\n" {
		t.Errorf("exit status %d, stdout %q, want 0 and two attempts; stderr:\n%s", code, out, errOut)
	}
}

func TestRunVerboseAndQuiet(t *testing.T) {
	t.Parallel()
	t.Run("verbose", func(t *testing.T) {
		t.Parallel()
		script, _ := counter(t, "n < 2 ? 1 : 0")
		_, errOut, code := runRetry(t, "", runArgs([]string{"-v"}, "sh", "-c", script)...)
		if code != 0 {
			t.Fatalf("exit status %d", code)
		}
		for _, want := range []string{"retry: attempt 1/3 failed: exit status 1; next in ", "retry: attempt 2: succeeded"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr %q does not contain %q", errOut, want)
			}
		}
	})
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := runRetry(t, "", runArgs([]string{"--quiet"}, "sh", "-c", "exit 7")...)
		if code != 7 || errOut != "" {
			t.Errorf("exit status %d, stderr %q; want 7 and nothing", code, errOut)
		}
	})
}

func TestRunJitter(t *testing.T) {
	t.Parallel()
	for _, j := range []string{"none", "full", "equal", "decorrelated"} {
		script, count := counter(t, "n < 3 ? 1 : 0")
		_, errOut, code := runRetry(t, "", runArgs([]string{"--jitter", j}, "sh", "-c", script)...)
		if code != 0 || count() != 3 {
			t.Errorf("--jitter %s: exit status %d after %d attempts; stderr:\n%s", j, code, count(), errOut)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "no command to run"},
		{[]string{"run", "--"}, "no command to run"},
		{[]string{"run", "--attempts", "0", "--", "true"}, "--attempts 0 (no limit) needs --max-time"},
		{[]string{"run", "--attempts", "-1", "--max-time", "1s", "--", "true"}, "--attempts must not be negative"},
		{[]string{"run", "--max-time", "-1s", "--", "true"}, "--max-time must not be negative"},
		{[]string{"run", "--attempts", "many", "--", "true"}, `invalid value "many" for flag -attempts`},
		{[]string{"run", "--delay", "-1s", "--", "true"}, "--delay must not be negative"},
		{[]string{"run", "--delay", "soon", "--", "true"}, "want a duration such as 250ms"},
		{[]string{"run", "--max-delay", "-1", "--", "true"}, "--max-delay must not be negative"},
		{[]string{"run", "--timeout", "-5s", "--", "true"}, "--timeout must not be negative"},
		{[]string{"run", "--kill-after", "-5s", "--", "true"}, "--kill-after must not be negative"},
		{[]string{"run", "--jitter", "lots", "--", "true"}, "want none, full, equal or decorrelated"},
		{[]string{"run", "--on-exit", "0", "--", "true"}, "want exit statuses from 1 to 255"},
		{[]string{"run", "--on-exit", "1,x", "--", "true"}, "want exit statuses from 1 to 255"},
		{[]string{"run", "-v", "-q", "--", "true"}, "cannot be used together"},
		{[]string{"run", "--bogus", "--", "true"}, "flag provided but not defined: -bogus"},
	} {
		out, errOut, code := runRetry(t, "", tc.args...)
		if code != 2 {
			t.Errorf("%q: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut, "retry run: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, `"retry run -h"`) {
			t.Errorf("%q: stderr %q, want the message %q and a pointer to -h", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"-h", "--help"} {
		out, _, code := runRetry(t, "", "run", flag)
		if code != 0 {
			t.Errorf("retry run %s: exit status %d, want 0", flag, code)
		}
		for _, want := range []string{"usage: retry run", "--attempts", "--on-exit", "--kill-after", "shared",
			"foreground process group", "--foreground", "group of its own", "SIGHUP", "126", "Examples:"} {
			if !strings.Contains(out, want) {
				t.Errorf("retry run %s: the usage does not mention %q", flag, want)
			}
		}
	}
}

func TestRunSecondsAsDurations(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n < 2 ? 1 : 0")
	_, errOut, code := runRetry(t, "", "run", "--delay", "0.001", "--max-delay", "1", "--", "sh", "-c", script)
	if code != 0 || count() != 2 {
		t.Errorf("exit status %d after %d attempts; stderr:\n%s", code, count(), errOut)
	}
}

// Each attempt learns its number and the limit from its environment, and
// a variable of the same name in retry's own environment does not leak in.
func TestRunAttemptEnvironment(t *testing.T) {
	t.Setenv("RETRY_ATTEMPT", "stale")
	out, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", "3"},
		"sh", "-c", `echo "$RETRY_ATTEMPT/$RETRY_MAX_ATTEMPTS"; exit 1`)...)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, errOut)
	}
	if want := "1/3\n2/3\n3/3\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
}

// --attempts 0 with --max-time retries until the time is up, and starts no
// attempt after it.
func TestRunMaxTimeBoundsUnlimitedAttempts(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	_, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", "0", "--max-time", "700ms"}, "sh", "-c", "exit 1")...)
	took := time.Since(begin)
	// The time may run out between attempts (the last one's status, 1) or
	// during one (stopped by SIGTERM, 143).
	if code != 1 && code != 143 {
		t.Errorf("exit status %d, want 1 or 143; stderr:\n%s", code, errOut)
	}
	if n := strings.Count(errOut, " failed: "); n <= 3 {
		t.Errorf("%d retried attempts in 700ms with waits of at most 5ms, want more than the default 3; stderr:\n%s", n, errOut)
	}
	if took > 5*time.Second {
		t.Errorf("the run took %v, want about 700ms", took)
	}
	if !strings.Contains(errOut, "retry: attempt 1 failed: ") || strings.Contains(errOut, "attempt 1/") {
		t.Errorf("stderr %q, want attempts numbered without a limit", errOut)
	}
	if !strings.Contains(errOut, "deadline") && !strings.Contains(errOut, "--max-time 700ms reached") {
		t.Errorf("stderr %q does not say the time ran out", errOut)
	}
}

// An attempt still running when --max-time is up is stopped, and the run
// ends saying why.
func TestRunMaxTimeStopsARunningAttempt(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	_, errOut, code := runRetry(t, "", runArgs([]string{"--max-time", "500ms"}, "sleep", "30")...)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("the run took %v, want about 500ms", took)
	}
	if code != 143 {
		t.Errorf("exit status %d, want 143 (SIGTERM)", code)
	}
	if want := "retry: --max-time 500ms reached after 1 attempt: "; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not say %q", errOut, want)
	}
}
