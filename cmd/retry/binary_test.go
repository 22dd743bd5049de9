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
func startRetry(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(retryBin, args...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &errOut
}

// waitFor polls until cond is true, failing the test after 20 s.
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
