package httpcmd

import (
	"flag"
	"strings"
)

// splitShortFlags rewrites the short flags curl users run together, as
// curl reads them, into the one flag per argument that package flag reads:
// -fsS is -f -s -S, and a letter that takes a value takes the rest of the
// argument, or else the next one: -XPOST is -X POST, -sSo- is -s -S -o -,
// -sSo FILE is -s -S -o FILE. An argument that names a flag of fs, such as
// -attempts, is left as it is, as is one that is not all known letters (for
// the flag package to refuse), and everything after "--" or in a flag's
// value.
func splitShortFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(out, args[i:]...)
		}
		name, hasValue := flagName(arg)
		if f := fs.Lookup(name); f != nil || name == "" {
			out = append(out, arg)
			if f != nil && !hasValue && !isBool(f) && i+1 < len(args) {
				i++ // the value, which may start with a dash
				out = append(out, args[i])
			}
			continue
		}
		split, ok := splitLetters(fs, arg[1:])
		if !ok {
			out = append(out, arg)
			continue
		}
		out = append(out, split...)
		if last := fs.Lookup(strings.TrimPrefix(split[len(split)-1], "-")); last != nil && !isBool(last) && i+1 < len(args) {
			i++ // -sSo FILE: the last letter's value is the next argument
			out = append(out, args[i])
		}
	}
	return out
}

// splitLetters reads letters, the part of -fsS after the dash, as one-letter
// flags of fs, and returns them as separate arguments; ok is false if one
// is not a flag. A letter that takes a value ends the run with the rest as
// its value.
func splitLetters(fs *flag.FlagSet, letters string) (split []string, ok bool) {
	if strings.HasPrefix(letters, "-") {
		return nil, false // --name: a long flag, unknown
	}
	for i, r := range letters {
		f := fs.Lookup(string(r))
		if f == nil {
			return nil, false
		}
		split = append(split, "-"+string(r))
		if !isBool(f) {
			if rest := letters[i+len(string(r)):]; rest != "" {
				split = append(split, rest)
			}
			return split, true
		}
	}
	return split, true
}

// flagName returns the name of the flag that arg, such as -v, --data or
// --max-time=5, sets, and whether arg holds its value; "" if arg is not a
// flag (a URL, "-", a value).
func flagName(arg string) (name string, hasValue bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false
	}
	name = strings.TrimPrefix(arg[1:], "-")
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue
}

// isBool reports whether f is a flag that takes no value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
