package runcmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

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

// exitOnSecondSignal arranges that once a first of cli.Interrupts has cancelled
// ctx (retry's main then stops listening for them), a second one kills the
// attempt and then ends retry with the signal's default action, without
// waiting for the attempt's --kill-after. The same signal again just after
// the first is not a second one but its copy (see copyWindow). It returns
// the function that undoes it.
//
// It listens from the start rather than from when ctx ends: a second Ctrl-C
// that came before retry had reacted to the first would otherwise be lost
// (main's channel holds one signal), and retry would wait for a command
// that ignores SIGINT. Each signal reaches both channels, so the first one
// this one hears is the one that ended ctx, unless something else ended ctx
// before any signal came.
func (r *runner) exitOnSecondSignal(ctx context.Context) (undo func()) {
	sigs := cli.Catchable(cli.Interrupts...)
	if len(sigs) == 0 { // Notify with no signals relays all
		return func() {}
	}
	ch := make(chan os.Signal, 2)
	quit := make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		var series signalSeries
		for {
			select {
			case s := <-ch:
				sig := s.(syscall.Signal)
				endedOtherwise := ctx.Err() != nil && context.Cause(ctx) == ctx.Err()
				if series.add(sig, time.Now()) || endedOtherwise {
					r.exitOn(sig)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}

// exitOn ends retry with sig's default action, a second signal, once it has
// killed the running attempt: retry never leaves an attempt's processes
// running behind it. It holds r.mu to the end, so that the attempt, which
// takes it once it is over, cannot start another or end retry otherwise.
func (r *runner) exitOn(sig syscall.Signal) {
	r.mu.Lock()
	if p := r.running; p != nil {
		_ = r.signal(p, syscall.SIGKILL)
		if !r.c.quiet {
			fmt.Fprintf(r.std.Err, "retry: second %s: killed %s (pid %d)\n", cli.SignalName(sig), r.c.argv[0], p.Pid)
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

// stopSignal is the signal that ended ctx, one of cli.Interrupts, to be passed
// on to the command; SIGTERM if ctx is still running (an attempt timed out).
func stopSignal(ctx context.Context) syscall.Signal {
	if s, ok := cli.InterruptedBy(ctx); ok {
		return s
	}
	return syscall.SIGTERM
}
