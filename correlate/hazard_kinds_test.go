package correlate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHazardKinds checks that HazardKinds lists every Hazard* constant
// of the package, so that what is checked against it (remediation lines,
// docs/runbook.md) covers every kind a new constant adds.
func TestHazardKinds(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Hazard") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts = append(consts, v)
					}
				}
			}
		}
	}
	if len(consts) < 20 {
		t.Fatalf("found only %d Hazard* constants: %v", len(consts), consts)
	}
	slices.Sort(consts)
	got := slices.Sorted(slices.Values(HazardKinds))
	if !slices.Equal(consts, got) {
		t.Errorf("HazardKinds differs from the Hazard* constants:\nconstants: %v\nHazardKinds: %v", consts, got)
	}
}
