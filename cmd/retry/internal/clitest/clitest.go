// Package clitest builds the retry command once per test binary and runs
// it, for the end-to-end tests of every subcommand: each subcommand's
// package calls Main from its TestMain, and its tests run the command as a
// user would.
package clitest

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

// bin is the retry command, built by Main.
var bin string

// runTimeout bounds one run of the command in Run.
const runTimeout = 60 * time.Second

// Main builds the command into a temporary directory, runs the tests, and
// removes the directory. It returns the exit status for os.Exit.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "retry-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot make a directory for the retry binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "retry")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	const pkg = "github.com/retrykit/retry/cmd/retry"
	build := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build -o %s %s failed: %v\n%s", bin, pkg, err, out)
		return 1
	}
	return m.Run()
}

// Bin returns the path of the command Main built.
func Bin() string { return bin }

// Run runs the built command with args and stdin, and returns what it
// wrote and its exit status. A run that takes longer than a minute is
// killed and fails the test.
func Run(t testing.TB, stdin string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
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

// Start starts the command with args and returns it with its stderr.
func Start(t *testing.T, args ...string) (*exec.Cmd, *WatchedText) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	errOut := &WatchedText{}
	cmd.Stderr = errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
}

// WatchedText is a command's output as it comes, safe to read while the
// command writes it, which a test can wait on.
type WatchedText struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next write
}

// Write appends p and wakes an Await waiting for a change.
func (w *WatchedText) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	return w.b.Write(p)
}

// String returns the text written so far.
func (w *WatchedText) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Await waits until the text contains s, failing the test after 20 s.
func (w *WatchedText) Await(t *testing.T, s string) {
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

// FileText is a file whose String is its content.
type FileText string

// String returns the file's content, "" if it cannot be read.
func (f FileText) String() string {
	data, _ := os.ReadFile(string(f))
	return string(data)
}

// WaitFor polls until cond is true, failing the test after 20 s. It is for
// what gives no event to wait on: a file a command writes, a process's
// state.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitExit waits for cmd and returns its exit status, failing the test if
// it does not exit within 20 s.
func WaitExit(t *testing.T, cmd *exec.Cmd) int {
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
