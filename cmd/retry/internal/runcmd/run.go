package runcmd

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/retrykit/retry"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

const usage = `usage: retry run [flags] -- COMMAND [ARGS...]

Runs COMMAND until it succeeds (exits 0), at most --attempts times. Between
attempts it waits with exponential backoff: about --delay before the first
retry, doubling for each further one up to --max-delay, spread by --jitter so
that many machines retrying together do not retry in step.

Flags:
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
  -k, --kill-after D grace between SIGTERM and SIGKILL; 0 = SIGKILL at once
                    (default 5s)
  --preserve-status when --timeout or --max-time stopped the last attempt,
                    exit with its status (128+N if signal N killed it), not
                    124 (as timeout --preserve-status)
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
password prompt, an editor, ssh -t) needs --foreground: without it, the
kernel stops COMMAND, and retry says so (on Linux).

SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to retry stops the current attempt and
ends the run without further attempts: COMMAND gets the signal, then SIGKILL
after --kill-after. retry passes SIGTERM on, and SIGINT and SIGQUIT unless
COMMAND is in the terminal's foreground process group (with --foreground):
there a Ctrl-C reaches COMMAND from the terminal, and is not sent twice.
SIGHUP is passed on unless the terminal hung up and the shell or the kernel
sent it to COMMAND. A second signal kills the attempt at once with SIGKILL,
without waiting for --kill-after, and ends retry; retry never exits leaving
an attempt's processes running. The same signal again within 0.2s of the
first is not a second signal but its copy, as timeout(1) and supervisors
send one to retry and another to its process group. Signals retry was
started with ignored, as by nohup, stay ignored.

Exit status: that of the last attempt, 128+N if it was killed by signal N
(or if signal N ended the run between attempts); 124 if --timeout or
--max-time stopped the last attempt, as timeout(1) (see --preserve-status);
126 if COMMAND cannot be executed (permission denied, not an executable),
127 if it is not found; 2 for a usage error.

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
	preserve   bool // --preserve-status: a timed-out attempt's own status, not 124
	verbose    bool
	quiet      bool
	argv       []string
}

// Run implements "retry run": it parses args and returns the exit status.
func Run(ctx context.Context, args []string, std cli.Stdio) int {
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
		dctx, cancel = context.WithTimeoutCause(ctx, c.maxTime, errMaxTime)
		defer cancel()
	}
	err := retry.Do(dctx, r.strategy(), func(actx context.Context) error {
		return r.attempt(ctx, actx)
	}, retry.AttemptTimeout(c.timeout), retry.OnRetry(r.retrying))
	r.outOfTime = context.Cause(dctx) == errMaxTime && ctx.Err() == nil
	return r.finish(ctx, err)
}

// errMaxTime is the cause with which --max-time ends the run's context, to
// tell it from --timeout, which ends an attempt's.
var errMaxTime = errors.New("--max-time reached")

// parseRunFlags reads the flags and the command. It returns ok false with the
// exit status when there is nothing to run: 0 after -h, 2 after a usage error.
func parseRunFlags(args []string, std cli.Stdio) (runConfig, int, bool) {
	c := runConfig{attempts: 3, delay: 100 * time.Millisecond, maxDelay: 10 * time.Second,
		jitter: retry.FullJitter, killAfter: 5 * time.Second}
	fs := c.flagSet()
	if status, done := cli.ParseDone(std, "run", usage, cli.Parse(fs, args)); done {
		return c, status, false
	}
	c.argv = fs.Args()
	if msg := c.check(); msg != "" {
		return c, cli.UsageError(std.Err, "run", msg), false
	}
	return c, 0, true
}

// flagSet returns the flags of "retry run", which set c's fields.
func (c *runConfig) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("retry run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage to stdout, errors a hint
	fs.IntVar(&c.attempts, "attempts", c.attempts, "")
	fs.Var(cli.DurationValue(&c.delay), "delay", "")
	fs.Var(cli.DurationValue(&c.maxDelay), "max-delay", "")
	fs.Var(cli.JitterValue(&c.jitter), "jitter", "")
	fs.Var(&c.onExit, "on-exit", "")
	fs.Var(cli.DurationValue(&c.timeout), "timeout", "")
	fs.Var(cli.DurationValue(&c.maxTime), "max-time", "")
	for _, name := range []string{"k", "kill-after"} { // timeout(1)'s -k
		fs.Var(cli.DurationValue(&c.killAfter), name, "")
	}
	fs.BoolVar(&c.foreground, "foreground", false, "")
	fs.BoolVar(&c.preserve, "preserve-status", false, "")
	cli.BoolFlag(fs, &c.verbose, "v", "verbose")
	cli.BoolFlag(fs, &c.quiet, "q", "quiet")
	return fs
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
