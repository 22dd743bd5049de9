package runcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/retrykit/retry"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// newAttemptFailure describes a command that ended as ps says, with the
// error err from Wait; sent is the signal it was sent if it was stopped.
func newAttemptFailure(ps *os.ProcessState, err error, sent syscall.Signal) *attemptFailure {
	f := &attemptFailure{status: 1, err: err}
	if ps == nil {
		return f
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		f.status, f.signal = 128+int(ws.Signal()), ws.Signal()
		return f
	}
	f.status = ps.ExitCode()
	if f.status <= 0 {
		// It exited 0, but only after it was told to stop: it did not
		// finish, and its status is the signal's, as if it had not caught it.
		f.caught = sent
		f.status = 128 + int(sent)
	}
	return f
}

// explain returns the line that says why the run ended with err, and the
// exit status.
func (r *runner) explain(ctx context.Context, err error) (string, int) {
	var (
		se *startError
		f  *attemptFailure
	)
	switch {
	case errors.As(err, &se):
		return "retry: " + se.Error(), se.status()
	case ctx.Err() != nil:
		return r.interrupted(ctx, err)
	case r.outOfTime && f == nil && !errors.As(err, &f):
		return fmt.Sprintf("retry: --max-time %s reached after %s", r.c.maxTime, cli.Plural(r.attempts, "attempt")), 1
	case r.outOfTime:
		return fmt.Sprintf("retry: --max-time %s reached after %s: %s", r.c.maxTime, cli.Plural(r.attempts, "attempt"), f), r.status(f)
	case !errors.As(err, &f):
		return "retry: " + strings.TrimPrefix(err.Error(), "retry: "), 1
	case errors.Is(err, retry.ErrNotRetryable):
		return fmt.Sprintf("retry: %s is not retried (--on-exit %s)", f, r.c.onExit.String()), f.status
	case errors.Is(err, retry.ErrMaxAttempts):
		return fmt.Sprintf("retry: giving up after %s: %s", cli.Plural(r.attempts, "attempt"), f), r.status(f)
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Reason != nil {
		return fmt.Sprintf("retry: giving up after %s (%s): %s", cli.Plural(r.attempts, "attempt"),
			r.reason(re.Reason), f), r.status(f)
	}
	return fmt.Sprintf("retry: giving up after %s: %s", cli.Plural(r.attempts, "attempt"), f), r.status(f)
}

// status is the exit status for a run that f, its last attempt, ended: 124
// if a time limit stopped it, as timeout(1) exits, so that a script can
// tell a hung command from a failed one; its own with --preserve-status.
func (r *runner) status(f *attemptFailure) int {
	if f.timedOut && !r.c.preserve {
		return 124
	}
	return f.status
}

// reason says why retrying stopped, naming --max-time when its deadline
// is the one the next attempt would have run past.
func (r *runner) reason(why error) string {
	if errors.Is(why, retry.ErrDeadline) && r.c.maxTime > 0 {
		return "--max-time " + r.c.maxTime.String() + " would pass before the next attempt"
	}
	return strings.TrimPrefix(why.Error(), "retry: ")
}

// interrupted explains a run that one of runSignals ended with err, and
// returns the exit status: the attempt's if the signal stopped one, 128+N
// for signal N if it came between attempts.
func (r *runner) interrupted(ctx context.Context, err error) (string, int) {
	sig, _ := cli.InterruptedBy(ctx)
	var f *attemptFailure
	switch {
	case !errors.As(err, &f):
		return "retry: stopped by " + cli.SignalName(sig), 128 + int(sig)
	case f.stopped:
		return fmt.Sprintf("retry: stopped by %s during attempt %d: %s", cli.SignalName(sig), r.attempts, f), f.status
	}
	return fmt.Sprintf("retry: stopped by %s while waiting to retry (attempt %d: %s)", cli.SignalName(sig), r.attempts, f), 128 + int(sig)
}

// startError is a command that could not be started.
type startError struct {
	name    string
	err     error
	notExec string // the file in $PATH named name that is not executable, if any
	exists  bool   // the file exists, though starting it said "no such file"
}

// newStartError describes the failure, err, to start the command name,
// found at path.
func newStartError(name, path string, err error) *startError {
	e := &startError{name: name, err: err}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		// exec.LookPath passes over a file that is not executable, but a
		// shell stops there: "permission denied", status 126.
		if runtime.GOOS != "windows" && !strings.ContainsRune(name, '/') {
			e.notExec = notExecutableInPath(name)
		}
	case errors.Is(err, fs.ErrNotExist):
		// The kernel's "no such file" may be about its #! interpreter or
		// its dynamic loader.
		_, statErr := os.Stat(path)
		e.exists = statErr == nil
	}
	return e
}

