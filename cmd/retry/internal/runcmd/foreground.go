//go:build linux || darwin || freebsd

package runcmd

import (
	"syscall"
	"unsafe"
)

// The terminal questions "retry run" asks before it passes SIGINT or SIGHUP
// on to the command: whether the terminal has sent it there already.

// openTerminal opens retry's controlling terminal, /dev/tty, read-only. It
// fails, with ENXIO, if retry has none: it never had one (a service, a CI
// job, ssh without -t), or the terminal hung up, or the session leader
// exited.
func openTerminal() (fd int, err error) {
	// O_NONBLOCK: the open of a serial line may wait for a carrier.
	return syscall.Open("/dev/tty", syscall.O_RDONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}

// haveTerminal reports whether retry has a controlling terminal.
func haveTerminal() bool {
	fd, err := openTerminal()
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
}

// inForeground reports whether retry and the process pid are both in the
// foreground process group of retry's controlling terminal, the group to
// which the terminal sends SIGINT for a Ctrl-C. It is false if retry has no
// terminal or cannot ask it.
func inForeground(pid int) bool {
	fd, err := openTerminal()
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var fg int32 // a pid_t
	// tcgetpgrp(3) is this ioctl; TIOCGPGRP is allowed from a background
	// process group too.
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&fg))); errno != 0 || fg <= 0 {
		return false
	}
	pgid, err := syscall.Getpgid(pid)
	return err == nil && pgid == int(fg) && syscall.Getpgrp() == int(fg)
}

// hungUpWith reports whether SIGHUP, received by retry, came from the loss
// of the terminal it had when the run began, and reached the process pid as
// well. The kernel detaches a terminal that hangs up from its session before
// it sends SIGHUP, so /dev/tty no longer opens. It sends SIGHUP to the
// session leader alone; a shell there passes it on to its jobs' process
// groups, and when the leader exits the kernel sends it to the foreground
// group. So pid got it too if it is in retry's process group and retry is
// not the session leader (which would be the only one signalled, as with
// "ssh -t host retry run ..."). A "kill -HUP" sent to retry alone after its
// terminal is gone is taken for a hangup's too: --kill-after then ends pid.
func hungUpWith(pid int, hadTerminal bool) bool {
	if !hadTerminal || haveTerminal() {
		return false // a live terminal does not send SIGHUP: kill -HUP did
	}
	// getsid(2); the syscall package has no Getsid on Linux.
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if errno != 0 || int(sid) == syscall.Getpid() {
		return false
	}
	pgid, err := syscall.Getpgid(pid)
	return err == nil && pgid == syscall.Getpgrp()
}

// underJobControl reports whether a shell can continue retry once it has
// stopped: retry's parent is in its session but in another process group,
// as a job-control shell is. Otherwise retry's group is orphaned, as POSIX
// calls it (retry leads its session, or its parent left it), where the kernel
// discards a Ctrl-Z, and a process that stops itself may never be continued.
func underJobControl() bool {
	ppid := syscall.Getppid()
	psid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(ppid), 0, 0)
	if errno != 0 {
		return false
	}
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if errno != 0 || sid != psid {
		return false
	}
	ppgid, err := syscall.Getpgid(ppid)
	return err == nil && ppgid != syscall.Getpgrp()
}
