package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagReferenceCurrent renders the flag reference from gi's commands
// and fails if docs/flags.md differs from it. With GI_UPDATE_FLAGS set it
// rewrites docs/flags.md instead.
func TestFlagReferenceCurrent(t *testing.T) {
	got := flagReference(newRootCommand(&app{}))
	path := filepath.Join("..", "..", filepath.FromSlash(flagReferencePath))
	if os.Getenv("GI_UPDATE_FLAGS") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", flagReferencePath)
		return
	}
	const update = "run `GI_UPDATE_FLAGS=1 go test ./cmd/gi/ -run TestFlagReferenceCurrent` to rewrite it, and commit it"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: %s", err, update)
	}
	if want := string(b); want != got {
		line, have, should := firstDifference(want, got)
		t.Fatalf("%s is not the flag reference gi's commands render (first difference at line %d:\n  file:     %q\n  commands: %q)\n%s",
			flagReferencePath, line, have, should, update)
	}
}

// firstDifference returns the first line (1-based) where a and b differ,
// and that line of each ("" past the end).
func firstDifference(a, b string) (int, string, string) {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return i + 1, x, y
		}
	}
}
