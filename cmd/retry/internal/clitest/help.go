package clitest

import (
	"bytes"
	"context"
	"strings"

	"flag"
	"github.com/retrykit/retry/cmd/retry/internal/cli"
	"regexp"
	"testing"
)

// CheckHelp fails the test unless help, a command's -h text, names every
// flag of fs, which the command parses, as retry spells it, --name or -x
// for a one-letter flag, and names none of the longer ones with a single
// dash, as Go's flag package prints them.
func CheckHelp(t testing.TB, help string, fs *flag.FlagSet) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		name := regexp.QuoteMeta(f.Name)
		if len(f.Name) == 1 {
			if !regexp.MustCompile(`(^|[^-\w])-` + name + `([^-\w]|$)`).MatchString(help) {
				t.Errorf("the help does not name -%s", f.Name)
			}
			return
		}
		if !regexp.MustCompile(`(^|[^-\w])--` + name + `([^-\w]|$)`).MatchString(help) {
			t.Errorf("the help does not name --%s", f.Name)
		}
		if m := regexp.MustCompile(`(^|[^-\w])-` + name + `([^-\w]|$)`).FindString(help); m != "" {
			t.Errorf("the help names --%s with one dash: %q", f.Name, m)
		}
	})
}

// CheckMisuse fails the test unless run, the Run of the command cmd whose
// help begins with the line synopsis, given args, exits 2 and writes msg,
// synopsis and the pointer to its -h on stderr, as for a flag used wrongly,
// and nothing on stdout. It runs the command in the test's own process.
func CheckMisuse(t testing.TB, run func(context.Context, []string, cli.Stdio) int, cmd, synopsis string, args []string, msg string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut})
	want := "retry " + cmd + ": " + msg + "\n" + synopsis + "\nRun \"retry " + cmd + " -h\" for usage.\n"
	if code != 2 || errOut.String() != want || out.Len() != 0 {
		t.Errorf("retry %s %q: exit %d, stderr %q, stdout %q; want 2 and %q", cmd, args, code, errOut.String(), out.String(), want)
	}
}
