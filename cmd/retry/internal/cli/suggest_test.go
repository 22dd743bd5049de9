package cli

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"retry", "retry", 0},
		{"retyr", "retry", 1}, // a swap is one edit
		{"atempts", "attempts", 1},
		{"policy", "policies", 3},
		{"retry-delay", "max-delay", 5},
		{"", "abc", 3},
	} {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := distance(tc.b, tc.a); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

// A flag one word shorter or longer comes before a nearer typo; a name
// far from every flag gets no suggestion.
func TestSuggestion(t *testing.T) {
	fs := testFlags()
	for _, tc := range []struct{ name, want string }{
		{"atempts", "; did you mean --attempts?"},
		{"max-time-total", "; did you mean --max-time?"},
		{"max", "; did you mean --max-time?"}, // max-time less its last word
		{"output-dir", "; did you mean --output?"},
		{"qiet", "; did you mean --quiet?"},
		{"x", ""},
		{"zz", ""},
		{"no-such-flag", ""},
	} {
		if got := suggestion(fs, tc.name); got != tc.want {
			t.Errorf("suggestion(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
