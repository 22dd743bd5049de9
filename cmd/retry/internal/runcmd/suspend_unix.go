//go:build unix

package runcmd

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/retrykit/retry/cmd/retry/internal/cli"
)

// followStops arranges that when retry is stopped by SIGTSTP (a Ctrl-Z,
// which the terminal sends to retry's process group and not to the
// attempt's), the attempt's group stops too, and that it continues when
// retry does (a shell's fg or bg): stopped and continued, retry and its
// command are one job, as they were in one group. With --foreground they
// are, and the terminal stops both: retry keeps SIGTSTP's default action.
// It returns the function that undoes it.
func (r *runner) followStops() (undo func()) {
	sigs := cli.Catchable(cli.Suspends...)
	if !r.group || len(sigs) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	quit, done := make(chan struct{}), make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		defer close(done)
		for {
			select {
			case <-ch:
				r.suspend()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
		<-done
	}
}

// suspend stops the running attempt's group with SIGTSTP, which a command
// may catch to restore the terminal before it stops, then retry itself, with
// SIGSTOP; once retry is continued, it continues the attempt. Where no shell
// would continue retry (see underJobControl), it does nothing, as the
// kernel does with a Ctrl-Z there.
func (r *runner) suspend() {
	if !underJobControl() {
		return
	}
	r.mu.Lock()
	p := r.running
	r.suspended = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.suspended = false
		r.mu.Unlock()
	}()
	if p != nil {
		_ = signalGroup(p.Pid, syscall.SIGTSTP)
	}
	// SIGSTOP stops retry soon, but may let this goroutine run on for a
	// moment (the kernel may hand it to another thread): wait for the
	// SIGCONT that ends the stop, rather than continue the attempt at once.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	if syscall.Kill(os.Getpid(), syscall.SIGSTOP) == nil {
		<-cont
	}
	if p != nil {
		_ = signalGroup(p.Pid, syscall.SIGCONT)
	}
}
