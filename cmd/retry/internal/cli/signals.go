package cli

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// Interrupts stop "retry run": retry's main cancels the run's context on
// the first of them (http and sim stop on SIGINT and SIGTERM alone). A
// terminal sends SIGINT for a Ctrl-C, SIGQUIT for a Ctrl-\ and SIGHUP when
// it hangs up.
var Interrupts = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// ignoredAtStart holds those of Interrupts and Suspends that retry was
// started with ignored: SIGHUP under nohup, SIGINT for a command a shell
// script runs in the background. It is read before anything listens for
// signals: signal.Notify stops ignoring a signal, for retry and for the
// commands it starts, which would undo nohup.
var ignoredAtStart = func() map[os.Signal]bool {
	m := make(map[os.Signal]bool)
	for _, s := range append(slices.Clone(Interrupts), Suspends...) {
		m[s] = signal.Ignored(s)
	}
	return m
}()

// Catchable returns the signals in sigs that retry may listen for: those it
// was not started with ignored, which stay ignored.
func Catchable(sigs ...os.Signal) []os.Signal {
	var c []os.Signal
	for _, s := range sigs {
		if !ignoredAtStart[s] {
			c = append(c, s)
		}
	}
	return c
}

// InterruptedBy reports the signal that cancelled ctx, the context of
// signal.NotifyContext, whose cause names the signal. The cause stays after
// NotifyContext's stop.
func InterruptedBy(ctx context.Context) (syscall.Signal, bool) {
	if ctx.Err() == nil {
		return 0, false
	}
	cause := context.Cause(ctx).Error()
	for _, s := range Interrupts {
		if cause == s.String()+" signal received" {
			return s.(syscall.Signal), true
		}
	}
	return syscall.SIGTERM, true // cancelled some other way: say SIGTERM
}
