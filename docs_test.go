package retry

import (
	"go/ast"
	"go/parser"
	"go/token"
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
	// A newcomer reads the README in ten minutes: about 350 lines.
	if n := strings.Count(string(readme), "\n"); n > 350 {
		t.Errorf("README.md has %d lines; move reference material to docs/ (at most 350)", n)
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

// TestGiveUpReasonsAreDocumented: every reason the loop and the strategies
// give up with (an exported Err… sentinel of this package) is listed in
// every place that lists them: the package doc, the doc of Error, and the
// "Reasons:" paragraphs of the README and docs/api.md; and Do's doc names
// the default strategy's usual one.
func TestGiveUpReasonsAreDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var sentinels []string
	docs := map[string]string{}
	for _, f := range pkgs["retry"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok && d.Tok == token.VAR {
						for _, n := range vs.Names {
							if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
								sentinels = append(sentinels, n.Name)
							}
						}
					}
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Error" {
						docs["Error"] = d.Doc.Text()
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "Do" {
					docs["Do"] = d.Doc.Text()
				}
			}
		}
		if f.Doc != nil && f.Name.Name == "retry" && strings.HasPrefix(f.Doc.Text(), "Package retry") {
			docs["package"] = f.Doc.Text()
		}
	}
	for _, name := range sentinels {
		for _, where := range []string{"package", "Error"} {
			if !strings.Contains(docs[where], name) {
				t.Errorf("the %s doc lacks %s", where, name)
			}
		}
	}
	for _, page := range []string{"README.md", "docs/api.md"} {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		reasons := regexp.MustCompile(`(?s)\nReasons: (.*?)\n\n`).FindSubmatch(text)
		if reasons == nil {
			t.Fatalf(`%s has no "Reasons:" paragraph`, page)
		}
		for _, name := range sentinels {
			if !strings.Contains(string(reasons[1]), "`"+name+"`") {
				t.Errorf("%s's list of reasons lacks %s", page, name)
			}
		}
	}
	if !strings.Contains(docs["Do"], "ErrBudgetExhausted") {
		t.Error("the doc of Do does not name ErrBudgetExhausted, the default strategy's usual reason")
	}
	if len(sentinels) < 9 {
		t.Fatalf("found %d sentinels (%v): the parse missed some", len(sentinels), sentinels)
	}
}
