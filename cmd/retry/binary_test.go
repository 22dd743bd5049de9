package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// retryBin is the retry command, built once by TestMain for the end-to-end
// tests of every subcommand.
var retryBin string

// runTimeout bounds one run of the command in runRetry.
const runTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds the command into a temporary directory, runs the
// tests, and removes the directory.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "retry-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot make a directory for the retry binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	retryBin = filepath.Join(dir, "retry")
	if runtime.GOOS == "windows" {
		retryBin += ".exe"
	}
	build := exec.Command("go", "build", "-o", retryBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build -o %s . failed: %v\n%s", retryBin, err, out)
		return 1
	}
	return m.Run()
}

// runRetry runs the built command with args and stdin, and returns what it
// wrote and its exit status. A run that takes longer than runTimeout is
// killed and fails the test.
func runRetry(t testing.TB, stdin string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, retryBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A process the command left behind may hold its output open; do not
	// wait for it longer than this.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("retry %s: killed after %s\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), runTimeout, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("retry %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// startRetry starts the command with args and returns it with its stderr.
func startRetry(t *testing.T, args ...string) (*exec.Cmd, *watchedText) {
	t.Helper()
	cmd := exec.Command(retryBin, args...)
	errOut := &watchedText{}
	cmd.Stderr = errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
}

// watchedText is a command's output as it comes, safe to read while the
// command writes it, which a test can wait on.
type watchedText struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next write
}

func (w *watchedText) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	return w.b.Write(p)
}

func (w *watchedText) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// await waits until the text contains s, failing the test after 20 s.
func (w *watchedText) await(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		w.mu.Lock()
		if strings.Contains(w.b.String(), s) {
			w.mu.Unlock()
			return
		}
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %q in:\n%s", s, w)
		}
	}
}

// fileText is a file whose String is its content.
type fileText string

func (f fileText) String() string {
	data, _ := os.ReadFile(string(f))
	return string(data)
}

// waitFor polls until cond is true, failing the test after 20 s. It is for
// what gives no event to wait on: a file a command writes, a process's
// state.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitExit waits for cmd and returns its exit status, failing the test if it
// does not exit within 20 s.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("retry did not exit within 20s of the signal")
		return -1
	}
}

// Help asked for is the output: it goes to stdout with status 0, for retry
// and each subcommand; without a command, the usage is an error.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"run", "-h"}, {"http", "-h"}, {"sim", "--help"}} {
		out, errOut, code := runRetry(t, "", args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: retry") {
			t.Errorf("%v: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	if out, errOut, code := runRetry(t, ""); code != 2 || out != "" || !strings.HasPrefix(errOut, "usage: retry") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %.40q; want 2 and the usage on stderr", code, out, errOut)
	}
}

// A bad flag gets one line, the usage line and a pointer to -h, for every
// subcommand; a flag without its argument too. A bad value of a flag gets
// its line and the pointer.
func TestBadFlagPointsToHelp(t *testing.T) {
	t.Parallel()
	usage := map[string]string{
		"run":  "usage: retry run [flags] -- COMMAND [ARGS...]",
		"http": "usage: retry http [flags] URL",
		"sim":  "usage: retry sim [flags]",
	}
	for _, cmd := range []string{"run", "http", "sim"} {
		pointer := "Run \"retry " + cmd + " -h\" for usage.\n"
		_, errOut, code := runRetry(t, "", cmd, "--no-such-flag")
		want := "retry " + cmd + ": flag provided but not defined: -no-such-flag\n" + usage[cmd] + "\n" + pointer
		if code != 2 || errOut != want {
			t.Errorf("%s --no-such-flag: exit %d, stderr %q; want 2 and %q", cmd, code, errOut, want)
		}
		_, errOut, code = runRetry(t, "", cmd, "--attempts")
		want = "retry " + cmd + ": flag needs an argument: -attempts\n" + usage[cmd] + "\n" + pointer
		if cmd == "sim" {
			want = "retry sim: flag provided but not defined: -attempts\n" + usage[cmd] + "\n" + pointer
		}
		if code != 2 || errOut != want {
			t.Errorf("%s --attempts: exit %d, stderr %q; want 2 and %q", cmd, code, errOut, want)
		}
	}
	// Not the flag package's "parse error": what the flag wants.
	for _, tc := range []struct{ args, want string }{
		{"sim --rate lots", `retry sim: invalid value "lots" for flag -rate: want a number`},
		{"sim --seed -1", `retry sim: invalid value "-1" for flag -seed: want a whole number, 0 or more`},
		{"run --attempts 2.5", `retry run: invalid value "2.5" for flag -attempts: want a whole number`},
		{"http --attempts x", `retry http: invalid value "x" for flag -attempts: want a whole number`},
		{"sim --shed=maybe", `retry sim: invalid boolean value "maybe" for -shed: want true or false`},
		{"run --quiet=2 -- true", `retry run: invalid boolean value "2" for -quiet: want true or false`},
		{"sim --duration 1x", `retry sim: invalid value "1x" for flag -duration: want a duration such as 250ms, 1.5s or 2m, or a number of seconds`},
		// The largest number of seconds rounds to 2^63 ns, which wrapped to a negative duration.
		{"run --timeout 9223372036.854775807 -- true", `retry run: invalid value "9223372036.854775807" for flag -timeout: too long: a duration is at most about 292 years`},
		// 1e-10 s rounds to 0, which --timeout reads as no limit at all.
		{"http --timeout 1e-10 http://127.0.0.1:1/", `retry http: invalid value "1e-10" for flag -timeout: too short: a duration is at least 1ns`},
		{"sim --rate Inf", `retry sim: rate must be a positive number`},
		{"sim --scenario overload --capacity 500", `retry sim: the overload's capacity, 600/s (0.6 × rate), must be below the server's normal capacity, 500/s`},
	} {
		_, errOut, code := runRetry(t, "", strings.Fields(tc.args)...)
		if code != 2 || !strings.HasPrefix(errOut, tc.want+"\n") || strings.Count(errOut, "\n") != 2 || strings.Contains(errOut, "usage:") {
			t.Errorf("%s: exit %d, stderr %q; want 2, %q and the pointer to -h", tc.args, code, errOut, tc.want)
		}
	}
}

// --version prints the module version from the build info; a binary built
// in a work tree has none and says "(devel)".
// "retry help COMMAND" is "retry COMMAND -h".
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "http", "sim"} {
		got, _, code := runRetry(t, "", "help", cmd)
		want, _, _ := runRetry(t, "", cmd, "-h")
		if code != 0 || got != want || !strings.HasPrefix(got, "usage: retry "+cmd) {
			t.Errorf("retry help %s: exit %d, %.60q; want retry %s -h's %.60q", cmd, code, got, cmd, want)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, errOut, code := runRetry(t, "", "--version")
	if code != 0 || errOut != "" || (out != "retry (devel)\n" && !strings.HasPrefix(out, "retry v")) {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and \"retry VERSION\"", code, out, errOut)
	}
}
