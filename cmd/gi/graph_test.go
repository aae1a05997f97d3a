package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestPsGraph: gi ps --graph on the holders target with its deadlocks
// writes the wait-for graph: a held-by edge from each lock the target
// says is held to its holder, the deadlocked goroutines and the edges of
// their cycles in red and nothing else, the waiters folded; as SVG
// through Graphviz, and over a planted link, which is replaced, not
// followed.
func TestPsGraph(t *testing.T) {
	targets.RequirePrivilege(t, "ptrace of another process")
	targets.RequireTool(t, "dot")
	p := targets.Start(t, targets.Build(t, "holders", targets.BuildOptions{}), "-n", "3", "-deadlock")
	holders := map[string]string{} // lock -> holder goid
	cycle := map[string]bool{}     // goids
	for _, line := range p.Lines() {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == "HOLD":
			holders[f[2]] = f[1]
		case len(f) == 4 && f[0] == "CYCLE":
			cycle[f[1]] = true
			holders[f[2]] = f[1]
		case len(f) == 3 && f[0] == "SELF":
			cycle[f[1]] = true
			holders[f[2]] = f[1]
		}
	}
	if len(holders) != 10 || len(cycle) != 6 {
		t.Fatalf("the target reported %d holders and %d deadlocked: %q", len(holders), len(cycle), p.Lines())
	}
	pid := strconv.Itoa(p.Cmd.Process.Pid)
	dir := t.TempDir()
	dotPath := filepath.Join(dir, "wf.dot")
	if _, stderr, code := runGi(t, "ps", "--graph", dotPath, pid); code != 0 {
		t.Fatalf("gi ps --graph: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(dotPath)
	if err != nil {
		t.Fatal(err)
	}
	dot := string(b)
	edge := regexp.MustCompile(`(?m)^  "([^"]+)" -> "([^"]+)" \[label="([a-z-]+)"(.*)\];$`)
	node := regexp.MustCompile(`(?m)^  "([^"]+)" \[label="((?:[^"\\]|\\.)*)", (.*)\];$`)
	labels := map[string]string{}
	red := map[string]bool{}
	for _, m := range node.FindAllStringSubmatch(dot, -1) {
		labels[m[1]] = m[2]
		if strings.Contains(m[3], "color=red") {
			red[m[1]] = true
		}
	}
	heldBy := map[string]string{} // object label's lock -> goroutine node
	redEdges := 0
	for _, m := range edge.FindAllStringSubmatch(dot, -1) {
		if strings.Contains(m[4], "color=red") {
			redEdges++
		}
		if m[3] == "held-by" {
			for lock := range holders {
				if strings.Contains(labels[m[1]], lock+" ") {
					heldBy[lock] = m[2]
				}
			}
		}
	}
	for lock, goid := range holders {
		if lock == "main.reg.mu" || lock == "main.emb.Mutex" {
			// Fields of heap objects: named by address.
			continue
		}
		if heldBy[lock] != "g"+goid {
			t.Errorf("%s is held by goroutine %s: the graph's held-by edge goes to %q", lock, goid, heldBy[lock])
		}
	}
	for goid := range cycle {
		if !red[("g" + goid)] {
			t.Errorf("goroutine %s is deadlocked, not red in the graph", goid)
		}
	}
	if len(red) != len(cycle) || redEdges != 2*len(cycle) {
		t.Errorf("%d red nodes and %d red edges, want %d and %d:\n%s", len(red), redEdges, len(cycle), 2*len(cycle), dot)
	}
	if !strings.Contains(dot, `label="3 goroutines at main.waitMutex"`) || !strings.Contains(dot, `label="3 goroutines at main.waitRead"`) {
		t.Errorf("the waiters are not folded:\n%s", dot)
	}

	// SVG, over a link planted at the path.
	svgPath := filepath.Join(dir, "wf.svg")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, svgPath); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runGi(t, "ps", "--graph", svgPath, pid); code != 0 {
		t.Fatalf("gi ps --graph .svg: exit %d: %s", code, stderr)
	}
	if v, _ := os.ReadFile(victim); string(v) != "keep" {
		t.Errorf("the link's target was written: %q", v)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	for goid := range cycle {
		if !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "goroutine "+goid+" ") {
			t.Errorf("the SVG lacks goroutine %s (%d bytes)", goid, len(svg))
		}
	}

	// A path that cannot be written fails first, before gi reads the
	// process (a program that is not Go would fail there).
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	_, stderr, code := runGi(t, "ps", "--graph", "/no/such/dir/x.svg", strconv.Itoa(sleeper.Process.Pid))
	checkOneLineError(t, stderr, code, `^gi: --graph: create /no/such/dir/x\.svg: no such file or directory`)
}

// TestDotQuote: names read from the target cannot break out of a DOT
// string nor carry control characters into the picture.
func TestDotQuote(t *testing.T) {
	cases := map[string]string{
		`mutex main.mu`:          `"mutex main.mu"`,
		`a "quoted" \ name`:      `"a \"quoted\" \\ name"`,
		"two\nlines":             `"two\nlines"`,
		"tab\tbell\a\x00end":     `"tab bell  end"`,
		"bad \xff utf8":          `"bad ` + "\uFFFD" + ` utf8"`,
		"zero\u200bwidth émigré": `"zero width émigré"`,
	}
	for in, want := range cases {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
