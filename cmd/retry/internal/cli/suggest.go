package cli

import (
	"flag"
	"strings"
)

// suggestion returns "; did you mean --NAME?" for the flag of fs nearest to
// name, a flag fs does not know, or "" if none is near. A flag that is name
// less or more a word at the end comes first: --retry for --retry-delay, a
// curl flag that retry does not have, or --incident-end for --incident.
// Otherwise a typo's: the flag fewest edits away, within two edits or half
// of name's letters. A one-letter name is too short to guess at, and
// one-letter flags too.
func suggestion(fs *flag.FlagSet, name string) string {
	if len(name) < 2 {
		return ""
	}
	best, bestWord, bestDist := "", false, 0
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) < 2 {
			return
		}
		word := strings.HasPrefix(name, f.Name+"-") || strings.HasPrefix(f.Name, name+"-")
		d := distance(strings.ToLower(name), strings.ToLower(f.Name))
		if !word && d > 2 && 2*d > len(name) {
			return
		}
		if best == "" || word && !bestWord || word == bestWord && d < bestDist {
			best, bestWord, bestDist = f.Name, word, d
		}
	})
	if best == "" {
		return ""
	}
	return "; did you mean " + spell(best) + "?"
}

// distance is the edit distance between a and b: the fewest insertions,
// deletions, substitutions and swaps of two neighbours that make one the
// other (the optimal string alignment distance), byte by byte, as flag
// names are ASCII.
func distance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
