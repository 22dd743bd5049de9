// Command release prepares and proves a release of retrykit's modules, run
// from the repository root:
//
//	go run ./tools/release plan vX.Y.Z        the go.mod changes and the tags to push, in order
//	go run ./tools/release apply vX.Y.Z       set the requirements to vX.Y.Z and tidy every module
//	go run ./tools/release proxy vX.Y.Z DIR   a file module proxy (GOPROXY=file://DIR) of the tree
//	go run ./tools/release verify vX.Y.Z      apply in a scratch copy, then prove the release
//
// The modules under the root require the project's own modules at v0.0.0
// between releases, served by go.work's replace lines; a release sets those
// requirements to its version, tidies each module with the workspace off in
// the order of its tags, and pushes one tag per module (go.dev/ref/mod#vcs-version).
// It never pushes anything itself. RELEASING.md lists the steps.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := mainErr(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

const usage = `usage:
  go run ./tools/release plan vX.Y.Z          print the go.mod changes and the tags to push, in order
  go run ./tools/release apply [-dirty] vX.Y.Z set every requirement of the project's modules to vX.Y.Z and tidy each module
  go run ./tools/release proxy vX.Y.Z DIR     write a file module proxy of the tree at vX.Y.Z (GOPROXY=file://DIR)
  go run ./tools/release verify [-keep] vX.Y.Z apply in a scratch copy and prove go install and go get through a file proxy
Run from the repository root (the directory of go.work).`

func mainErr(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "plan", "apply", "proxy", "verify":
	default:
		fmt.Fprintln(stderr, usage)
		return errUsage
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage) }
	dirty := fs.Bool("dirty", false, "apply: allow uncommitted changes in the tree")
	keep := fs.Bool("keep", false, "verify: keep the scratch directory and print its name")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	rest := fs.Args()
	want := 1
	if args[0] == "proxy" {
		want = 2
	}
	if len(rest) != want {
		fs.Usage()
		return errUsage
	}
	v := rest[0]
	if err := checkVersion(v); err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	ws, err := loadWorkspace(root)
	if err != nil {
		return err
	}

	switch args[0] {
	case "plan":
		return plan(stdout, ws, v)
	case "apply":
		if !*dirty {
			if err := checkClean(ctx, root); err != nil {
				return err
			}
		}
		tc, err := newToolchain(ctx, ws.RootPath, stderr)
		if err != nil {
			return err
		}
		work, err := os.MkdirTemp("", "retrykit-apply-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		changes, err := apply(ctx, tc, root, v, work)
		if err != nil {
			return err
		}
		for _, c := range changes {
			fmt.Fprintln(stdout, c)
		}
		fmt.Fprintf(stdout, "applied %s: commit the changes, then push the tags as `go run ./tools/release plan %s` lists them\n", v, v)
		return nil
	case "proxy":
		for _, m := range ws.Modules {
			if err := checkRequirements(root, ws, m, v); err != nil {
				return fmt.Errorf("%w (run apply %s first)", err, v)
			}
		}
		if err := checkOrder(ws.Modules); err != nil {
			return err
		}
		dir, err := filepath.Abs(rest[1])
		if err != nil {
			return err
		}
		if err := writeProxy(ctx, root, dir, ws.Modules, v); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "GOPROXY=%s holds %d modules at %s\n", fileURL(dir), len(ws.Modules), v)
		return nil
	case "verify":
		tc, err := newToolchain(ctx, ws.RootPath, stdout)
		if err != nil {
			return err
		}
		work, err := os.MkdirTemp("", "retrykit-verify-")
		if err != nil {
			return err
		}
		if *keep {
			fmt.Fprintln(stdout, "scratch directory (kept):", work)
		} else {
			defer os.RemoveAll(work)
		}
		return verify(ctx, tc, root, v, work)
	}
	return errUsage // not reached: the command was checked above
}

// checkClean refuses a Git work tree with uncommitted changes: the hashes
// apply writes into go.sum hold only if the release's commit is the tree
// as apply saw it.
func checkClean(ctx context.Context, root string) error {
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain").Output()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("the tree has uncommitted changes (commit them first, or -dirty):\n%s", s)
	}
	return nil
}

// plan prints what apply changes and the tags to push, in order.
func plan(w io.Writer, ws *workspace, v string) error {
	if err := checkOrder(ws.Modules); err != nil {
		return err
	}
	fmt.Fprintf(w, "Release %s of %s: %d modules", v, ws.RootPath, len(ws.Modules))
	if len(ws.Skipped) > 0 {
		fmt.Fprintf(w, " (not released: %s)", strings.Join(ws.Skipped, ", "))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "\ngo.mod changes (`apply %s` makes them, then tidies each module with the workspace off, level by level):\n", v)
	n := 0
	for _, m := range ws.Modules {
		file := filepath.Join(ws.Root, filepath.FromSlash(m.Dir), "go.mod")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		_, changes, err := setRequirements(filepath.ToSlash(filepath.Join(m.Dir, "go.mod")), data, ws.own, v)
		if err != nil {
			return err
		}
		for _, c := range changes {
			fmt.Fprintln(w, "  "+c.String())
			n++
		}
	}
	data, err := os.ReadFile(filepath.Join(ws.Root, "go.work"))
	if err != nil {
		return err
	}
	_, changes, err := setWorkReplaces(data, ws.own, v, "")
	if err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Fprintln(w, "  "+c.String())
		n++
	}
	if n == 0 {
		fmt.Fprintln(w, "  none: every requirement is at", v)
	}
	fmt.Fprintln(w, "  and go.sum: the project's own modules' lines rewritten; go.work's go line raised to the modules' highest")

	fmt.Fprintln(w, "\nTags, in the order they must be pushed (each after the tags of the modules it requires):")
	for i, m := range ws.Modules {
		fmt.Fprintf(w, "  %d. %-24s %s (level %d)\n", i+1, m.Tag(v), m.Path, m.Level)
	}

	fmt.Fprintln(w, "\nSteps (this tool pushes nothing):")
	fmt.Fprintf(w, "  1. go run ./tools/release verify %s      # the proof, in a scratch copy\n", v)
	fmt.Fprintf(w, "  2. go run ./tools/release apply %s       # on a clean checkout of the commit to release\n", v)
	fmt.Fprintf(w, "  3. git commit -am 'release %s' && git push  # nothing may change after apply: go.sum holds the root's hash\n", v)
	fmt.Fprintln(w, "  4. tag that commit and push each tag, one at a time, in the order above:")
	for _, m := range ws.Modules {
		fmt.Fprintf(w, "       git tag %s && git push origin %s\n", m.Tag(v), m.Tag(v))
	}
	fmt.Fprintf(w, "  5. cd \"$(mktemp -d)\" && go install %s@%s && retry --version  # as a user, once the tags are public\n", ws.modulePath("cmd/retry"), v)
	return nil
}
