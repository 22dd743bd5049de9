//go:build unix

package runcmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// groupScript returns a shell script that writes its pid, which is its
// process group's id unless --foreground, to a file, starts two processes
// in the background, writing their pids to another, and waits for the
// second of them in the foreground. With ignoreTERM, the background ones
// ignore SIGTERM.
func groupScript(t *testing.T, ignoreTERM bool) (script, leader, kids string) {
	t.Helper()
	dir := t.TempDir()
	leader, kids = filepath.Join(dir, "leader"), filepath.Join(dir, "kids")
	sleep := "sleep 100"
	if ignoreTERM {
		sleep = `(trap "" TERM; exec sleep 100)`
	}
	script = fmt.Sprintf(`echo $$ > '%[1]s'; %[3]s & echo $! >> '%[2]s'; %[3]s & echo $! >> '%[2]s'; wait $!`,
		leader, kids, sleep)
	t.Cleanup(func() {
		for _, p := range append(lines(t, leader), lines(t, kids)...) {
			if pid, _ := strconv.Atoi(p); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return script, leader, kids
}

// checkGroupGone fails the test if a process of the group that the script
// of groupScript led, or one it started, is still there, even as a zombie.
func checkGroupGone(t *testing.T, leader, kids string) {
	t.Helper()
	l := lines(t, leader)
	if len(l) != 1 || len(lines(t, kids)) != 2 {
		t.Fatalf("the script wrote pids %q and %q, want one and two", l, lines(t, kids))
	}
	pgid, _ := strconv.Atoi(l[0])
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0) = %v, want ESRCH: a process of the attempt's group is left", pgid, err)
	}
	for _, p := range lines(t, kids) {
		if pid, _ := strconv.Atoi(p); !gone(pid) {
			t.Errorf("process %d that the command started is still there", pid)
		}
	}
}

// TestRunTimeoutEndsTheWholeGroup: --timeout stops what the command started
// as well as the command, as "sh -c 'sleep 100 & sleep 100'" does, and
// processes that ignore SIGTERM get SIGKILL after --kill-after.
func TestRunTimeoutEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	for _, ignoreTERM := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreTERM=%v", ignoreTERM), func(t *testing.T) {
			t.Parallel()
			script, leader, kids := groupScript(t, ignoreTERM)
			start := time.Now()
			_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "1", "--timeout", "500ms", "--kill-after", "300ms"},
				"sh", "-c", script)...)
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %s", elapsed)
			} else if ignoreTERM && elapsed < 800*time.Millisecond {
				t.Errorf("took %s, want the timeout and the grace, 800ms", elapsed)
			}
			if code != 124 {
				t.Errorf("exit status %d, want 124 (timed out); stderr:\n%s", code, errOut)
			}
			checkGroupGone(t, leader, kids)
		})
	}
}

// TestRunSignalEndsTheWholeGroup: SIGTERM sent to retry reaches every process
// of the attempt, and retry exits once they are gone.
func TestRunSignalEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	for _, ignoreTERM := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreTERM=%v", ignoreTERM), func(t *testing.T) {
			t.Parallel()
			script, leader, kids := groupScript(t, ignoreTERM)
			cmd, errOut := startNoTerminal(t, runArgs([]string{"--kill-after", "300ms"}, "sh", "-c", script)...)
			clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, kids)) == 2 })
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := clitest.WaitExit(t, cmd); code != 143 {
				t.Errorf("exit status %d, want 143; stderr:\n%s", code, errOut)
			}
			checkGroupGone(t, leader, kids)
			if want := "retry: stopped by SIGTERM during attempt 1"; !strings.Contains(errOut.String(), want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
		})
	}
}

// TestRunProcessGroups: each attempt leads a process group of its own; with
// --foreground it is in retry's.
func TestRunProcessGroups(t *testing.T) {
	t.Parallel()
	for _, foreground := range []bool{false, true} {
		t.Run(fmt.Sprintf("foreground=%v", foreground), func(t *testing.T) {
			t.Parallel()
			pgids := filepath.Join(t.TempDir(), "pgids")
			var flags []string
			if foreground {
				flags = []string{"--foreground"}
			}
			// ps prints the group of sh, its parent; retry is sh's parent.
			script := fmt.Sprintf(`ps -o pgid= -p $$ >> '%[1]s'; echo $$ >> '%[1]s'; ps -o pgid= -p $PPID >> '%[1]s'; exit 1`, pgids)
			_, errOut, code := clitest.Run(t, "", runArgs(append(flags, "--attempts", "2"), "sh", "-c", script)...)
			if code != 1 {
				t.Fatalf("exit status %d, want 1; stderr:\n%s", code, errOut)
			}
			got := lines(t, pgids)
			if len(got) != 6 {
				t.Fatalf("the script wrote %q, want the group, the pid and retry's group, twice", got)
			}
			for i := 0; i < 6; i += 3 {
				pgid, pid, retryGroup := got[i], got[i+1], got[i+2]
				if !foreground && pgid != pid {
					t.Errorf("attempt %d: process group %s, want its own, %s", i/3+1, pgid, pid)
				}
				if foreground && pgid != retryGroup {
					t.Errorf("attempt %d: process group %s, want retry's, %s", i/3+1, pgid, retryGroup)
				}
			}
		})
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
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "2", "--timeout", "500ms"},
		"sh", "-c", fmt.Sprintf("echo $$ >> '%s'; exec sleep 30", pids))...)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("took %s: the hanging attempts were not stopped", elapsed)
	}
	if code != 124 {
		t.Errorf("exit status %d, want 124 (timed out)", code)
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
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "1", "--timeout", "500ms", "--kill-after", "300ms", "--preserve-status"},
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
