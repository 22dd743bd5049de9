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
	"syscall"

	"github.com/retrykit/retry/cmd/retry/internal/cli"

	"github.com/retrykit/retry/cmd/retry/internal/runcmd"

	"github.com/retrykit/retry/cmd/retry/internal/httpcmd"

	"github.com/retrykit/retry/cmd/retry/internal/simcmd"
)

// command is one subcommand: run parses args and returns the exit status;
// the first of signals cancels its context.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, std cli.Stdio) int
	signals []os.Signal
}

func commands() map[string]command {
	stop := []os.Signal{os.Interrupt, syscall.SIGTERM}
	return map[string]command{
		"run":  {"run a command until it succeeds", runcmd.Run, cli.Interrupts},
		"http": {"send an HTTP request, retried safely", httpcmd.Run, stop},
		"sim":  {"simulate what retries do to a struggling server", simcmd.Run, stop},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}

func dispatch(args []string, std cli.Stdio) int {
	cmds := commands()
	if len(args) == 0 {
		usage(std.Err, cmds)
		return 2
	}
	if args[0] == "help" && len(args) == 2 {
		if _, ok := cmds[args[1]]; ok { // "retry help sim" is "retry sim -h"
			args = []string{args[1], "-h"}
		}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(std.Out, cmds) // asked for: the usage is the output
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(std.Out, "retry", cli.Version())
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(std.Err, "retry: unknown command %q\n\n", args[0])
		usage(std.Err, cmds)
		return 2
	}
	// The first SIGINT or SIGTERM, and for run SIGHUP and SIGQUIT too,
	// cancels the context; commands decide what that means (run passes it on
	// to the command). Then retry stops listening, so that a second one ends
	// it with the default action even if a command is slow to react (run
	// passes that one on before it goes). A signal retry was started with
	// ignored, as by nohup, stays ignored.
	ctx := context.Background()
	if sigs := cli.Catchable(cmd.signals...); len(sigs) > 0 { // NotifyContext with none would catch all
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, sigs...)
		defer stop()
		context.AfterFunc(ctx, stop)
	}
	return cmd.run(ctx, args[1:], std)
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