// notExecutableInPath returns the first regular file named name in $PATH, or
// "".
func notExecutableInPath(name string) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
			return path
		}
	}
	return ""
}

// status returns the exit status for e, as a shell's: 127 if the command is
// not found, 126 if it is but cannot be executed.
func (e *startError) status() int {
	if e.notExec == "" && (errors.Is(e.err, exec.ErrNotFound) || errors.Is(e.err, fs.ErrNotExist)) {
		return 127
	}
	return 126
}

func (e *startError) Error() string {
	var (
		ee     *exec.Error
		pe     *fs.PathError
		reason = e.err
	)
	switch {
	case errors.As(e.err, &ee):
		reason = ee.Err
	case errors.As(e.err, &pe):
		reason = pe.Err
	}
	switch {
	case e.notExec != "":
		return fmt.Sprintf("cannot run %q: %s is not executable (permission denied)", e.name, e.notExec)
	case errors.Is(e.err, exec.ErrNotFound):
		return fmt.Sprintf("cannot run %q: command not found (is it installed and in $PATH?)", e.name)
	case e.exists:
		return fmt.Sprintf("cannot run %q: %v: a file it needs is missing, such as the interpreter named on its #! line", e.name, reason)
	case errors.Is(e.err, syscall.ENOEXEC):
		return fmt.Sprintf("cannot run %q: %v: it is neither a program for this system nor a script starting with #!", e.name, reason)
	}
	return fmt.Sprintf("cannot run %q: %v", e.name, reason)
}

func (e *startError) Unwrap() error { return e.err }

// attemptFailure is an attempt that ended without success.
type attemptFailure struct {
	status   int            // exit status, 128+N for signal N
	signal   syscall.Signal // the signal that killed the command, or 0
	caught   syscall.Signal // the signal after which it exited 0, or 0
	timeout  time.Duration  // the --timeout it ran into, or 0
	timedOut bool           // --timeout or --max-time stopped it
	stopped  bool           // one of runSignals stopped it
	err      error          // what exec.Cmd.Wait said
}

// Error reads, for example, "exit status 3", "killed by SIGKILL (status
// 137)" or "timed out after 2s, killed by SIGTERM (status 143)".
func (f *attemptFailure) Error() string {
	var s string
	switch {
	case f.signal != 0:
		s = fmt.Sprintf("killed by %s (status %d)", cli.SignalName(f.signal), f.status)
	case f.caught != 0:
		s = fmt.Sprintf("exited 0 after %s (status %d)", cli.SignalName(f.caught), f.status)
	default:
		s = fmt.Sprintf("exit status %d", f.status)
	}
	if f.timeout > 0 {
		s = fmt.Sprintf("timed out after %s, %s", f.timeout, s)
	}
	return s
}

func (f *attemptFailure) Unwrap() error { return f.err }

// lateStart is an attempt whose time ran out as it began: limit names the
// flag, err is the context's error.
type lateStart struct {
	limit string
	err   error
}

func (e *lateStart) Error() string { return e.limit + " ran out as the attempt began" }

func (e *lateStart) Unwrap() error { return e.err }
