package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// FlagError is UsageError for what the flag package could not parse in
// the flags of cmd, whose help is usage. A flag used wrongly (unknown, or
// without its argument) also gets the command's usage line, as the go
// command does; a flag given a bad value gets the message alone, which says
// what is wrong with the value.
func FlagError(w io.Writer, cmd, usage string, fs *flag.FlagSet, err error) int {
	// The flag package's errors have no types; its value errors all start
	// so ("invalid value", "invalid boolean value").
	if strings.HasPrefix(err.Error(), "invalid ") {
		return UsageError(w, cmd, clearParseError(fs, err.Error()))
	}
	fmt.Fprintf(w, "retry %s: %v\n", cmd, err)
	fmt.Fprintln(w, synopsis(usage))
	fmt.Fprintf(w, "Run \"retry %s -h\" for usage.\n", cmd)
	return 2
}

// clearParseError replaces the "parse error" with which the flag package
// rejects a number or a boolean that is not one with what the flag wants.
func clearParseError(fs *flag.FlagSet, msg string) string {
	head, ok := strings.CutSuffix(msg, ": parse error")
	_, name, found := strings.Cut(head, " for flag -")
	if !found {
		_, name, _ = strings.Cut(head, " for -") // "invalid boolean value"
	}
	f := fs.Lookup(name)
	if !ok || f == nil {
		return msg
	}
	getter, _ := f.Value.(flag.Getter)
	if getter == nil {
		return msg
	}
	switch getter.Get().(type) {
	case int, int64:
		return head + ": want a whole number"
	case uint, uint64:
		return head + ": want a whole number, 0 or more"
	case float64:
		return head + ": want a number"
	case bool:
		return head + ": want true or false"
	}
	return msg
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
