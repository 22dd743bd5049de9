//go:build !linux

package runcmd

// watchTerminalStops does nothing where /proc does not show a process's
// state: see ttystop_linux.go.
func (r *runner) watchTerminalStops(pid int) (end func()) { return func() {} }
