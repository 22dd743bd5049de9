package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
)

// A toolchain runs the go command as a user outside the repository would:
// the workspace off, the project's modules from a file-based proxy, third
// party modules from the public proxy, with the checksum database off for
// the project's own modules only (the proxy's are not public yet).
type toolchain struct {
	RootPath string    // the root module's path: the prefix of every project module
	Mirror   string    // a file proxy tried after the release proxy: the local module cache, "" for none
	Public   string    // the GOPROXY tried last
	Log      io.Writer // progress
}

func newToolchain(ctx context.Context, rootPath string, log io.Writer) (*toolchain, error) {
	tc := &toolchain{RootPath: rootPath, Log: log}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("go env: unexpected output %q", out)
	}
	// The local cache, read as a proxy, spares downloads of third-party
	// modules already fetched; a module missing there comes from the public
	// proxy, and go.sum and the checksum database check both alike.
	if dl := filepath.Join(lines[0], "cache", "download"); lines[0] != "" {
		if fi, err := os.Stat(dl); err == nil && fi.IsDir() {
			tc.Mirror = dl
		}
	}
	tc.Public = lines[1]
	if tc.Public == "" || tc.Public == "off" {
		tc.Public = "https://proxy.golang.org,direct"
	}
	return tc, nil
}

// env is the environment of a go command that reads the project's modules
// from the proxy in proxyDir and keeps modules in the cache modcache.
func (tc *toolchain) env(proxyDir, modcache string) []string {
	proxy := fileURL(proxyDir)
	if tc.Mirror != "" {
		proxy += "," + fileURL(tc.Mirror)
	}
	proxy += "," + tc.Public
	set := map[string]string{
		"GOWORK":     "off",
		"GOPROXY":    proxy,
		"GOMODCACHE": modcache,
		// -modcacherw lets the throwaway caches be deleted; nothing else,
		// so that a user's -mod=vendor or the like changes nothing here.
		"GOFLAGS": "-modcacherw",
		// The project's modules are not in the checksum database before
		// their tags are public, and only they skip it. Not GOPRIVATE: it
		// would fetch them from the repository, and even with GONOPROXY=none
		// go get of grpcretry@v stops at the root module once that is in the
		// cache ("found, but does not contain package").
		"GONOSUMDB": tc.RootPath,
		"GOPRIVATE": "",
		"GONOPROXY": "",
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// fileURL is the file:// URL of the absolute directory dir.
func fileURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive: file:///C:/...
	}
	return "file://" + p
}

// run runs the go command (or the program name) with args in dir.
func run(ctx context.Context, env []string, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %s %s: %w\n%s", dir, name, strings.Join(args, " "), err, indent(withoutDownloads(out.String())))
	}
	return out.Bytes(), nil
}

