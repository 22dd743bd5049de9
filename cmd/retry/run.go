package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrykit/retry"
)

const runUsage = `usage: retry run [flags] -- COMMAND [ARGS...]

Runs COMMAND until it succeeds (exits 0), at most --attempts times. Between
attempts it waits with exponential backoff: about --delay before the first
retry, doubling for each further one up to --max-delay, spread by --jitter so
that many machines retrying together do not retry in step.

Flags (-flag and --flag are the same):
  --attempts N      attempts in all, the first included; 0 = no limit, only
                    with --max-time (default 3)
  --max-time D      bound the whole run: no attempt starts once D has passed,
                    and one still running then is stopped as by --timeout
                    (default: no limit)
  --delay D         base wait before the first retry (default 100ms)
  --max-delay D     longest wait between attempts; 0 = no cap (default 10s)
  --jitter J        none, full, equal or decorrelated (default full)
  --on-exit CODES   exit statuses that are retried, comma-separated, e.g. 1,75;
                    others end the run at once (default: every non-zero status)
  --timeout D       stop an attempt that runs longer than D: SIGTERM, then
                    SIGKILL after --kill-after. A timed-out attempt is always
                    retried (default: no limit)
  --kill-after D    grace between SIGTERM and SIGKILL; 0 = SIGKILL at once
                    (default 5s)
  --foreground      run COMMAND in retry's own process group: it can read
                    the terminal and gets the terminal's Ctrl-C itself, but
                    --timeout and signals reach COMMAND alone, not the
                    processes it starts (as timeout --foreground)
  -v, --verbose     also a line on stderr when an attempt succeeds
  -q, --quiet       no line on stderr from retry itself (usage errors excepted)

Unless --quiet, retry writes a line on stderr for every failed attempt that
it retries, such as "retry: attempt 2/3 failed: exit status 1; next in
240ms", and one that says why the run ended if it failed.

D is a duration such as 250ms, 1.5s or 2m, or a number of seconds.

Each attempt has RETRY_ATTEMPT (1 for the first) and RETRY_MAX_ATTEMPTS
(--attempts, 0 for no limit) in its environment.

COMMAND's standard input, output and error are retry's own. Standard input is
shared, not replayed: a later attempt reads what earlier ones left unread, so
data piped into retry reaches the first attempt that reads it.

Each attempt runs in a process group of its own, as timeout(1) runs its
command: --timeout, and the signals retry passes on, reach every process of
the attempt, such as those a shell script starts, and a stopped attempt is
over once all of them have exited (SIGKILL after --kill-after). So the
terminal does not signal COMMAND itself: a Ctrl-C or Ctrl-\ reaches retry,
which passes it on, once, and a Ctrl-Z stops retry and COMMAND until they are
continued (fg). A COMMAND that reads the terminal or changes its modes (a
password prompt, an editor, ssh -t) needs --foreground.

SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to retry stops the current attempt and
ends the run without further attempts: COMMAND gets the signal, then SIGKILL
after --kill-after. retry passes SIGTERM on, and SIGINT and SIGQUIT unless
COMMAND is in the terminal's foreground process group (with --foreground):
there a Ctrl-C reaches COMMAND from the terminal, and is not sent twice.
SIGHUP is passed on unless the terminal hung up and the shell or the kernel
sent it to COMMAND. A second signal ends retry at once, after passing it on
likewise. Signals retry was started with ignored, as by nohup, stay ignored.

Exit status: that of the last attempt, 128+N if it was killed by signal N
(or if signal N ended the run between attempts); 126 if COMMAND cannot be
executed (permission denied, not an executable), 127 if it is not found;
2 for a usage error.

Examples:
  retry run -- curl -fsS https://example.com/health
  retry run --attempts 5 --delay 1s -- ./flaky-test.sh
  retry run --on-exit 75 --timeout 30s -- rsync -a src/ host:dst/
  retry run -v --jitter none --delay 2s --max-delay 1m -- make deploy
`

// runConfig is what "retry run" was asked to do.
type runConfig struct {
	attempts   int
	delay      time.Duration
	maxDelay   time.Duration
	jitter     retry.Jitter
	onExit     exitCodes // nil = every non-zero status
	timeout    time.Duration
	maxTime    time.Duration // 0 = no bound on the whole run
	killAfter  time.Duration
	foreground bool // keep the command in retry's process group; see runner
	verbose    bool
	quiet      bool
	argv       []string
}

