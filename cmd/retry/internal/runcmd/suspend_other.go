//go:build !unix

package runcmd

// Without SIGTSTP (Windows), nothing stops retry: see suspend_unix.go.
func (r *runner) followStops() (undo func()) { return func() {} }
