//go:build unix

package runcmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

func TestRunExitStatusIsTheLastAttempts(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n + 10") // 11, 12, 13
	_, errOut, code := clitest.Run(t, "", runArgs(nil, "sh", "-c", script)...)
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
		_, errOut, code := clitest.Run(t, "", runArgs(nil, tc.path)...)
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
	cmd := exec.Command(clitest.Bin(), runArgs(nil, "retry-test-not-executable")...)
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
		_, errOut, code := clitest.Run(t, "", runArgs(nil, name, "arg")...)
		if code != 127 {
			t.Errorf("%s: exit status %d, want 127", name, code)
		}
		if !strings.Contains(errOut, `cannot run "`+name+`"`) {
			t.Errorf("%s: stderr %q does not say the command cannot be run", name, errOut)
		}
	}
}

// TestRunTimedOutExitStatus: when a time limit stopped the last attempt,
// retry exits 124, as timeout(1) does, so that a script can tell a command
// that hung from one that failed; --preserve-status gives the attempt's own
// status, 128+15 here, as timeout --preserve-status does.
func TestRunTimedOutExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flags []string
		want  int
		says  string
	}{
		{[]string{"--attempts", "2", "--timeout", "200ms"}, 124, "timed out after 200ms"},
		{[]string{"--attempts", "2", "--timeout", "200ms", "--preserve-status"}, 143, "timed out after 200ms"},
		{[]string{"--max-time", "200ms"}, 124, "--max-time 200ms reached"},
		{[]string{"--max-time", "200ms", "--preserve-status"}, 143, "--max-time 200ms reached"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			t.Parallel()
			_, errOut, code := clitest.Run(t, "", runArgs(tc.flags, "sleep", "30")...)
			if code != tc.want || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit status %d, stderr %q; want %d and %q", code, errOut, tc.want, tc.says)
			}
		})
	}
	// A last attempt that failed by itself keeps its status, though an
	// earlier one timed out.
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "2", "--timeout", "500ms"},
		"sh", "-c", `[ "$RETRY_ATTEMPT" = 1 ] && exec sleep 30; exit 3`)...)
	if code != 3 {
		t.Errorf("a timed-out attempt, then one that exits 3: exit status %d, want 3; stderr:\n%s", code, errOut)
	}
}

// TestRunTimeLimitMessages: no "context deadline exceeded" without the
// limit it was: the run's messages name --timeout or --max-time.
func TestRunTimeLimitMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		// So short that every attempt's time is up as it begins.
		{[]string{"--timeout", "1ns"}, "--timeout 1ns ran out as the attempt began"},
		// Waits of about 400ms: the second attempt would begin too late.
		{[]string{"--max-time", "200ms", "--delay", "400ms", "--jitter", "none"}, "--max-time 200ms would pass before the next attempt"},
	} {
		_, errOut, _ := clitest.Run(t, "", append(append([]string{"run"}, tc.flags...), "--", "sh", "-c", "exit 1")...)
		if strings.Contains(errOut, "deadline") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: stderr %q, want %q and no bare deadline", tc.flags, errOut, tc.want)
		}
	}
}
