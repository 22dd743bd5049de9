package retry

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinksResolve: the README stays what a newcomer reads first, with
// the reference in docs/, and every relative link in either reaches a file
// that exists (a moved section must not leave a dead link behind).
func TestDocsLinksResolve(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 600 {
		t.Errorf("README.md has %d lines; move reference material to docs/ (at most 600)", n)
	}
	pages, _ := filepath.Glob("docs/*.md")
	if len(pages) < 5 {
		t.Fatalf("docs/ holds %d pages, want the reference pages", len(pages))
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)
	for _, page := range append([]string{"README.md"}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(filepath.Dir(page), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
		if page != "README.md" && !strings.Contains(string(readme), "("+page+")") && !strings.Contains(string(readme), page) {
			t.Errorf("README.md does not link to %s", page)
		}
	}
}
