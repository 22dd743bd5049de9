package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// A modInfo is one module of the workspace that a release tags.
type modInfo struct {
	Dir   string   // slash-separated, relative to the repository root: "." or "grpcretry"
	Path  string   // module path
	Reqs  []string // paths of the project's own modules it requires
	Level int      // 0 for a module that requires none of the project's, else 1 + the highest level it requires
}

// Tag is the module's tag at version v: the module's directory, then v, as
// the go command looks for it (go.dev/ref/mod#vcs-version).
func (m *modInfo) Tag(v string) string {
	if m.Dir == "." {
		return v
	}
	return m.Dir + "/" + v
}

// A workspace is the repository's modules as go.work ties them together.
type workspace struct {
	Root     string     // repository root, absolute
	RootPath string     // the root module's path
	Modules  []*modInfo // released modules, in the order their tags are pushed
	Skipped  []string   // directories of workspace modules a release does not tag (tools)
}

// unreleased reports whether the module in dir is left out of releases:
// the repository's own tools, which no user imports.
func unreleased(dir string) bool {
	return dir == "tools" || strings.HasPrefix(dir, "tools/")
}

// loadWorkspace reads go.work at root and every go.mod it uses, and orders
// the modules so that each comes after every project module it requires.
func loadWorkspace(root string) (*workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, fmt.Errorf("run from the repository root (the directory of go.work): %w", err)
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	ws := &workspace{Root: root}
	var all []*modInfo
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
			return nil, fmt.Errorf("go.work uses %s, outside the repository", u.Path)
		}
		gm := filepath.Join(root, filepath.FromSlash(dir), "go.mod")
		data, err := os.ReadFile(gm)
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(gm, data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module line", gm)
		}
		if len(mf.Replace) > 0 {
			// A replace in a go.mod breaks go install ...@version of it.
			return nil, fmt.Errorf("%s: replace directives belong in go.work, not in a go.mod (go install ...@version refuses a module that has one)", gm)
		}
		m := &modInfo{Dir: dir, Path: mf.Module.Mod.Path}
		for _, r := range mf.Require {
			m.Reqs = append(m.Reqs, r.Mod.Path)
		}
		if dir == "." {
			ws.RootPath = m.Path
		}
		all = append(all, m)
	}
	if ws.RootPath == "" {
		return nil, errors.New("go.work does not use the repository root (use .)")
	}
	released := map[string]*modInfo{}
	for _, m := range all {
		if unreleased(m.Dir) {
			ws.Skipped = append(ws.Skipped, m.Dir)
			continue
		}
		if want := ws.modulePath(m.Dir); m.Path != want {
			// The tag dir/vX names module path root/dir only.
			return nil, fmt.Errorf("%s/go.mod: module %s; a tag %s would name %s", m.Dir, m.Path, m.Tag("vX.Y.Z"), want)
		}
		released[m.Path] = m
		ws.Modules = append(ws.Modules, m)
	}
	for _, m := range ws.Modules {
		m.Reqs = slices.DeleteFunc(m.Reqs, func(p string) bool { return !ws.own(p) })
		for _, p := range m.Reqs {
			if released[p] == nil {
				return nil, fmt.Errorf("%s requires %s, which go.work does not release", m.Path, p)
			}
		}
	}
	if err := setLevels(ws.Modules, released); err != nil {
		return nil, err
	}
	slices.SortStableFunc(ws.Modules, func(a, b *modInfo) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Dir, b.Dir))
	})
	return ws, nil
}

// modulePath is the path of the module in dir.
func (ws *workspace) modulePath(dir string) string {
	if dir == "." {
		return ws.RootPath
	}
	return ws.RootPath + "/" + dir
}

// own reports whether p is the path of one of the project's modules.
func (ws *workspace) own(p string) bool {
	return p == ws.RootPath || strings.HasPrefix(p, ws.RootPath+"/")
}

// levels groups the modules by level, lowest first.
func (ws *workspace) levels() [][]*modInfo {
	var out [][]*modInfo
	for _, m := range ws.Modules {
		if len(out) <= m.Level {
			out = append(out, nil)
		}
		out[m.Level] = append(out[m.Level], m)
	}
	return out
}

// setLevels gives each module its level, or reports a cycle.
func setLevels(mods []*modInfo, byPath map[string]*modInfo) error {
	const visiting = -2
	for _, m := range mods {
		m.Level = -1
	}
	var visit func(m *modInfo, chain []string) error
	visit = func(m *modInfo, chain []string) error {
		switch m.Level {
		case visiting:
			return fmt.Errorf("the modules require each other in a cycle: %s", strings.Join(append(chain, m.Path), " -> "))
		case -1:
		default:
			return nil
		}
		m.Level = visiting
		level := 0
		for _, p := range m.Reqs {
			r := byPath[p]
			if err := visit(r, append(chain, m.Path)); err != nil {
				return err
			}
			level = max(level, r.Level+1)
		}
		m.Level = level
		return nil
	}
	for _, m := range mods {
		if err := visit(m, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkOrder reports the first module in order that requires a project
// module whose tag is not pushed before its own: the go command could not
// fetch the requirement while the module's own tag is already public.
func checkOrder(order []*modInfo) error {
	seen := map[string]bool{}
	for _, m := range order {
		for _, p := range m.Reqs {
			if !seen[p] {
				return fmt.Errorf("wrong tag order: %s requires %s, whose tag would be pushed after its own", m.Path, p)
			}
		}
		seen[m.Path] = true
	}
	return nil
}

// checkVersion accepts the versions a release can have: canonical semantic
// versions of major version 0 or 1, as the module paths carry no /vN suffix.
func checkVersion(v string) error {
	switch {
	case !semver.IsValid(v) || semver.Canonical(v) != v:
		return fmt.Errorf("version %q: want a semantic version in full, like v1.2.3 or v1.3.0-rc.1 (go.dev/ref/mod#versions)", v)
	case semver.Build(v) != "":
		return fmt.Errorf("version %q: build metadata (+...) is not allowed in a module version", v)
	case semver.Major(v) != "v0" && semver.Major(v) != "v1":
		return fmt.Errorf("version %q: major version %s needs module paths ending in /%s (go.dev/ref/mod#major-version-suffixes)", v, semver.Major(v), semver.Major(v))
	}
	return nil
}
