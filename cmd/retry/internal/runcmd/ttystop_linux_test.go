package runcmd

import (
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		in    string
		state string
		pgrp  int
		name  string
	}{
		{"123 (sh) T 100 123 100 34816 123 4194560", "T", 123, "sh"},
		{"7 (a (b) c) S 1 5 5 0", "S", 5, "a (b) c"},
		{"7 (x) R", "", 0, ""},
		{"garbage", "", 0, ""},
		{"7 )x( S 1 5", "", 0, ""},
	} {
		state, pgrp, name := parseProcStat(tc.in)
		if state != tc.state || pgrp != tc.pgrp || name != tc.name {
			t.Errorf("parseProcStat(%q) = %q, %d, %q; want %q, %d, %q", tc.in, state, pgrp, name, tc.state, tc.pgrp, tc.name)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add("123 (sh) T 100 123 100 34816 123 4194560")
	f.Add("7 (a (b) c) S 1 5 5 0")
	f.Fuzz(func(t *testing.T, s string) {
		state, _, name := parseProcStat(s)
		if state != "" && !strings.Contains(s, "("+name+")") {
			t.Errorf("parseProcStat(%q): name %q is not between the parentheses", s, name)
		}
	})
}
