package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

// testFlags is a flag set with a flag of each kind the commands define.
func testFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		n     int
		d     time.Duration
		quiet bool
		out   string
	)
	fs.IntVar(&n, "attempts", 3, "")
	fs.Var(DurationValue(&d), "max-time", "")
	fs.Var(DurationValue(&d), "m", "")
	BoolFlag(fs, &quiet, "q", "quiet")
	StringFlag(fs, &out, "o", "output")
	return fs
}

// Parse's errors name a known flag --name or -x however it was typed, an
// unknown one as it was typed, and say what a refused value should be.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   string
		misuse bool // gets the usage line
	}{
		{[]string{"--atempts", "2"}, "unknown flag --atempts; did you mean --attempts?", true},
		{[]string{"-q", "-atempts=2"}, "unknown flag -atempts; did you mean --attempts?", true},
		{[]string{"--max-time-total", "2s"}, "unknown flag --max-time-total; did you mean --max-time?", true},
		{[]string{"-x"}, "unknown flag -x", true},
		{[]string{"--nothing-like-it"}, "unknown flag --nothing-like-it", true},
		{[]string{"-attempts"}, "flag needs an argument: --attempts", true},
		{[]string{"-m"}, "flag needs an argument: -m", true},
		{[]string{"---q"}, "bad flag syntax: ---q", true},
		{[]string{"-attempts", "x"}, `invalid value "x" for --attempts: want a whole number`, false},
		{[]string{"-m=soon"}, `invalid value "soon" for -m: want a duration such as 250ms, 1.5s or 2m, or a number of seconds`, false},
		{[]string{"--quiet=maybe"}, `invalid boolean value "maybe" for --quiet: want true or false`, false},
	} {
		err := Parse(testFlags(), tc.args)
		var m *misuse
		if err == nil || err.Error() != tc.want || errors.As(err, &m) != tc.misuse {
			t.Errorf("Parse(%q) = %v (usage line %t); want %q (usage line %t)", tc.args, err, m != nil, tc.want, tc.misuse)
		}
	}
	if err := Parse(testFlags(), []string{"-attempts", "2", "--max-time", "1s", "-q"}); err != nil {
		t.Errorf("-name and --name: %v", err)
	}
	if err := Parse(testFlags(), []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
}

// A flag used wrongly gets the usage line between the message and the
// pointer to -h; a refused value does not.
func TestFlagError(t *testing.T) {
	const usage = "usage: retry test [flags]\n\nMore help.\n"
	var b bytes.Buffer
	if code := FlagError(&b, "test", usage, Parse(testFlags(), []string{"--bogus"})); code != 2 ||
		b.String() != "retry test: unknown flag --bogus\nusage: retry test [flags]\nRun \"retry test -h\" for usage.\n" {
		t.Errorf("unknown flag: exit %d, %q", code, b.String())
	}
	b.Reset()
	if code := FlagError(&b, "test", usage, Parse(testFlags(), []string{"--attempts=x"})); code != 2 ||
		b.String() != "retry test: invalid value \"x\" for --attempts: want a whole number\nRun \"retry test -h\" for usage.\n" {
		t.Errorf("bad value: exit %d, %q", code, b.String())
	}
}
