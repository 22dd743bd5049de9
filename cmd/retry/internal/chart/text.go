package chart

import (
	"strings"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// wrap breaks s into lines at most w wide, at spaces; a word wider than w
// is shortened with an ellipsis. "" gives no lines.
func wrap(sty text.Style, s string, w vg.Length) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && sty.Width(line+" "+word) <= w {
			line += " " + word
			continue
		}
		if line != "" {
			lines = append(lines, line)
		}
		line = fit(sty, word, w)
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// wrapLines is wrap in at most n lines: what does not fit in them is
// shortened with an ellipsis on the last. A name in two parts, "what: how",
// breaks after the colon if both parts fit on a line of their own.
func wrapLines(sty text.Style, s string, w vg.Length, n int) []string {
	lines := wrap(sty, s, w)
	if len(lines) == 2 && n >= 2 {
		if what, how, ok := strings.Cut(s, ": "); ok && sty.Width(what+":") <= w && sty.Width(how) <= w {
			return []string{what + ":", how}
		}
	}
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n-1], fit(sty, strings.Join(lines[n-1:], " "), w))
}

// fit shortens s with an ellipsis until it is at most w wide.
func fit(sty text.Style, s string, w vg.Length) string {
	if sty.Width(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 1 {
		r = r[:len(r)-1]
		if t := string(r) + "…"; sty.Width(t) <= w {
			return t
		}
	}
	return string(r)
}
