//go:build unix

package runcmd

import (
	"errors"
	"syscall"
)

// groupsWork reports whether an attempt can have a process group of its own.
const groupsWork = true

// newGroup is what starts the command as the leader of a new process group,
// whose id is its pid.
func newGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to every process of the process group pgid. As
// timeout(1) does, it follows a signal that ends a process but SIGKILL with
// SIGCONT, so that a stopped process (by Ctrl-Z, or by SIGTTIN for reading a
// terminal it does not hold) gets it too. It returns ESRCH if the group is
// gone.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	switch sig {
	case syscall.SIGKILL, syscall.SIGCONT, syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		return err
	}
	if err == nil {
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
	}
	return err
}

// groupLeft reports whether a process of the group pgid is still there. A
// zombie counts until its parent waits for it: see reapGroup.
func groupLeft(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// reapGroup waits for those processes of the group pgid that have exited and
// that retry is the parent of: with becomeSubreaper, the command's children
// that outlived it. Call it only once the command itself has been waited for.
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
