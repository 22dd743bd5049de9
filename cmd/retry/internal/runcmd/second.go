package runcmd

import (
	"syscall"
	"time"
)

// copyWindow is how soon after the first signal the same signal again is
// taken for a copy of it rather than a second signal.
//
// The copy comes from a sender that signals retry and then retry's process
// group, as timeout(1) does (kill(child), then kill(0)), or a supervisor
// that signals a process and then its group: two kill calls made back to
// back, microseconds apart, or some milliseconds on a loaded machine. Often
// the kernel, or Go's runtime, merges the two into one; when it does not,
// the copy must not end retry as a second signal would, cutting short the
// attempt's --kill-after. A person's second Ctrl-C comes later: after seeing
// that the first did not end the run, or, typed in a hurry, some tenths of
// a second after it; a held key repeats only after the keyboard's delay. At
// worst a very quick double Ctrl-C counts once, and the next one ends the
// run: a second signal too many, never an attempt left running.
//
// Why not the sender: the kernel tells a signal handler who sent the signal
// (siginfo's si_pid), which would name the copy exactly; sudo uses it so as
// not to relay a signal twice. But Go's os/signal does not pass siginfo on,
// and taking signals from Go's runtime (a signalfd needs them blocked in
// every thread) cannot be done from Go. Nor would the sender suffice: a
// terminal's two Ctrl-Cs both come from the kernel, and a shell's two
// "kill" builtins from the one shell.
const copyWindow = 200 * time.Millisecond

// signalSeries tells, signal by signal, whether one of runSignals is a
// second signal: the first is the one that stopped the run.
type signalSeries struct {
	first   syscall.Signal // 0 until one came
	firstAt time.Time
	second  bool
}

// add records sig, received at now, and reports whether it is a second
// signal: any signal after the first, except the same one again within
// copyWindow of it.
func (s *signalSeries) add(sig syscall.Signal, now time.Time) bool {
	switch {
	case s.second:
	case s.first == 0:
		s.first, s.firstAt = sig, now
		return false
	case sig == s.first && now.Sub(s.firstAt) < copyWindow:
		return false // a copy of the first
	}
	s.second = true
	return true
}
