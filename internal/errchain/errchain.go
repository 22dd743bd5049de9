// Package errchain walks the chain of an error, as errors.Is and errors.As
// do, following Unwrap() error and Unwrap() []error (errors.Join trees),
// depth first, but visiting at most Limit errors: a cyclic chain, or a tree
// of joins with exponentially many paths, cannot make a walk hang or slow.
// Every walk of an error's chain in retrykit, the root package's and the
// integrations', is one of these, with the same limit.
package errchain

// Limit is the most errors one walk visits.
const Limit = 256

// A Walk is one walk over an error's chain: what is left of its Limit.
// The zero value is a walk that has visited nothing. A walk may span
// several calls (a tree's branches), which then share its Limit.
type Walk struct {
	visited int
	cut     bool
}

// Visit spends one of the walk's visits on an error about to be visited.
// It reports false, and the walk is cut short, if none is left: the error
// and what it wraps stay unvisited.
func (w *Walk) Visit() bool {
	if w.visited >= Limit || w.cut {
		w.cut = true
		return false
	}
	w.visited++
	return true
}

// CutShort reports whether the walk stopped with errors unvisited. A walk
// that visited exactly Limit errors and met the end of every branch was
// not cut short.
func (w *Walk) CutShort() bool { return w.cut }

// A Step is what a walk does after visiting an error (see Each).
type Step uint8

const (
	// Descend goes on to the errors it wraps.
	Descend Step = iota
	// Skip goes on with the next branch of a join, not into what it wraps.
	Skip
	// Stop ends the walk.
	Stop
)

// Each calls visit on err and the errors of its chain, depth first within
// what is left of w, and reports whether visit stopped the walk.
func (w *Walk) Each(err error, visit func(error) Step) bool {
	for err != nil && w.Visit() {
		switch visit(err) {
		case Stop:
			return true
		case Skip:
			return false
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if w.Each(e, visit) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// Find reports whether match holds for an error of err's chain, visited
// depth first within what is left of w: errors.Is and errors.As, bounded.
func (w *Walk) Find(err error, match func(error) bool) bool {
	return w.Each(err, func(err error) Step {
		if match(err) {
			return Stop
		}
		return Descend
	})
}