// runCommand implements "retry run".
func runCommand(ctx context.Context, args []string, std stdio) int {
	c, status, ok := parseRunFlags(args, std)
	if !ok {
		return status
	}
	r := &runner{c: c, std: std, hadTerminal: haveTerminal(), group: groupsWork && !c.foreground}
	if r.group {
		becomeSubreaper()
	}
	defer r.exitOnSecondSignal(ctx)()
	defer r.followStops()()
	// dctx bounds the run for --max-time; ctx stays the signals' alone, so
	// that running out of time is not taken for an interruption.
	dctx := ctx
	if c.maxTime > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, c.maxTime)
		defer cancel()
	}
	err := retry.Do(dctx, r.strategy(), func(actx context.Context) error {
		return r.attempt(ctx, actx)
	}, retry.AttemptTimeout(c.timeout), retry.OnRetry(r.retrying))
	r.outOfTime = dctx.Err() != nil && ctx.Err() == nil
	return r.finish(ctx, err)
}

// parseRunFlags reads the flags and the command. It returns ok false with the
// exit status when there is nothing to run: 0 after -h, 2 after a usage error.
func parseRunFlags(args []string, std stdio) (runConfig, int, bool) {
	c := runConfig{attempts: 3, delay: 100 * time.Millisecond, maxDelay: 10 * time.Second,
		jitter: retry.FullJitter, killAfter: 5 * time.Second}
	fs := flag.NewFlagSet("retry run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage to stdout, errors a hint
	fs.IntVar(&c.attempts, "attempts", c.attempts, "")
	fs.Var(durationValue{&c.delay}, "delay", "")
	fs.Var(durationValue{&c.maxDelay}, "max-delay", "")
	fs.Var(jitterValue{&c.jitter}, "jitter", "")
	fs.Var(&c.onExit, "on-exit", "")
	fs.Var(durationValue{&c.timeout}, "timeout", "")
	fs.Var(durationValue{&c.maxTime}, "max-time", "")
	fs.Var(durationValue{&c.killAfter}, "kill-after", "")
	fs.BoolVar(&c.foreground, "foreground", false, "")
	for _, name := range []string{"v", "verbose"} {
		fs.BoolVar(&c.verbose, name, false, "")
	}
	for _, name := range []string{"q", "quiet"} {
		fs.BoolVar(&c.quiet, name, false, "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(std.out, runUsage)
			return c, 0, false
		}
		return c, usageError(std.err, "run", err.Error()), false
	}
	c.argv = fs.Args()
	if msg := c.check(); msg != "" {
		return c, usageError(std.err, "run", msg), false
	}
	return c, 0, true
}

// check returns what is wrong with c, or "".
func (c *runConfig) check() string {
	switch {
	case len(c.argv) == 0:
		return "no command to run: retry run [flags] -- COMMAND [ARGS...]"
	case c.attempts < 0:
		return "--attempts must not be negative (0 means no limit, with --max-time)"
	case c.attempts == 0 && c.maxTime == 0:
		return "--attempts 0 (no limit) needs --max-time to bound the run"
	case c.maxTime < 0:
		return "--max-time must not be negative (0 means no limit)"
	case c.delay < 0:
		return "--delay must not be negative"
	case c.maxDelay < 0:
		return "--max-delay must not be negative (0 means no cap)"
	case c.timeout < 0:
		return "--timeout must not be negative (0 means no limit)"
	case c.killAfter < 0:
		return "--kill-after must not be negative (0 means SIGKILL at once)"
	case c.verbose && c.quiet:
		return "--verbose and --quiet cannot be used together"
	}
	return ""
}

// usageError prints msg and a pointer to the command's help, and
// returns the exit status of a usage error.
func usageError(w io.Writer, cmd, msg string) int {
	fmt.Fprintf(w, "retry %s: %s\n", cmd, msg)
	fmt.Fprintf(w, "Run \"retry %s -h\" for usage.\n", cmd)
	return 2
}

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
	std         stdio
	hadTerminal bool // retry had a controlling terminal when the run began
	group       bool // each attempt has a process group of its own
	attempts    int  // attempts started
	outOfTime   bool // --max-time ended the run

	mu      sync.Mutex
	running *os.Process // the attempt's command, nil between attempts
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.std.in, r.std.out, r.std.err
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
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // stopped before this attempt could begin
		}
		return retry.Permanent(newStartError(r.c.argv[0], cmd.Path, err))
	}
	r.setRunning(cmd.Process)
	err := cmd.Wait()
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
		f.timeout = r.c.timeout
		return retry.Transient(f)
	case r.c.onExit.retries(f.status):
		return retry.Transient(f)
	}
	return retry.Permanent(f)
}

