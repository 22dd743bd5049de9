// Package cli is what the subcommands of retry share: where they read and
// write, how they report a usage error, their flags' parsing and values,
// the signals that stop them, and the words of their messages.
package cli

import (
	"fmt"
	"io"
	"strings"
)

// Stdio is where a command reads and writes, so that tests can capture it.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// UsageError prints msg and a pointer to the command's help, and
// returns the exit status of a usage error.
func UsageError(w io.Writer, cmd, msg string) int {
	fmt.Fprintf(w, "retry %s: %s\n", cmd, msg)
	fmt.Fprintf(w, "Run \"retry %s -h\" for usage.\n", cmd)
	return 2
}

// synopsis returns the first line of a command's help, usage: how it is
// called.
func synopsis(usage string) string {
	line, _, _ := strings.Cut(usage, "\n")
	return line
}
