package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// A change is one requirement or replacement moved to the release version.
type change struct {
	File string // go.mod or go.work, relative to the repository root
	Verb string // require or replace
	Path string
	Old  string
	New  string
}

func (c change) String() string {
	return fmt.Sprintf("%-22s %s %s %s -> %s", c.File, c.Verb, c.Path, c.Old, c.New)
}

// setRequirements sets every requirement of the project's own modules in a
// go.mod to version v. It leaves the rest of the file as written.
func setRequirements(file string, data []byte, own func(string) bool, v string) ([]byte, []change, error) {
	mf, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, nil, err
	}
	var changes []change
	for _, r := range mf.Require {
		if !own(r.Mod.Path) || r.Mod.Version == v {
			continue
		}
		changes = append(changes, change{File: file, Verb: "require", Path: r.Mod.Path, Old: r.Mod.Version, New: v})
		// AddRequire rewrites the existing line in place.
		if err := mf.AddRequire(r.Mod.Path, v); err != nil {
			return nil, nil, err
		}
	}
	if len(changes) == 0 {
		return data, nil, nil
	}
	mf.Cleanup()
	out, err := mf.Format()
	return out, changes, err
}

// dropOwnSums removes the go.sum lines of the project's own modules: their
// hashes change with every release, and go mod tidy refuses a hash that
// differs from the one go.sum holds.
func dropOwnSums(data []byte, own func(string) bool) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(data) {
		if f := strings.Fields(string(line)); len(f) > 0 && own(f[0]) {
			continue
		}
		out.Write(line)
	}
	return out.Bytes()
}

// setWorkReplaces moves go.work's replacements of the project's own modules
// to version v (they must not vanish: until the tags are public, the
// workspace could not find the version the go.mod files now require), and
// raises go.work's go line to goVersion when that is higher (go.work must
// be at least every module's go line).
func setWorkReplaces(data []byte, own func(string) bool, v, goVersion string) ([]byte, []change, error) {
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, nil, err
	}
	// Edit the lines themselves, so that the file keeps its layout and
	// comments (modfile's formatter would space out consecutive replace
	// lines).
	lines := strings.SplitAfter(string(data), "\n")
	var changes []change
	for _, r := range wf.Replace {
		if !own(r.Old.Path) || r.Old.Version == "" || r.Old.Version == v {
			continue
		}
		i := r.Syntax.Start.Line - 1
		if i < 0 || i >= len(lines) {
			return nil, nil, fmt.Errorf("go.work: cannot find the replace line of %s", r.Old.Path)
		}
		line, ok := replaceWord(lines[i], r.Old.Version, v)
		if !ok || !strings.Contains(line, r.Old.Path) {
			return nil, nil, fmt.Errorf("go.work: cannot read the replace line of %s", r.Old.Path)
		}
		lines[i] = line
		changes = append(changes, change{File: "go.work", Verb: "replace", Path: r.Old.Path, Old: r.Old.Version, New: v})
	}
	if goVersion != "" && wf.Go != nil && goLess(wf.Go.Version, goVersion) {
		i := wf.Go.Syntax.Start.Line - 1
		line, ok := replaceWord(lines[i], wf.Go.Version, goVersion)
		if !ok {
			return nil, nil, fmt.Errorf("go.work: cannot read the go line")
		}
		lines[i] = line
		changes = append(changes, change{File: "go.work", Verb: "go", Old: wf.Go.Version, New: goVersion})
	}
	if len(changes) == 0 {
		return data, nil, nil
	}
	out := []byte(strings.Join(lines, ""))
	// What was written must read back as meant.
	if _, err := modfile.ParseWork("go.work", out, nil); err != nil {
		return nil, nil, err
	}
	return out, changes, nil
}

// replaceWord replaces the first whitespace-separated word old in line
// with repl.
func replaceWord(line, old, repl string) (string, bool) {
	for i := 0; i+len(old) <= len(line); {
		j := strings.Index(line[i:], old)
		if j < 0 {
			return line, false
		}
		j += i
		end := j + len(old)
		if (j == 0 || isSpace(line[j-1])) && (end == len(line) || isSpace(line[end])) {
			return line[:j] + repl + line[end:], true
		}
		i = j + 1
	}
	return line, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// goLine returns the go line of a go.mod, "" if it has none.
func goLine(file string, data []byte) (string, error) {
	mf, err := modfile.ParseLax(file, data, nil)
	if err != nil {
		return "", err
	}
	if mf.Go == nil {
		return "", nil
	}
	return mf.Go.Version, nil
}

// goLess reports whether Go version a is before b, in the go command's
// order: 1.26 (the language) < 1.26rc1 < 1.26.0 < 1.26.1.
func goLess(a, b string) bool {
	return goKey(a).less(goKey(b))
}

type goVersion struct{ major, minor, kind, n int } // kind: 0 language, 1 beta, 2 rc, 3 release

func (x goVersion) less(y goVersion) bool {
	for _, d := range [...]int{x.major - y.major, x.minor - y.minor, x.kind - y.kind, x.n - y.n} {
		if d != 0 {
			return d < 0
		}
	}
	return false
}

func goKey(s string) goVersion {
	var v goVersion
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	major, rest, _ := strings.Cut(s, ".")
	v.major = num(major)
	switch {
	case strings.Contains(rest, "."):
		minor, patch, _ := strings.Cut(rest, ".")
		v.minor, v.kind, v.n = num(minor), 3, num(patch)
	case strings.Contains(rest, "rc"):
		minor, n, _ := strings.Cut(rest, "rc")
		v.minor, v.kind, v.n = num(minor), 2, num(n)
	case strings.Contains(rest, "beta"):
		minor, n, _ := strings.Cut(rest, "beta")
		v.minor, v.kind, v.n = num(minor), 1, num(n)
	default:
		v.minor = num(rest)
	}
	return v
}
