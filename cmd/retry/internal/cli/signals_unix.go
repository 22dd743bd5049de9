//go:build unix

package cli

import (
	"os"
	"syscall"
)

// Suspends stop retry, to be continued later, rather than end a run: a
// terminal sends SIGTSTP for a Ctrl-Z.
var Suspends = []os.Signal{syscall.SIGTSTP}
