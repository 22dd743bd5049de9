//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