// stop asks the attempt, the command's process p and its group, to end
// with sig, the signal that ended the run or SIGTERM for --timeout, unless
// the terminal has sent it to p already (see passOn). If sig cannot be sent
// (as on Windows), or --kill-after is zero, it kills them at once. exec.Cmd's
// WaitDelay kills p if it is still running --kill-after later, and endGroup
// the rest of its group.
func (r *runner) stop(p *os.Process, sig syscall.Signal) error {
	if r.c.killAfter > 0 {
		if !r.passOn(p, sig) {
			return nil
		}
		err := r.signal(p, sig)
		if err == nil || errors.Is(err, os.ErrProcessDone) {
			return err
		}
	}
	return r.signal(p, syscall.SIGKILL)
}

// signal sends sig to the attempt: to the process group that p leads, or
// to p alone with --foreground.
func (r *runner) signal(p *os.Process, sig syscall.Signal) error {
	switch {
	case r.group:
		if err := signalGroup(p.Pid, sig); errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		} else if err != nil {
			return fmt.Errorf("signal process group %d: %w", p.Pid, err)
		}
		return nil
	case sig == syscall.SIGKILL:
		return p.Kill()
	}
	return p.Signal(sig)
}

// endGroup returns once the process group pgid of an attempt that has
// exited is gone, if the attempt was stopped (at stopped, not zero): the
// processes the command started may still be running, having caught the
// signal or ignored it, and get SIGKILL --kill-after after it was sent. The
// group of an attempt that exited by itself is left alone: what it started
// in the background may be meant to run on, as a daemon.
func (r *runner) endGroup(pgid int, stopped time.Time) {
	if !r.group {
		return
	}
	defer reapGroup(pgid)
	if stopped.IsZero() {
		return
	}
	killAt := stopped.Add(r.c.killAfter)
	giveUp := killAt.Add(time.Second) // zombies retry is not the parent of
	for reapGroup(pgid); groupLeft(pgid); reapGroup(pgid) {
		now := time.Now()
		switch {
		case now.After(giveUp):
			return
		case !now.Before(killAt):
			_ = signalGroup(pgid, syscall.SIGKILL)
			killAt = giveUp.Add(time.Hour) // once
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopTime is when exec.Cmd's Cancel stopped an attempt, set in the
// goroutine that watches the attempt's context.
type stopTime struct {
	mu sync.Mutex
	t  time.Time
}

func (s *stopTime) set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t
}

func (s *stopTime) get() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// passOn reports whether sig, which retry received (or chose, for
// --timeout), is to be sent to the command's process p. It is not if the
// terminal has sent it to p already, which it can only with --foreground:
// otherwise p's process group is its own, which the terminal never signals.
//
//   - A terminal sends SIGINT for a Ctrl-C (SIGQUIT for a Ctrl-\) to its
//     foreground process group, which with --foreground holds retry and the
//     command. Sent again, it would be a second Ctrl-C, which tools such as
//     terraform and docker compose take as "abort now, skip the cleanup".
//     So SIGINT and SIGQUIT are passed on only if retry and the command are
//     not both in the foreground group of retry's terminal, or retry has
//     none. (A "kill -INT" aimed at retry alone while it is in the
//     foreground is not passed on either: --kill-after then ends the
//     command.)
//   - When a terminal hangs up, the kernel sends SIGHUP to the session
//     leader alone, but a shell there passes it on to its jobs' process
//     groups, and when the leader exits the kernel sends it to the
//     foreground group: the command has it unless retry itself leads the
//     session (see hungUpWith). A SIGHUP while the terminal is still there
//     came from a kill, and is passed on.
//   - SIGTERM is always passed on: terminals do not send it.
func (r *runner) passOn(p *os.Process, sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT:
		return !inForeground(p.Pid)
	case syscall.SIGHUP:
		return !hungUpWith(p.Pid, r.hadTerminal)
	}
	return true
}

// setRunning records the attempt's command, nil once it has exited.
func (r *runner) setRunning(p *os.Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = p
}

// runSignals stop "retry run": dispatch cancels the run's context on the
// first of them. A terminal sends SIGINT for a Ctrl-C, SIGQUIT for a Ctrl-\
// and SIGHUP when it hangs up.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// exitOnSecondSignal arranges that once a first of runSignals has cancelled
// ctx (dispatch then stops listening for them), a second one is passed on to
// the command as the first was, and then ends retry with the signal's default
// action, without waiting for the command any longer. It returns the
// function that undoes it.
func (r *runner) exitOnSecondSignal(ctx context.Context) (undo func()) {
	var (
		mu     sync.Mutex
		undone bool
		ch     = make(chan os.Signal, 1)
		quit   = make(chan struct{})
	)
	sigs := catchable(runSignals...)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if undone || len(sigs) == 0 { // Notify with no signals relays all
			return
		}
		signal.Notify(ch, sigs...)
		go func() {
			select {
			case s := <-ch:
				r.exitOn(s.(syscall.Signal))
			case <-quit:
			}
		}()
	})
	return func() {
		stopAfter()
		mu.Lock()
		undone = true
		signal.Stop(ch)
		mu.Unlock()
		close(quit)
	}
}

