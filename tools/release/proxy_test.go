package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func TestProxyLayout(t *testing.T) {
	files := maps.Clone(sampleTree)
	files["README.md"] = "# p\n"
	files[".ci/run"] = "#!/bin/sh\n"
	files["p.go"] = "package p\n"
	files["inner/inner.go"] = "package inner\n"
	files["vendor/example.com/q/q.go"] = "package q\n"
	files["a/a.go"] = "package a\n"
	files["a/testdata/data.txt"] = "data\n"
	root := writeTree(t, files)
	ws, err := loadWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeProxy(context.Background(), root, dir, ws.Modules, "v1.2.3"); err != nil {
		t.Fatal(err)
	}

	// The root module's zip: everything at the root, go.work, README.md and
	// .ci/ included; no file of a sub-module, nor vendor/.
	entries := zipEntries(t, filepath.Join(dir, "example.com/p/@v/v1.2.3.zip"))
	want := []string{".ci/run", "README.md", "go.mod", "go.work", "inner/inner.go", "p.go"}
	if !slices.Equal(entries, want) {
		t.Errorf("root zip holds %q, want %q", entries, want)
	}
	entries = zipEntries(t, filepath.Join(dir, "example.com/p/a/@v/v1.2.3.zip"))
	if want := []string{"a.go", "go.mod", "testdata/data.txt"}; !slices.Equal(entries, want) {
		t.Errorf("a's zip holds %q, want %q", entries, want)
	}
	// The zip is one the go command accepts.
	if _, err := modzip.CheckZip(module.Version{Path: "example.com/p/a", Version: "v1.2.3"}, filepath.Join(dir, "example.com/p/a/@v/v1.2.3.zip")); err != nil {
		t.Error(err)
	}

	// .mod is the module's go.mod; .info names the version; list lists it once,
	// however many times the proxy is written.
	if err := writeProxy(context.Background(), root, dir, ws.Modules[:1], "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "example.com/p/b/@v/v1.2.3.mod"))
	if err != nil || string(mod) != sampleTree["b/go.mod"] {
		t.Errorf("b's .mod = %q, %v; want its go.mod", mod, err)
	}
	var info struct{ Version string }
	data, err := os.ReadFile(filepath.Join(dir, "example.com/p/@v/v1.2.3.info"))
	if err != nil || json.Unmarshal(data, &info) != nil || info.Version != "v1.2.3" {
		t.Errorf(".info = %s, %v; want Version v1.2.3", data, err)
	}
	list, err := os.ReadFile(filepath.Join(dir, "example.com/p/@v/list"))
	if err != nil || string(list) != "v1.2.3\n" {
		t.Errorf("list = %q, %v; want v1.2.3 once", list, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "example.com/p/tools")); err == nil {
		t.Error("the proxy holds the tool, which is not released")
	}
}

// zipEntries lists a module zip's files without their path@version/ prefix.
func zipEntries(t *testing.T, name string) []string {
	t.Helper()
	r, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var names []string
	for _, f := range r.File {
		_, rest, ok := strings.Cut(f.Name, "@v1.2.3/")
		if !ok {
			t.Errorf("%s: entry %s lacks the path@version/ prefix", name, f.Name)
		}
		names = append(names, rest)
	}
	slices.Sort(names)
	return names
}
