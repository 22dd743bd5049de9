package runcmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// runner runs the attempts of one "retry run".
//
// Unless --foreground, each attempt's command leads a process group of its
// own, and retry signals that group, as GNU timeout(1) does: the processes a
// command starts (a shell script's, "sh -c 'a & b'") are stopped with it, and
// do not outlive a timed-out attempt. timeout puts itself in the group, and
// dies of its own SIGKILL; retry stays out of it, so that it can retry after
// --kill-after, and waits until the group is gone before the next attempt.
// The price, as with timeout: the command is not in the terminal's
// foreground process group, so it cannot read the terminal (the kernel stops
// it with SIGTTIN) and does not get the terminal's signals: a Ctrl-C or
// Ctrl-\ reaches retry alone, which passes it on once, and a Ctrl-Z too,
// which retry follows (followStops). Handing the terminal to the command's
// group, as a shell does, would take these from retry, which must see them
// to end the run or stop with its command, and leave a pipeline's other
// commands in the background; so a command that needs the terminal asks for
// --foreground, which keeps it in retry's group, where the terminal reaches
// it and passOn sends no signal twice, but where retry signals the command
// alone.
type runner struct {
	c           runConfig
	std         cli.Stdio
	hadTerminal bool // retry had a controlling terminal when the run began
	group       bool // each attempt has a process group of its own
	attempts    int  // attempts started
	outOfTime   bool // --max-time ended the run

	mu        sync.Mutex
	running   *os.Process // the attempt's command, nil between attempts
	suspended bool        // retry is stopping or stopped with the attempt
}

func (r *runner) strategy() retry.Strategy {
	attempts := r.c.attempts
	if attempts == 0 {
		attempts = math.MaxInt // no limit: --max-time bounds the run
	}
	return &retry.Simple{
		MaxAttempts: attempts,
		Backoff:     retry.Exponential{Base: r.c.delay, Max: r.c.maxDelay, Jitter: r.c.jitter},
	}
}

// attempt runs the command once. ctx is the whole run's context, cancelled
// by one of runSignals; actx is the attempt's, which --timeout also bounds.
// A failure comes back marked Transient when it may be retried and
// Permanent when it may not.
func (r *runner) attempt(ctx, actx context.Context) error {
	r.attempts++
	cmd := exec.CommandContext(actx, r.c.argv[0], r.c.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.std.In, r.std.Out, r.std.Err
	// The command may want to know where it stands: a script can log the
	// attempt, or try a slower path on its last one.
	cmd.Env = append(os.Environ(),
		"RETRY_ATTEMPT="+strconv.Itoa(r.attempts),
		"RETRY_MAX_ATTEMPTS="+strconv.Itoa(r.c.attempts))
	if r.group {
		cmd.SysProcAttr = newGroup()
	}
	var stopped stopTime
	cmd.Cancel = func() error {
		stopped.set(time.Now())
		return r.stop(cmd.Process, stopSignal(ctx))
	}
	cmd.WaitDelay = r.c.killAfter
	if err := r.start(cmd); err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err() // stopped before this attempt could begin
		case actx.Err() != nil:
			// The time ran out (--max-time, or --timeout) as the attempt
			// began: not a command that cannot run.
			r.attempts--
			return &lateStart{limit: r.limitOf(actx), err: actx.Err()}
		}
		return retry.Permanent(newStartError(r.c.argv[0], cmd.Path, err))
	}
	endWatch := r.watchTerminalStops(cmd.Process.Pid)
	err := cmd.Wait()
	endWatch()
	r.endGroup(cmd.Process.Pid, stopped.get())
	r.setRunning(nil)
	if err == nil || errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		return nil // ErrWaitDelay: it exited 0 but left its output open
	}
	f := newAttemptFailure(cmd.ProcessState, err, stopSignal(ctx))
	switch {
	case ctx.Err() != nil:
		f.stopped = true
		return f // the run is over: Do will not retry
	case actx.Err() == context.DeadlineExceeded:
		f.timedOut = true
		if context.Cause(actx) != errMaxTime {
			f.timeout = r.c.timeout // --max-time's is told by explain
		}
		return retry.Transient(f)
	case r.c.onExit.retries(f.status):
		return retry.Transient(f)
	}
	return retry.Permanent(f)
}

// limitOf names the limit that ended actx, an attempt's context: --max-time
// or --timeout, with its value.
func (r *runner) limitOf(actx context.Context) string {
	if context.Cause(actx) == errMaxTime {
		return "--max-time " + r.c.maxTime.String()
	}
	return "--timeout " + r.c.timeout.String()
}

// isSuspended reports whether retry is stopping, stopped or continuing with
// the attempt (see suspend), which is then stopped without wanting the
// terminal.
func (r *runner) isSuspended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.suspended
}

// start starts the attempt's command and records it as running, at once for
// suspend: a Ctrl-Z that comes while the command starts stops it too, rather
// than find no command and stop retry alone.
func (r *runner) start(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.running = cmd.Process
	return nil
}

// setRunning records the attempt's command, nil once it has exited.
func (r *runner) setRunning(p *os.Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = p
}

// retrying prints, unless --quiet, the attempt that failed and the wait:
// a run that retries quietly looks hung, and a command's own failure output
// means little without knowing it will be tried again.
func (r *runner) retrying(_ context.Context, attempt int, delay time.Duration, err error) {
	if !r.c.quiet {
		of := ""
		if r.c.attempts > 0 {
			of = "/" + strconv.Itoa(r.c.attempts)
		}
		fmt.Fprintf(r.std.Err, "retry: attempt %d%s failed: %v; next in %s\n", attempt, of, err, cli.RoundDelay(delay))
	}
}

// finish says why the run ended, unless --quiet, and returns the exit status.
func (r *runner) finish(ctx context.Context, err error) int {
	if err == nil {
		if r.c.verbose {
			fmt.Fprintf(r.std.Err, "retry: attempt %d: succeeded\n", r.attempts)
		}
		return 0
	}
	msg, status := r.explain(ctx, err)
	if !r.c.quiet {
		fmt.Fprintln(r.std.Err, msg)
	}
	return status
}
