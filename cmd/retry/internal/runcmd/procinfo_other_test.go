//go:build unix && !linux

package runcmd

import "syscall"

// ignores would report whether process pid ignores sig: here ok is always
// false, as there is no /proc/pid/status to read it from.
func ignores(pid int, sig syscall.Signal) (ignored, ok bool) { return false, false }

// exitedUnwaited would report whether child process pid has exited and
// waits to be waited for: here it is always false, for want of /proc.
func exitedUnwaited(pid int) bool { return false }
