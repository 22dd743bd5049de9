package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	ws, err := loadWorkspace(writeTree(t, sampleTree))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := plan(&out, ws, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"b/go.mod", "require example.com/p/a v0.0.0 -> v1.2.3",
		"go.work", "replace example.com/p/a v0.0.0 -> v1.2.3",
		"not released: tools/x",
		"git tag v1.2.3 && git push origin v1.2.3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%s", want, got)
		}
	}
	// The tags in the order they must be pushed.
	var order []int
	for _, tag := range []string{"1. v1.2.3", "2. c/v1.2.3", "3. a/v1.2.3", "4. b/v1.2.3"} {
		order = append(order, strings.Index(got, tag))
	}
	for i := range order {
		if order[i] < 0 || i > 0 && order[i] < order[i-1] {
			t.Fatalf("tags out of order (positions %v):\n%s", order, got)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"plan"}, {"proxy", "v1.2.3"}, {"plan", "v1.2.3", "extra"}, {"-x"}, {"publish", "v1.2.3"}, {"plan", "-nosuchflag", "v1.2.3"}} {
		var stderr bytes.Buffer
		err := mainErr(context.Background(), args, &bytes.Buffer{}, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("%q: %v, stderr %q; want the usage", args, err, stderr.String())
		}
	}
	err := mainErr(context.Background(), []string{"plan", "1.2.3"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "semantic version") {
		t.Errorf("plan 1.2.3: %v, want the version refused", err)
	}
}
