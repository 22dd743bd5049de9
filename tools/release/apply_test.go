package main

import (
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTree is a workspace of modules that import each other and nothing
// else, so that the go command can tidy and build it with no network: the
// proxy it reads ends in "off".
func goTree(t *testing.T) map[string]string {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command in PATH")
	}
	files := maps.Clone(sampleTree)
	files["p.go"] = "package p\n\n// Name names the package.\nfunc Name() string { return \"p\" }\n"
	files["a/a.go"] = "package a\n\nimport \"example.com/p\"\n\n// Name names the package.\nfunc Name() string { return p.Name() + \"/a\" }\n"
	files["b/b.go"] = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/p/a\"\n)\n\nfunc main() { fmt.Println(a.Name() + \"/b\") }\n"
	files["b/b_test.go"] = "package main\n\nimport (\n\t\"testing\"\n\n\t\"example.com/p\"\n)\n\nfunc TestName(t *testing.T) { _ = p.Name() }\n"
	files["c/c.go"] = "package c\n"
	return files
}

func offlineToolchain(t *testing.T) *toolchain {
	return &toolchain{RootPath: "example.com/p", Public: "off", Log: io.Discard}
}

func TestApplyThenBuildFromTheProxy(t *testing.T) {
	root := writeTree(t, goTree(t))
	ctx := context.Background()
	tc := offlineToolchain(t)
	changes, err := apply(ctx, tc, root, "v1.2.3", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 5 { // a: p; b: p, a; go.work: p, a
		t.Errorf("%d changes, want 5: %v", len(changes), changes)
	}
	for name, want := range map[string]string{
		"a/go.mod": "example.com/p v1.2.3",
		"b/go.mod": "example.com/p/a v1.2.3",
		"go.work":  "replace example.com/p/a v1.2.3 => ./a",
		"b/go.sum": "example.com/p/a v1.2.3/go.mod h1:",
	} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s after apply:\n%s\nwant a line with %q (%v)", name, data, want, err)
		}
	}
	ws, err := loadWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if stale, err := staleSums(ctx, ws, "v1.2.3", t.TempDir()); err != nil || stale != "" {
		t.Errorf("after apply: %s %v", stale, err)
	}

	// Outside the workspace, b builds, vets and runs against a proxy of the
	// tree: the hashes in its go.sum are those of the proxy's zips.
	proxy := t.TempDir()
	if err := writeProxy(ctx, root, proxy, ws.Modules, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	env := append(tc.env(proxy, t.TempDir()), "GOFLAGS=-modcacherw -mod=readonly")
	for _, args := range [][]string{{"vet", "./..."}, {"run", "."}} {
		out, err := run(ctx, env, filepath.Join(root, "b"), "go", args...)
		if err != nil {
			t.Fatal(err)
		}
		if args[0] == "run" && strings.TrimSpace(string(out)) != "p/a/b" {
			t.Errorf("go run: %q, want p/a/b", out)
		}
	}
	// Inside it, the moved replace lines still serve the modules.
	wsEnv := append(tc.env(proxy, t.TempDir()), "GOWORK="+filepath.Join(root, "go.work"), "GOPROXY=off")
	if _, err := run(ctx, wsEnv, filepath.Join(root, "b"), "go", "build", "."); err != nil {
		t.Error(err)
	}

	// A go.sum that no longer matches the tree is found.
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("changed after apply\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale, err := staleSums(ctx, ws, "v1.2.3", t.TempDir())
	if err != nil || !strings.Contains(stale, "example.com/p v1.2.3") {
		t.Errorf("after an edit at the root: %q, %v; want the root's stale hash named", stale, err)
	}
}

// A module that imports a project module its go.mod does not require
// builds in the workspace, but the plan puts its tag too early: apply
// fails and says why.
func TestApplyFindsAWrongTagOrder(t *testing.T) {
	files := goTree(t)
	files["c/c.go"] = "package c\n\nimport \"example.com/p/a\"\n\nvar _ = a.Name\n"
	root := writeTree(t, files)
	_, err := apply(context.Background(), offlineToolchain(t), root, "v1.2.3", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "wrong tag order: example.com/p/c needs example.com/p/a") {
		t.Errorf("apply = %v, want a wrong tag order for c", err)
	}
}

// checkPlanned finds a requirement that tidy added against the plan.
func TestCheckPlanned(t *testing.T) {
	ws, err := loadWorkspace(writeTree(t, sampleTree))
	if err != nil {
		t.Fatal(err)
	}
	files := maps.Clone(sampleTree)
	files["c/go.mod"] = "module example.com/p/c\n\ngo 1.26\n\nrequire example.com/p/b v1.2.3\n"
	final, err := loadWorkspace(writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlanned(ws.Modules, final); err == nil || !strings.Contains(err.Error(), "example.com/p/c requires example.com/p/b") {
		t.Errorf("checkPlanned = %v, want c's new requirement named", err)
	}
}
