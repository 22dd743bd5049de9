package runcmd

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

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
