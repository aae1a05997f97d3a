package trace_test

import (
	"slices"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// TestSitesDecodeOnce: the selections made on one Sites decode each
// function's code once, whatever order they ask in, and each selection
// gets functions of its own (a session sets their arguments and index)
// with the same sites as a fresh Select finds.
func TestSitesDecodeOnce(t *testing.T) {
	bin, err := elfbin.Open(targets.Build(t, "tracee", targets.BuildOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	sites := trace.NewSites(bin)
	parses := elfbin.Parses()
	a, err := sites.Select(mustPatterns(t, "main.chainA"), nil)
	if err != nil || len(a.Functions) != 1 || sites.Decoded() != 1 {
		t.Fatalf("main.chainA: %v, %v, %d decoded", a, err, sites.Decoded())
	}
	all, err := sites.Select(mustPatterns(t, "main.chain*", "runtime.goexit0"), nil)
	if err != nil || len(all.Functions) != 3 || len(all.Untraceable) != 1 {
		t.Fatalf("main.chain*: %+v, %v", all, err)
	}
	if sites.Decoded() != 4 {
		t.Errorf("%d functions decoded after main.chainA then main.chain* and runtime.goexit0, want 4 (chainA once)", sites.Decoded())
	}
	if _, err := sites.Select(mustPatterns(t, "main.chain*", "runtime.goexit0"), nil); err != nil || sites.Decoded() != 4 {
		t.Errorf("the same selection again decoded more: %d, %v", sites.Decoded(), err)
	}
	if elfbin.Parses() != parses {
		t.Errorf("selecting parsed the binary %d more times", elfbin.Parses()-parses)
	}
	fresh, err := trace.Select(bin, mustPatterns(t, "main.chain*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range all.Functions {
		g := fresh.Functions[i]
		if f == g || f.Name != g.Name || f.EntrySite != g.EntrySite || len(f.Returns) != len(g.Returns) || f.Index != i {
			t.Errorf("function %d: %+v from the shared sites, %+v from a fresh Select", i, f, g)
		}
	}
	if a.Functions[0] == all.Functions[0] {
		t.Errorf("two selections share one *Function for main.chainA")
	}
	// Exact names are looked up, not matched: the same functions, in the
	// same order, excluded alike.
	exact, err := sites.Select([]trace.Pattern{trace.ExactName("main.chainC"), trace.ExactName("main.chainA"),
		trace.ExactName("main.chainB"), trace.ExactName("main.chainA"), trace.ExactName("main.noSuchFunction")}, mustPatterns(t, "main.chainB"))
	var want, got []string
	for _, f := range fresh.Functions {
		if f.Name != "main.chainB" {
			want = append(want, f.Name)
		}
	}
	if err == nil {
		for _, f := range exact.Functions {
			got = append(got, f.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("exact names chainC, chainA, chainB (excluded), chainA again: %q, %v; want %q", got, err, want)
	}
}
