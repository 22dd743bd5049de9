package main

import (
	"strings"
	"testing"
)

func own(p string) bool { return p == "example.com/p" || strings.HasPrefix(p, "example.com/p/") }

func TestSetRequirements(t *testing.T) {
	in := `module example.com/p/b

go 1.26

// The project's modules.
require (
	example.com/p v0.0.0
	example.com/p/a v0.0.0 // a comment stays
	example.com/other v1.4.0
)

require example.com/pother v0.0.0 // indirect
`
	out, changes, err := setRequirements("b/go.mod", []byte(in), own, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("example.com/p v0.0.0", "example.com/p v1.2.3", "example.com/p/a v0.0.0", "example.com/p/a v1.2.3").Replace(in)
	if string(out) != want {
		t.Errorf("rewritten go.mod:\n%s\nwant:\n%s", out, want)
	}
	if len(changes) != 2 || changes[0].Path != "example.com/p" || changes[1].Old != "v0.0.0" || changes[1].New != "v1.2.3" {
		t.Errorf("changes %v, want example.com/p and example.com/p/a from v0.0.0 to v1.2.3", changes)
	}
	// Already at the version: nothing to change, the bytes as they were.
	again, changes, err := setRequirements("b/go.mod", out, own, "v1.2.3")
	if err != nil || len(changes) != 0 || string(again) != string(out) {
		t.Errorf("second rewrite: %d changes, err %v, changed bytes %v", len(changes), err, string(again) != string(out))
	}
	if _, _, err := setRequirements("b/go.mod", []byte("module\n"), own, "v1.2.3"); err == nil {
		t.Error("a broken go.mod: no error")
	}
}

func TestDropOwnSums(t *testing.T) {
	in := "example.com/other v1.4.0 h1:aaa=\n" +
		"example.com/p v0.9.0 h1:bbb=\n" +
		"example.com/p v0.9.0/go.mod h1:ccc=\n" +
		"example.com/p/a v0.9.0/go.mod h1:ddd=\n" +
		"example.com/pother v0.1.0 h1:eee=\n"
	want := "example.com/other v1.4.0 h1:aaa=\n" +
		"example.com/pother v0.1.0 h1:eee=\n"
	if got := string(dropOwnSums([]byte(in), own)); got != want {
		t.Errorf("dropOwnSums:\n%s\nwant:\n%s", got, want)
	}
}

func TestSetWorkReplaces(t *testing.T) {
	in := `go 1.26

use (
	.
	./a
)

// Served from the work tree.
replace example.com/p v0.0.0 => ./
replace example.com/p/a v0.0.0 => ./a
replace example.com/other v1.0.0 => ../other
`
	out, changes, err := setWorkReplaces([]byte(in), own, "v1.2.3", "1.26.0")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("go 1.26\n", "go 1.26.0\n", "example.com/p v0.0.0", "example.com/p v1.2.3", "example.com/p/a v0.0.0", "example.com/p/a v1.2.3").Replace(in)
	if string(out) != want {
		t.Errorf("rewritten go.work:\n%s\nwant:\n%s", out, want)
	}
	if len(changes) != 3 {
		t.Errorf("changes %v, want two replacements and the go line", changes)
	}
	// A go line already higher stays.
	out, _, err = setWorkReplaces([]byte("go 1.27.1\n"), own, "v1.2.3", "1.26.0")
	if err != nil || string(out) != "go 1.27.1\n" {
		t.Errorf("go 1.27.1 with modules at 1.26.0: %q, %v; want it kept", out, err)
	}
}

func TestGoLess(t *testing.T) {
	ordered := []string{"1.9", "1.25.3", "1.26", "1.26beta1", "1.26rc1", "1.26rc2", "1.26.0", "1.26.1", "1.26.10", "1.27", "2.0"}
	for i, a := range ordered {
		for j, b := range ordered {
			if got := goLess(a, b); got != (i < j) {
				t.Errorf("goLess(%s, %s) = %v, want %v", a, b, got, i < j)
			}
		}
	}
}
