//go:build !unix

package main

import "os"

// Without SIGTSTP (Windows), nothing stops retry: see suspend_unix.go.

var stopSignals []os.Signal

func (r *runner) followStops() (undo func()) { return func() {} }
