//go:build !unix

package cli

import "os"

// Without SIGTSTP (Windows), nothing stops retry: see signals_unix.go.
var Suspends []os.Signal
