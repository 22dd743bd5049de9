package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (slash paths to contents) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A workspace shaped like the repository's: a root, modules that require
// it, one that requires those, one that requires nothing, and a tool.
var sampleTree = map[string]string{
	"go.work":        "go 1.26\n\nuse (\n\t.\n\t./c\n\t./b\n\t./a\n\t./tools/x\n)\n\nreplace example.com/p v0.0.0 => ./\nreplace example.com/p/a v0.0.0 => ./a\n",
	"go.mod":         "module example.com/p\n\ngo 1.26\n",
	"a/go.mod":       "module example.com/p/a\n\ngo 1.26\n\nrequire example.com/p v0.0.0\n",
	"b/go.mod":       "module example.com/p/b\n\ngo 1.26\n\nrequire (\n\texample.com/p v0.0.0\n\texample.com/p/a v0.0.0\n)\n",
	"c/go.mod":       "module example.com/p/c\n\ngo 1.26\n",
	"tools/x/go.mod": "module example.com/p/tools/x\n\ngo 1.26\n\nrequire example.com/p v0.0.0\n",
}

func TestLoadWorkspaceOrder(t *testing.T) {
	ws, err := loadWorkspace(writeTree(t, sampleTree))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ws.Modules {
		got = append(got, m.Tag("v1.2.3"))
	}
	// Level by level, by directory within a level; the tool is not released.
	if want := "v1.2.3 c/v1.2.3 a/v1.2.3 b/v1.2.3"; strings.Join(got, " ") != want {
		t.Errorf("tags %q, want %q", strings.Join(got, " "), want)
	}
	if len(ws.Skipped) != 1 || ws.Skipped[0] != "tools/x" {
		t.Errorf("skipped %q, want [tools/x]", ws.Skipped)
	}
	if err := checkOrder(ws.Modules); err != nil {
		t.Error(err)
	}
	if n := len(ws.levels()); n != 3 {
		t.Errorf("%d levels, want 3", n)
	}
}

func TestCheckOrderRefusesAModuleBeforeItsRequirement(t *testing.T) {
	ws, err := loadWorkspace(writeTree(t, sampleTree))
	if err != nil {
		t.Fatal(err)
	}
	// b before a: b's tag would be public while a's is not.
	m := ws.Modules
	wrong := []*modInfo{m[0], m[1], m[3], m[2]}
	err = checkOrder(wrong)
	if err == nil || !strings.Contains(err.Error(), "example.com/p/b requires example.com/p/a") {
		t.Errorf("checkOrder(b before a) = %v, want the wrong order named", err)
	}
}

func TestLoadWorkspaceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit map[string]string
		want string
	}{
		{"cycle", map[string]string{"a/go.mod": "module example.com/p/a\n\ngo 1.26\n\nrequire example.com/p/b v0.0.0\n"}, "cycle"},
		{"replace in go.mod", map[string]string{"c/go.mod": "module example.com/p/c\n\ngo 1.26\n\nreplace example.com/p => ../\n"}, "replace directives belong in go.work"},
		{"path against directory", map[string]string{"c/go.mod": "module example.com/p/see\n\ngo 1.26\n"}, "a tag c/vX.Y.Z would name example.com/p/c"},
		{"requires the tool", map[string]string{"c/go.mod": "module example.com/p/c\n\ngo 1.26\n\nrequire example.com/p/tools/x v0.0.0\n"}, "which go.work does not release"},
		{"no root", map[string]string{"go.work": "go 1.26\n\nuse ./a\n"}, "does not use the repository root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := maps.Clone(sampleTree)
			for k, v := range tc.edit {
				files[k] = v
			}
			_, err := loadWorkspace(writeTree(t, files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadWorkspace = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := loadWorkspace(t.TempDir()); err == nil || !strings.Contains(err.Error(), "go.work") {
		t.Errorf("loadWorkspace of a directory without go.work = %v, want an error naming go.work", err)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.2.3", "v1.3.0-rc.1"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("checkVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{"", "1.2.3", "v1.2", "v1", "v1.2.3+meta", "v2.0.0", "latest", "v1.2.3 "} {
		if err := checkVersion(v); err == nil {
			t.Errorf("checkVersion(%q) = nil, want an error", v)
		}
	}
}
