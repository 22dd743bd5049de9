package main

import (
	"os"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

func TestMain(m *testing.M) {
	os.Exit(clitest.Main(m))
}

// Help asked for is the output: it goes to stdout with status 0, for retry
// and each subcommand; without a command, the usage is an error.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"run", "-h"}, {"http", "-h"}, {"sim", "--help"}} {
		out, errOut, code := clitest.Run(t, "", args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: retry") {
			t.Errorf("%v: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout", args, code, out, errOut)
		}
	}
	if out, errOut, code := clitest.Run(t, ""); code != 2 || out != "" || !strings.HasPrefix(errOut, "usage: retry") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %.40q; want 2 and the usage on stderr", code, out, errOut)
	}
}

// A bad flag gets one line, the usage line and a pointer to -h, for every
// subcommand; a flag without its argument too. A bad value of a flag gets
// its line and the pointer.
func TestBadFlagPointsToHelp(t *testing.T) {
	t.Parallel()
	usage := map[string]string{
		"run":  "usage: retry run [flags] -- COMMAND [ARGS...]",
		"http": "usage: retry http [flags] URL",
		"sim":  "usage: retry sim [flags]",
	}
	for _, cmd := range []string{"run", "http", "sim"} {
		pointer := "Run \"retry " + cmd + " -h\" for usage.\n"
		_, errOut, code := clitest.Run(t, "", cmd, "--no-such-flag")
		want := "retry " + cmd + ": unknown flag --no-such-flag\n" + usage[cmd] + "\n" + pointer
		if code != 2 || errOut != want {
			t.Errorf("%s --no-such-flag: exit %d, stderr %q; want 2 and %q", cmd, code, errOut, want)
		}
		_, errOut, code = clitest.Run(t, "", cmd, "--attempts")
		want = "retry " + cmd + ": flag needs an argument: --attempts\n" + usage[cmd] + "\n" + pointer
		if cmd == "sim" {
			want = "retry sim: unknown flag --attempts\n" + usage[cmd] + "\n" + pointer
		}
		if code != 2 || errOut != want {
			t.Errorf("%s --attempts: exit %d, stderr %q; want 2 and %q", cmd, code, errOut, want)
		}
	}
	// Not the flag package's "parse error": what the flag wants.
	for _, tc := range []struct{ args, want string }{
		{"sim --rate lots", `retry sim: invalid value "lots" for --rate: want a number`},
		{"sim --seed -1", `retry sim: invalid value "-1" for --seed: want a whole number, 0 or more`},
		{"run --attempts 2.5", `retry run: invalid value "2.5" for --attempts: want a whole number`},
		{"http --attempts x", `retry http: invalid value "x" for --attempts: want a whole number`},
		{"sim --shed=maybe", `retry sim: invalid boolean value "maybe" for --shed: want true or false`},
		{"run --quiet=2 -- true", `retry run: invalid boolean value "2" for --quiet: want true or false`},
		{"sim --duration 1x", `retry sim: invalid value "1x" for --duration: want a duration such as 250ms, 1.5s or 2m, or a number of seconds`},
		// The largest number of seconds rounds to 2^63 ns, which wrapped to a negative duration.
		{"run --timeout 9223372036.854775807 -- true", `retry run: invalid value "9223372036.854775807" for --timeout: too long: a duration is at most about 292 years`},
		// 1e-10 s rounds to 0, which --timeout reads as no limit at all.
		{"http --timeout 1e-10 http://127.0.0.1:1/", `retry http: invalid value "1e-10" for --timeout: too short: a duration is at least 1ns`},
		{"sim --rate Inf", `retry sim: rate must be a positive number`},
		{"sim --scenario overload --capacity 500", `retry sim: the overload's capacity, 600/s (0.6 × rate), must be below the server's normal capacity, 500/s`},
	} {
		_, errOut, code := clitest.Run(t, "", strings.Fields(tc.args)...)
		if code != 2 || !strings.HasPrefix(errOut, tc.want+"\n") || strings.Count(errOut, "\n") != 2 || strings.Contains(errOut, "usage:") {
			t.Errorf("%s: exit %d, stderr %q; want 2, %q and the pointer to -h", tc.args, code, errOut, tc.want)
		}
	}
}

// --version prints the module version from the build info; a binary built
// in a work tree has none and says "(devel)".
// "retry help COMMAND" is "retry COMMAND -h".
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "http", "sim"} {
		got, _, code := clitest.Run(t, "", "help", cmd)
		want, _, _ := clitest.Run(t, "", cmd, "-h")
		if code != 0 || got != want || !strings.HasPrefix(got, "usage: retry "+cmd) {
			t.Errorf("retry help %s: exit %d, %.60q; want retry %s -h's %.60q", cmd, code, got, cmd, want)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, errOut, code := clitest.Run(t, "", "--version")
	if code != 0 || errOut != "" || (out != "retry (devel)\n" && !strings.HasPrefix(out, "retry v")) {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and \"retry VERSION\"", code, out, errOut)
	}
}
