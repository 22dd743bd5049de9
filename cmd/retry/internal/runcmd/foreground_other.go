//go:build !(linux || darwin || freebsd)

package runcmd

// On other systems "retry run" does not ask the terminal: it always passes
// SIGINT, SIGQUIT and SIGHUP on to the command, and does not stop with it.
// See foreground.go.

func haveTerminal() bool { return false }

func inForeground(pid int) bool { return false }

func hungUpWith(pid int, hadTerminal bool) bool { return false }

func underJobControl() bool { return false }
