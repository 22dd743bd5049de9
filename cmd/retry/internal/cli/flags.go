package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry"
)

// FlagError is UsageError for an error of Parse in the flags of cmd, whose
// help is usage. A flag used wrongly (unknown, or without its argument)
// also gets the command's usage line, as the go command does; a flag given
// a bad value gets the message alone, which says what is wrong with the
// value.
func FlagError(w io.Writer, cmd, usage string, err error) int {
	var m *misuse
	if !errors.As(err, &m) {
		return UsageError(w, cmd, err.Error())
	}
	fmt.Fprintf(w, "retry %s: %v\n", cmd, err)
	fmt.Fprintln(w, synopsis(usage))
	fmt.Fprintf(w, "Run \"retry %s -h\" for usage.\n", cmd)
	return 2
}

// ParseDone reports whether err, what Parse returned for the flags of cmd,
// whose help is usage, ends the command before it runs, and the exit
// status: 0 after -h or --help, which print usage on std.Out (asked for,
// the help is the output), and 2 after an error, reported on std.Err as
// FlagError does.
func ParseDone(std Stdio, cmd, usage string, err error) (status int, done bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(std.Out, usage)
		return 0, true
	}
	return FlagError(std.Err, cmd, usage, err), true
}

// misuse is a flag used wrongly: unknown, or without its argument.
type misuse struct{ msg string }

func (e *misuse) Error() string { return e.msg }

// valueError matches the flag package's errors for a value a flag refuses:
// "invalid value %q for flag -%s: %v" and "invalid boolean value %q for
// -%s: %v".
var valueError = regexp.MustCompile(`^invalid (value|boolean value) (".*") for (?:flag )?-(\S+?): (.*)$`)

// Parse parses args with fs, as fs.Parse does, and says what went wrong in
// the words of retry's messages: a flag is named --name, or -x for a
// one-letter one, whichever way it was typed (the flag package takes -name
// and --name alike); an unknown flag is named as it was typed, with the
// known flag nearest to it; a value is refused with what the flag wants. It
// returns flag.ErrHelp for -h and --help.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	// The flag package's errors have no types: they are told by their
	// words.
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return &misuse{"unknown flag " + typed(fs, args, name) + suggestion(fs, name)}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return &misuse{"flag needs an argument: " + spell(name)}
	}
	if m := valueError.FindStringSubmatch(msg); m != nil {
		what, value, name, why := m[1], m[2], m[3], m[4]
		if why == "parse error" {
			why = wants(fs.Lookup(name), why)
		}
		return fmt.Errorf("invalid %s %s for %s: %s", what, value, spell(name), why)
	}
	return &misuse{msg} // "bad flag syntax: ---x", which names it as typed
}

// typed returns the flag name, unknown to fs, as args gave it: --name or
// -name. The flag package stops parsing just past the flag it does not
// know, so that it is the argument before those it left.
func typed(fs *flag.FlagSet, args []string, name string) string {
	if i := len(args) - fs.NArg() - 1; i >= 0 && i < len(args) {
		arg, _, _ := strings.Cut(args[i], "=")
		if strings.TrimLeft(arg, "-") == name {
			return arg
		}
	}
	return spell(name)
}

// spell returns how retry writes the flag name: --name, or -x for a
// one-letter one.
func spell(name string) string {
	if utf8.RuneCountInString(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// wants returns what flag f wants, in place of the flag package's "parse
// error" for a number or a boolean that is not one, or else why.
func wants(f *flag.Flag, why string) string {
	if f == nil {
		return why
	}
	getter, _ := f.Value.(flag.Getter)
	if getter == nil {
		return why
	}
	switch getter.Get().(type) {
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	case bool:
		return "want true or false"
	}
	return why
}

// BoolFlag defines a boolean flag under each of names, a short and a long
// one such as -v and --verbose, all setting *p, whose value is the default.
func BoolFlag(fs *flag.FlagSet, p *bool, names ...string) {
	for _, name := range names {
		fs.BoolVar(p, name, *p, "")
	}
}

// StringFlag is BoolFlag for a string flag, such as -o and --output.
func StringFlag(fs *flag.FlagSet, p *string, names ...string) {
	for _, name := range names {
		fs.StringVar(p, name, *p, "")
	}
}

// DurationValue is the value of a duration flag that sets *d and also
// takes a number of seconds.
func DurationValue(d *time.Duration) flag.Value { return durationValue{d} }

// durationValue is a duration flag that also takes a number of seconds.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s" // the zero value's, so that -h shows no default of 0
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		*v.d = d
		return nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(secs):
		return errors.New("want a duration such as 250ms, 1.5s or 2m, or a number of seconds")
	// At the edge, MaxInt64 ns rounds up to 2^63 as a float, which would
	// wrap to a negative Duration: hence >=.
	case err != nil || math.Abs(secs) >= math.MaxInt64/float64(time.Second):
		return errors.New("too long: a duration is at most about 292 years")
	}
	d := time.Duration(secs * float64(time.Second))
	if d == 0 && secs != 0 {
		// It would read as 0, which some flags take for "no limit".
		return errors.New("too short: a duration is at least 1ns")
	}
	*v.d = d
	return nil
}

// JitterValue is the value of a --jitter flag that sets *j.
func JitterValue(j *retry.Jitter) flag.Value { return jitterValue{j} }

// jitterValue is the --jitter flag.
type jitterValue struct{ j *retry.Jitter }

func (v jitterValue) String() string {
	if v.j == nil {
		return ""
	}
	return v.j.String()
}

func (v jitterValue) Set(s string) error {
	for _, j := range []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter} {
		if s == j.String() {
			*v.j = j
			return nil
		}
	}
	return errors.New("want none, full, equal or decorrelated")
}