// withoutDownloads drops the go command's "go: downloading" lines, which
// bury the error under them.
func withoutDownloads(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(line, "go: downloading ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}

// freshCache makes an empty module cache under work. Each level of the
// release gets its own: a cache that had fetched a project module's zip
// would keep serving it after the module changed.
func freshCache(work, name string) (string, error) {
	dir := filepath.Join(work, "modcache-"+name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// apply sets every requirement of the project's own modules to v and tidies
// each module with the workspace off, level by level: a module's tidy sees,
// through a file proxy built from the tree, exactly the modules whose tags
// come before its own, each level with a fresh module cache. Then it brings
// the go.sum hashes of the project's modules up to date with the finished
// tree. Scratch files go under work.
func apply(ctx context.Context, tc *toolchain, root string, v, work string) ([]change, error) {
	ws, err := loadWorkspace(root)
	if err != nil {
		return nil, err
	}
	if err := checkOrder(ws.Modules); err != nil {
		return nil, err
	}
	changes, err := tidyLevels(ctx, tc, ws, v, work)
	if err != nil {
		return nil, err
	}
	// The root module's zip holds go.work, whose go line the tidies may
	// have raised after the root's hash went into the others' go.sum: write
	// the hashes of the tree as it is now, then again for the modules whose
	// go.sum that changed, until a round changes nothing. Only zip hashes
	// move (no go.mod changes), so no module's tidy would select otherwise.
	for round := 1; ; round++ {
		fixed, err := fixSums(ctx, ws, v, work)
		if err != nil {
			return nil, err
		}
		if len(fixed) == 0 {
			break
		}
		if round > len(ws.Modules) {
			return nil, fmt.Errorf("apply: go.sum hashes still change after %d rounds: %s", round, strings.Join(fixed, "; "))
		}
		fmt.Fprintf(tc.Log, "apply: hashes rewritten (round %d): %s\n", round, strings.Join(fixed, "; "))
	}
	if stale, err := staleSums(ctx, ws, v, work); err != nil || stale != "" {
		return nil, cmp.Or(err, errors.New(stale))
	}
	fmt.Fprintln(tc.Log, "apply: every go.sum line of the project's modules holds the hash of the tree as it is now")
	// Tidy may have added requirements the workspace hid: the tag order
	// must still put each module after those it requires.
	final, err := loadWorkspace(root)
	if err != nil {
		return nil, err
	}
	if err := checkPlanned(ws.Modules, final); err != nil {
		return nil, err
	}
	for _, m := range final.Modules {
		if err := checkRequirements(root, final, m, v); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// checkPlanned reports a requirement of the applied tree that the planned
// tag order does not satisfy.
func checkPlanned(planned []*modInfo, final *workspace) error {
	reqs := map[string][]string{}
	for _, m := range final.Modules {
		reqs[m.Path] = m.Reqs
	}
	order := make([]*modInfo, len(planned))
	for i, m := range planned {
		order[i] = &modInfo{Dir: m.Dir, Path: m.Path, Reqs: reqs[m.Path]}
	}
	return checkOrder(order)
}

// checkRequirements reports a requirement of a project module at a version
// other than v in module m: the release would publish a module that needs
// a version other than the one released with it.
func checkRequirements(root string, ws *workspace, m *modInfo, v string) error {
	file := filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	_, changes, err := setRequirements(file, data, ws.own, v)
	if err != nil {
		return err
	}
	if len(changes) > 0 {
		c := changes[0]
		return fmt.Errorf("wrong requirement: %s/go.mod requires %s %s, not the release's %s", m.Dir, c.Path, c.Old, v)
	}
	return nil
}

// fixSums zips every module of the tree as it is now and rewrites each
// go.sum line of a project module at v whose hash differs; it returns what
// it rewrote.
func fixSums(ctx context.Context, ws *workspace, v, work string) ([]string, error) {
	want, err := treeSums(ctx, ws, v, work)
	if err != nil {
		return nil, err
	}
	var fixed []string
	for _, m := range ws.Modules {
		file := filepath.Join(ws.Root, filepath.FromSlash(m.Dir), "go.sum")
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var out strings.Builder
		changed := false
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) == 3 && ws.own(f[0]) && want[f[0]+" "+f[1]] != "" && want[f[0]+" "+f[1]] != f[2] {
				line = f[0] + " " + f[1] + " " + want[f[0]+" "+f[1]] + "\n"
				fixed = append(fixed, m.Dir+"/go.sum: "+f[0]+" "+f[1])
				changed = true
			}
			out.WriteString(line)
		}
		if changed {
			if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return fixed, nil
}

// treeSums returns the go.sum hashes of every module of the tree as it is
// now, at version v.
func treeSums(ctx context.Context, ws *workspace, v, work string) (map[string]string, error) {
	dir := filepath.Join(work, "proxy-check")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := writeProxy(ctx, ws.Root, dir, ws.Modules, v); err != nil {
		return nil, err
	}
	return proxySums(dir, ws.Modules, v)
}

// staleSums zips every module of the tree as it is now and describes the
// first go.sum line of a project module at v that does not hold its hash,
// or a requirement without one; "" if there is none.
func staleSums(ctx context.Context, ws *workspace, v, work string) (string, error) {
	want, err := treeSums(ctx, ws, v, work)
	if err != nil {
		return "", err
	}
	for _, m := range ws.Modules {
		data, err := os.ReadFile(filepath.Join(ws.Root, filepath.FromSlash(m.Dir), "go.sum"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		got := map[string]string{}
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) != 3 || !ws.own(f[0]) {
				continue
			}
			key := f[0] + " " + f[1]
			got[key] = f[2]
			if f[1] != v && f[1] != v+"/go.mod" {
				return fmt.Sprintf("%s/go.sum holds %s %s, not of the release", m.Dir, f[0], f[1]), nil
			}
			if want[key] != f[2] {
				return fmt.Sprintf("%s/go.sum holds %s %s, but the tree's hash is now %s", m.Dir, key, f[2], want[key]), nil
			}
		}
		for _, p := range m.Reqs {
			if got[p+" "+v+"/go.mod"] == "" {
				return fmt.Sprintf("%s/go.sum lacks the go.mod hash of %s %s", m.Dir, p, v), nil
			}
		}
	}
	return "", nil
}

// proxySums returns the go.sum hashes of the modules in the proxy dir, keyed
// by "path version" and "path version/go.mod", as the go command computes
// them (go.dev/ref/mod#go-sum-files).
func proxySums(dir string, mods []*modInfo, v string) (map[string]string, error) {
	sums := map[string]string{}
	for _, m := range mods {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return nil, err
		}
		base := filepath.Join(dir, filepath.FromSlash(esc), "@v", v)
		h, err := dirhash.HashZip(base+".zip", dirhash.Hash1)
		if err != nil {
			return nil, err
		}
		sums[m.Path+" "+v] = h
		h, err = dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) { return os.Open(base + ".mod") })
		if err != nil {
			return nil, err
		}
		sums[m.Path+" "+v+"/go.mod"] = h
	}
	return sums, nil
}

// tidyLevels rewrites the requirements and go.sum files, then tidies the
// modules level by level.
func tidyLevels(ctx context.Context, tc *toolchain, ws *workspace, v, work string) ([]change, error) {
	var changes []change
	for _, m := range ws.Modules {
		c, err := rewriteModule(ws, m, v)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c...)
	}
	c, err := syncWork(ws, v)
	if err != nil {
		return nil, err
	}
	changes = append(changes, c...)

	proxyDir := filepath.Join(work, "proxy-apply")
	if err := os.RemoveAll(proxyDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(proxyDir, 0o755); err != nil {
		return nil, err
	}
	for level, mods := range ws.levels() {
		start := time.Now()
		if level > 0 {
			// The proxy grows by the level below: the tags pushed so far.
			if err := writeProxy(ctx, ws.Root, proxyDir, ws.levels()[level-1], v); err != nil {
				return nil, err
			}
		}
		cache, err := freshCache(work, fmt.Sprintf("apply-level%d", level))
		if err != nil {
			return nil, err
		}
		env := tc.env(proxyDir, cache)
		var names []string
		for _, m := range mods {
			names = append(names, m.Dir)
			if _, err := run(ctx, env, filepath.Join(ws.Root, filepath.FromSlash(m.Dir)), "go", "mod", "tidy"); err != nil {
				return nil, explainTidy(ws, m, mods, err)
			}
		}
		if err := os.RemoveAll(cache); err != nil {
			return nil, err
		}
		fmt.Fprintf(tc.Log, "apply: level %d: go mod tidy in %s (%.1fs)\n", level, strings.Join(names, ", "), time.Since(start).Seconds())
		// go.work's go line follows the modules' as soon as tidy raises one.
		c, err := syncWork(ws, v)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c...)
	}
	return changes, nil
}

// explainTidy adds to a failed tidy of m what it most likely means when the
// missing module is one of the project's: m needs a module whose tag the
// plan does not push before its own.
func explainTidy(ws *workspace, m *modInfo, level []*modInfo, err error) error {
	msg := err.Error()
	for _, other := range ws.Modules {
		if other == m || !mentions(msg, other.Path) {
			continue
		}
		if other.Level >= m.Level {
			return fmt.Errorf("wrong tag order: %s needs %s, whose tag the plan pushes with or after its own, as %s/go.mod in the workspace does not require it (go.work hides the missing requirement); add `require %s v0.0.0` there: %w",
				m.Path, other.Path, m.Dir, other.Path, err)
		}
	}
	return err
}

// mentions reports whether msg names module path p itself, or a package of
// it outside nested modules' paths, as the go command's errors do: p followed
// by a character that does not continue a path.
func mentions(msg, p string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], p)
		if j < 0 {
			return false
		}
		end := i + j + len(p)
		if end == len(msg) || strings.IndexByte(" \t\n:@\"'`", msg[end]) >= 0 {
			return true
		}
		i = end
	}
}

