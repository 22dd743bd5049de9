// Command retry retries commands and HTTP requests with retrykit's
// strategies, and simulates what retries do to a struggling server.
//
//	retry run [flags] -- COMMAND [ARGS...]   run a command until it succeeds
//	retry http [flags] URL                   an HTTP request, retried safely
//	retry sim [flags]                        a retry-storm simulator
//
// Run "retry COMMAND -h" for the flags of each.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// command is one subcommand: it parses args and returns the exit status.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdio stdio) int
}

// stdio is where a command reads and writes, so that tests can capture it.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func commands() map[string]command {
	return map[string]command{
		"run":  {"run a command until it succeeds", runCommand},
		"http": {"send an HTTP request, retried safely", httpCommand},
		"sim":  {"simulate what retries do to a struggling server", simCommand},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr}))
}

func dispatch(args []string, io stdio) int {
	cmds := commands()
	if len(args) == 0 {
		usage(io.err, cmds)
		return 2
	}
	if args[0] == "help" && len(args) == 2 {
		if _, ok := cmds[args[1]]; ok { // "retry help sim" is "retry sim -h"
			args = []string{args[1], "-h"}
		}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(io.out, cmds) // asked for: the usage is the output
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(io.out, "retry", version())
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(io.err, "retry: unknown command %q\n\n", args[0])
		usage(io.err, cmds)
		return 2
	}
	// The first SIGINT or SIGTERM, and for run SIGHUP and SIGQUIT too,
	// cancels the context; commands decide what that means (run passes it on
	// to the command). Then retry stops listening, so that a second one ends
	// it with the default action even if a command is slow to react (run
	// passes that one on before it goes). A signal retry was started with
	// ignored, as by nohup, stays ignored.
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if args[0] == "run" {
		sigs = runSignals
	}
	ctx := context.Background()
	if sigs = catchable(sigs...); len(sigs) > 0 { // NotifyContext with none would catch all
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, sigs...)
		defer stop()
		context.AfterFunc(ctx, stop)
	}
	return cmd.run(ctx, args[1:], io)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: retry COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, name := range []string{"run", "http", "sim"} {
		fmt.Fprintf(w, "  %-5s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "retry COMMAND -h" for a command's flags, "retry --version" for the version.`)
}

// version is the module version the binary was built from, as go install
// records it; "(devel)" for a build in a work tree.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
