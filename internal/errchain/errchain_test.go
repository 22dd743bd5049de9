package errchain

import (
	"errors"
	"fmt"
	"testing"
)

// cycle is an error that wraps itself: an unbounded walk never ends.
type cycle struct{}

func (c *cycle) Error() string { return "cycle" }
func (c *cycle) Unwrap() error { return c }

func TestFindFollowsChainsAndJoins(t *testing.T) {
	target := errors.New("target")
	err := fmt.Errorf("outer: %w", errors.Join(errors.New("a"), fmt.Errorf("b: %w", target)))
	var w Walk
	if !w.Find(err, func(e error) bool { return e == target }) {
		t.Fatal("Find missed an error under a join")
	}
	if w.CutShort() {
		t.Fatal("a short chain was cut short")
	}
	var w2 Walk
	if w2.Find(err, func(error) bool { return false }) {
		t.Fatal("Find matched what match refused")
	}
}

func TestFindStopsAtTheLimit(t *testing.T) {
	var w Walk
	visits := 0
	if w.Find(&cycle{}, func(error) bool { visits++; return false }) {
		t.Fatal("a cycle matched")
	}
	if visits != Limit || !w.CutShort() {
		t.Fatalf("a cycle: %d visits, cut short %v; want %d, true", visits, w.CutShort(), Limit)
	}
}

func TestExactlyTheLimitIsNotCutShort(t *testing.T) {
	leaves := make([]error, Limit-1) // and the join itself
	for i := range leaves {
		leaves[i] = errors.New("leaf")
	}
	var w Walk
	w.Find(errors.Join(leaves...), func(error) bool { return false })
	if w.CutShort() {
		t.Fatal("a tree of exactly Limit errors was cut short")
	}
	leaves = append(leaves, errors.New("one more"))
	var w2 Walk
	w2.Find(errors.Join(leaves...), func(error) bool { return false })
	if !w2.CutShort() {
		t.Fatal("a tree of Limit+1 errors was not cut short")
	}
}

func TestEachSkipsAndStops(t *testing.T) {
	leaf := errors.New("leaf")
	hidden := fmt.Errorf("hidden: %w", leaf)
	err := errors.Join(fmt.Errorf("a: %w", hidden), errors.New("b"), errors.New("c"))
	var seen []string
	var w Walk
	stopped := w.Each(err, func(e error) Step {
		seen = append(seen, e.Error())
		switch {
		case e == hidden:
			return Skip // not into leaf; on with "b"
		case e.Error() == "b":
			return Stop
		}
		return Descend
	})
	if !stopped {
		t.Fatal("Each did not report the stop")
	}
	want := []string{err.Error(), "a: hidden: leaf", "hidden: leaf", "b"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("visited %q, want %q", seen, want)
	}
}