// exitOn passes a second signal, sig, on to the running command, as passOn
// says, and ends retry with sig's default action.
func (r *runner) exitOn(sig syscall.Signal) {
	r.mu.Lock()
	p := r.running
	r.mu.Unlock()
	if p != nil {
		if r.passOn(p, sig) {
			_ = r.signal(p, sig)
		}
		if !r.c.quiet {
			fmt.Fprintf(r.std.err, "retry: second %s: not waiting for %s (pid %d) to exit\n", signalName(sig), r.c.argv[0], p.Pid)
		}
	}
	if sig == syscall.SIGQUIT {
		// Go's own action for SIGQUIT is a dump of every goroutine, which
		// is retry's business, not the user's: end with its status instead.
		os.Exit(128 + int(sig))
	}
	signal.Reset(sig)
	if self, err := os.FindProcess(os.Getpid()); err == nil && self.Signal(sig) == nil {
		time.Sleep(time.Second) // the default action ends retry before this
	}
	os.Exit(128 + int(sig)) // sig could not be sent (Windows)
}

// ignoredAtStart holds those of runSignals and stopSignals that retry was
// started with ignored: SIGHUP under nohup, SIGINT for a command a shell
// script runs in the background. It is read before anything listens for
// signals: signal.Notify stops ignoring a signal, for retry and for the
// commands it starts, which would undo nohup.
var ignoredAtStart = func() map[os.Signal]bool {
	m := make(map[os.Signal]bool)
	for _, s := range append(slices.Clone(runSignals), stopSignals...) {
		m[s] = signal.Ignored(s)
	}
	return m
}()

// catchable returns the signals in sigs that retry may listen for: those it
// was not started with ignored, which stay ignored.
func catchable(sigs ...os.Signal) []os.Signal {
	var c []os.Signal
	for _, s := range sigs {
		if !ignoredAtStart[s] {
			c = append(c, s)
		}
	}
	return c
}

// stopSignal is the signal that ended ctx, one of runSignals, to be passed
// on to the command; SIGTERM if ctx is still running (an attempt timed out).
func stopSignal(ctx context.Context) syscall.Signal {
	if s, ok := interruptedBy(ctx); ok {
		return s
	}
	return syscall.SIGTERM
}

// interruptedBy reports the signal that cancelled ctx, the context of
// signal.NotifyContext, whose cause names the signal. The cause stays after
// NotifyContext's stop.
func interruptedBy(ctx context.Context) (syscall.Signal, bool) {
	if ctx.Err() == nil {
		return 0, false
	}
	cause := context.Cause(ctx).Error()
	for _, s := range runSignals {
		if cause == s.String()+" signal received" {
			return s.(syscall.Signal), true
		}
	}
	return syscall.SIGTERM, true // cancelled some other way: say SIGTERM
}

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

// retrying prints, unless --quiet, the attempt that failed and the wait:
// a run that retries quietly looks hung, and a command's own failure output
// means little without knowing it will be tried again.
func (r *runner) retrying(_ context.Context, attempt int, delay time.Duration, err error) {
	if !r.c.quiet {
		of := ""
		if r.c.attempts > 0 {
			of = "/" + strconv.Itoa(r.c.attempts)
		}
		fmt.Fprintf(r.std.err, "retry: attempt %d%s failed: %v; next in %s\n", attempt, of, err, roundDelay(delay))
	}
}

// finish says why the run ended, unless --quiet, and returns the exit status.
func (r *runner) finish(ctx context.Context, err error) int {
	if err == nil {
		if r.c.verbose {
			fmt.Fprintf(r.std.err, "retry: attempt %d: succeeded\n", r.attempts)
		}
		return 0
	}
	msg, status := r.explain(ctx, err)
	if !r.c.quiet {
		fmt.Fprintln(r.std.err, msg)
	}
	return status
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
		return fmt.Sprintf("retry: --max-time %s reached after %s", r.c.maxTime, plural(r.attempts, "attempt")), 1
	case r.outOfTime:
		return fmt.Sprintf("retry: --max-time %s reached after %s: %s", r.c.maxTime, plural(r.attempts, "attempt"), f), f.status
	case !errors.As(err, &f):
		return "retry: " + strings.TrimPrefix(err.Error(), "retry: "), 1
	case errors.Is(err, retry.ErrNotRetryable):
		return fmt.Sprintf("retry: %s is not retried (--on-exit %s)", f, r.c.onExit.String()), f.status
	case errors.Is(err, retry.ErrMaxAttempts):
		return fmt.Sprintf("retry: giving up after %s: %s", plural(r.attempts, "attempt"), f), f.status
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Reason != nil {
		return fmt.Sprintf("retry: giving up after %s (%s): %s", plural(r.attempts, "attempt"),
			strings.TrimPrefix(re.Reason.Error(), "retry: "), f), f.status
	}
	return fmt.Sprintf("retry: giving up after %s: %s", plural(r.attempts, "attempt"), f), f.status
}

