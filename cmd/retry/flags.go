package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

// usageError prints msg and a pointer to the command's help, and
// returns the exit status of a usage error.
func usageError(w io.Writer, cmd, msg string) int {
	fmt.Fprintf(w, "retry %s: %s\n", cmd, msg)
	fmt.Fprintf(w, "Run \"retry %s -h\" for usage.\n", cmd)
	return 2
}

// flagError is usageError for what the flag package could not parse. A flag
// used wrongly (unknown, or without its argument) also gets the command's
// usage line, as the go command does; a flag given a bad value gets the
// message alone, which says what is wrong with the value.
func flagError(w io.Writer, cmd string, fs *flag.FlagSet, err error) int {
	// The flag package's errors have no types; its value errors all start
	// so ("invalid value", "invalid boolean value").
	if strings.HasPrefix(err.Error(), "invalid ") {
		return usageError(w, cmd, clearParseError(fs, err.Error()))
	}
	fmt.Fprintf(w, "retry %s: %v\n", cmd, err)
	fmt.Fprintln(w, synopsis(cmd))
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

// synopsis returns the first line of cmd's help: how it is called.
func synopsis(cmd string) string {
	var help string
	switch cmd {
	case "run":
		help = runUsage
	case "http":
		help = httpUsage
	case "sim":
		help = simUsage
	}
	line, _, _ := strings.Cut(help, "\n")
	return line
}

// boolFlag defines a boolean flag under each of names, a short and a long
// one such as -v and --verbose, all setting *p, whose value is the default.
func boolFlag(fs *flag.FlagSet, p *bool, names ...string) {
	for _, name := range names {
		fs.BoolVar(p, name, *p, "")
	}
}

// stringFlag is boolFlag for a string flag, such as -o and --output.
func stringFlag(fs *flag.FlagSet, p *string, names ...string) {
	for _, name := range names {
		fs.StringVar(p, name, *p, "")
	}
}

// exitCodes is the --on-exit list: the exit statuses that are retried.
type exitCodes []int

// retries reports whether status is retried: any non-zero status if the list
// was not given.
func (c exitCodes) retries(status int) bool {
	if c == nil {
		return status != 0
	}
	return slices.Contains(c, status)
}

func (c *exitCodes) String() string {
	if c == nil || *c == nil {
		return "any non-zero status"
	}
	s := make([]string, len(*c))
	for i, code := range *c {
		s[i] = strconv.Itoa(code)
	}
	return strings.Join(s, ",")
}

// Set adds comma-separated statuses, each from 1 to 255.
func (c *exitCodes) Set(v string) error {
	for field := range strings.SplitSeq(v, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || code < 1 || code > 255 {
			return fmt.Errorf("want exit statuses from 1 to 255 separated by commas, such as 1,75; %q is not one", field)
		}
		*c = append(*c, code)
	}
	return nil
}

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
