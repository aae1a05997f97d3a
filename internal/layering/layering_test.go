package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gi-debug/gi/"

// architectureDoc is the document, from the module's root, whose
// "## Architecture" section holds the table of packages.
const architectureDoc = "docs/architecture.md"

// TestImportsPointDown reads the architecture table of docs/architecture.md
// (a package's rank is its row; packages named in one row share it) and
// every package's imports (test files aside), and fails on a package the
// table does not place and on an import of a package above the importer.
func TestImportsPointDown(t *testing.T) {
	root := filepath.Join("..", "..")
	rank := tableRanks(t, filepath.Join(root, filepath.FromSlash(architectureDoc)))
	imports := packageImports(t, root)
	if len(imports) < 10 {
		t.Fatalf("found %d packages: the walk is broken", len(imports))
	}
	for pkg, deps := range imports {
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("package %s is not in the architecture table of "+architectureDoc+": place it", pkg)
			continue
		}
		for _, dep := range deps {
			d, ok := rank[dep]
			if !ok {
				continue // reported as a package of its own
			}
			if d <= r && dep != pkg {
				t.Errorf("%s imports %s, which the architecture table of "+architectureDoc+" puts at or above it (row %d, %s's row %d)", pkg, dep, d, pkg, r)
			}
		}
	}
	for pkg := range rank {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("the architecture table of "+architectureDoc+" names %s, which is not a package", pkg)
		}
	}
}

// tableRanks returns the row of each package the architecture table of
// the document doc names in its first column.
func tableRanks(t *testing.T, doc string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n## Architecture\n")
	if i < 0 {
		t.Fatalf("%s has no Architecture section", doc)
	}
	name := regexp.MustCompile("`([a-z0-9/]+)`")
	rank := map[string]int{}
	row := 0
	for _, line := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "| ") {
			if row > 0 {
				break // the table's end
			}
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "package" {
			continue
		}
		row++
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			rank[m[1]] = row
		}
	}
	if row < 10 {
		t.Fatalf("read %d rows of the architecture table of %s", row, doc)
	}
	return rank
}

// packageImports returns each package directory under root (relative,
// slash-separated) and the module's packages its non-test files import.
func packageImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "bin" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		deps := out[pkg]
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, module) {
				deps = append(deps, strings.TrimPrefix(p, module))
			}
		}
		out[pkg] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