// interrupted explains a run that one of runSignals ended with err, and
// returns the exit status: the attempt's if the signal stopped one, 128+N
// for signal N if it came between attempts.
func (r *runner) interrupted(ctx context.Context, err error) (string, int) {
	sig, _ := interruptedBy(ctx)
	var f *attemptFailure
	switch {
	case !errors.As(err, &f):
		return "retry: stopped by " + signalName(sig), 128 + int(sig)
	case f.stopped:
		return fmt.Sprintf("retry: stopped by %s during attempt %d: %s", signalName(sig), r.attempts, f), f.status
	}
	return fmt.Sprintf("retry: stopped by %s while waiting to retry (attempt %d: %s)", signalName(sig), r.attempts, f), 128 + int(sig)
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
	status  int            // exit status, 128+N for signal N
	signal  syscall.Signal // the signal that killed the command, or 0
	caught  syscall.Signal // the signal after which it exited 0, or 0
	timeout time.Duration  // the --timeout it ran into, or 0
	stopped bool           // one of runSignals stopped it
	err     error          // what exec.Cmd.Wait said
}

// Error reads, for example, "exit status 3", "killed by SIGKILL (status
// 137)" or "timed out after 2s, killed by SIGTERM (status 143)".
func (f *attemptFailure) Error() string {
	var s string
	switch {
	case f.signal != 0:
		s = fmt.Sprintf("killed by %s (status %d)", signalName(f.signal), f.status)
	case f.caught != 0:
		s = fmt.Sprintf("exited 0 after %s (status %d)", signalName(f.caught), f.status)
	default:
		s = fmt.Sprintf("exit status %d", f.status)
	}
	if f.timeout > 0 {
		s = fmt.Sprintf("timed out after %s, %s", f.timeout, s)
	}
	return s
}

func (f *attemptFailure) Unwrap() error { return f.err }

// signalName returns "SIGTERM" and the like.
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM",
		syscall.SIGTERM: "SIGTERM",
	}
	if name, ok := names[s]; ok {
		return name
	}
	return "signal " + strconv.Itoa(int(s))
}

// plural returns "1 attempt" or "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// roundDelay rounds a wait for people to read: 57ms, 1.2s.
func roundDelay(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// exitCodes is the --on-exit list: the exit statuses that are retried.
type exitCodes []int

// retries reports whether status is retried: any non-zero status if the list
// was not given.
func (c exitCodes) retries(status int) bool {
	if c == nil {
		return status != 0
	}
	return slices.Contains(c, status)
}

func (c *exitCodes) String() string {
	if c == nil || *c == nil {
		return "any non-zero status"
	}
	s := make([]string, len(*c))
	for i, code := range *c {
		s[i] = strconv.Itoa(code)
	}
	return strings.Join(s, ",")
}

// Set adds comma-separated statuses, each from 1 to 255.
func (c *exitCodes) Set(v string) error {
	for field := range strings.SplitSeq(v, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || code < 1 || code > 255 {
			return fmt.Errorf("want exit statuses from 1 to 255 separated by commas, such as 1,75; %q is not one", field)
		}
		*c = append(*c, code)
	}
	return nil
}

// durationValue is a duration flag that also takes a number of seconds.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		*v.d = d
		return nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(secs) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
		return errors.New("want a duration such as 250ms, 1.5s or 2m, or a number of seconds")
	}
	*v.d = time.Duration(secs * float64(time.Second))
	return nil
}

// jitterValue is the --jitter flag.
type jitterValue struct{ j *retry.Jitter }

func (v jitterValue) String() string {
	if v.j == nil {
		return ""
	}
	return v.j.String()
}

func (v jitterValue) Set(s string) error {
	for _, j := range []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter} {
		if s == j.String() {
			*v.j = j
			return nil
		}
	}
	return errors.New("want none, full, equal or decorrelated")
}