// rewriteModule sets m's requirements of the project's modules to v and
// drops their go.sum lines.
func rewriteModule(ws *workspace, m *modInfo, v string) ([]change, error) {
	dir := filepath.Join(ws.Root, filepath.FromSlash(m.Dir))
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	out, changes, err := setRequirements(filepath.ToSlash(filepath.Join(m.Dir, "go.mod")), data, ws.own, v)
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), out, 0o644); err != nil {
			return nil, err
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if errors.Is(err, fs.ErrNotExist) {
		return changes, nil
	}
	if err != nil {
		return nil, err
	}
	if kept := dropOwnSums(sum, ws.own); len(kept) != len(sum) {
		if err := os.WriteFile(filepath.Join(dir, "go.sum"), kept, 0o644); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// syncWork moves go.work's replacements to v and raises its go line to the
// highest of the modules'.
func syncWork(ws *workspace, v string) ([]change, error) {
	high := ""
	for _, m := range ws.Modules {
		file := filepath.Join(ws.Root, filepath.FromSlash(m.Dir), "go.mod")
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		g, err := goLine(file, data)
		if err != nil {
			return nil, err
		}
		if high == "" || goLess(high, g) {
			high = g
		}
	}
	file := filepath.Join(ws.Root, "go.work")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out, changes, err := setWorkReplaces(data, ws.own, v, high)
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if err := os.WriteFile(file, out, 0o644); err != nil {
			return nil, err
		}
	}
	return changes, nil
}
