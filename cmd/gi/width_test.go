package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestPsFitsTerminal runs gi ps on the demo service in real terminals
// (tmux) 80, 120 and 200 columns wide: every line of the listing and of
// --group fits, none wraps (the pane's lines joined where tmux wrapped
// them are no wider than the terminal), long cells end in "…"; --wide
// prints them whole; piped, the listing is whole, and no line of any
// output ends in spaces.
func TestPsFitsTerminal(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "demo", targets.BuildOptions{}), "-addr", "127.0.0.1:0")
	pid := strconv.Itoa(p.Pid)
	piped := giOK(t, "ps", pid)
	longest := 0
	for _, line := range strings.Split(piped, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("piped: a line ends in a space: %q", line)
		}
		longest = max(longest, len(line))
	}
	if longest <= 200 {
		t.Fatalf("the demo's listing is %d columns at most, not wider than the terminals tested", longest)
	}
	dir := t.TempDir()
	for _, width := range []int{80, 120, 200} {
		for k, args := range [][]string{{"ps"}, {"ps", "--group"}, {"ps", "--wide"}} {
			name := "gi-width-" + strconv.Itoa(width) + "-" + strconv.Itoa(k)
			s := newTmux(t, name, width, 50)
			out := filepath.Join(dir, name)
			s.keys(strings.Join(append(append([]string{gi}, args...), pid), " ")+"; echo DONE > "+out, "Enter")
			s.waitFor("the command's end", func(string) bool { _, err := os.Stat(out); return err == nil })
			screen := s.run("capture-pane", "-p", "-J", "-S", "-", "-t", name)
			wide := args[len(args)-1] == "--wide"
			rows, overflow, shortened := 0, 0, 0
			for _, line := range strings.Split(screen, "\n") {
				// Any row may hold the cell shortened (a long function
				// of net/http, an address), whatever the demo does then.
				if strings.Contains(line, "…") {
					shortened++
				}
				if !strings.Contains(line, "main.") {
					continue
				}
				rows++
				if cellWidth(line) > width {
					overflow++
				}
			}
			switch {
			case rows < 5:
				t.Errorf("%d columns, gi %v: %d rows on the screen:\n%s", width, args, rows, screen)
			case !wide && overflow > 0:
				t.Errorf("%d columns, gi %v: %d of %d rows wider than the terminal:\n%s", width, args, overflow, rows, screen)
			case !wide && width < longest && shortened == 0:
				t.Errorf("%d columns, gi %v: no cell shortened with …:\n%s", width, args, screen)
			case wide && shortened > 0:
				t.Errorf("%d columns, gi %v: %d rows shortened:\n%s", width, args, shortened, screen)
			}
		}
	}
}

// TestTraceStatsFitsTerminal: gi trace --stats --why's tables fit the
// terminal they print to, function names shortened at their start (the
// method's own name kept), and print whole, with no trailing spaces, when
// piped.
func TestTraceStatsFitsTerminal(t *testing.T) {
	requirePrivilege(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing (make deps installs it)")
	}
	gi := buildGi(t)
	p := targets.Start(t, targets.Build(t, "demo", targets.BuildOptions{}), "-addr", "127.0.0.1:0")
	pid := strconv.Itoa(p.Pid)
	args := []string{"trace", "--stats", "--why", "--duration", "1500ms", "--max-overhead", "none", pid, "main.handle", "main.query", "net/http.(*conn).serve"}
	piped := giOK(t, args...)
	longest := 0
	for _, line := range strings.Split(piped, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("piped: a line ends in a space: %q", line)
		}
		longest = max(longest, cellWidth(line))
	}
	for _, want := range []string{"net/http.(*conn).serve", "main.handle", "P99", "where the time went"} {
		if !strings.Contains(piped, want) {
			t.Fatalf("piped output lacks %q:\n%s", want, piped)
		}
	}
	t.Logf("piped, the widest line takes %d columns", longest)
	dir := t.TempDir()
	for _, width := range []int{80, 120, 200} {
		name := "gi-stats-width-" + strconv.Itoa(width)
		s := newTmux(t, name, width, 60)
		out := filepath.Join(dir, name)
		s.keys(gi+" "+strings.Join(args[:len(args)-4], " ")+" "+pid+" main.handle main.query 'net/http.(*conn).serve' 2>/dev/null; echo DONE > "+out, "Enter")
		s.waitFor("the command's end", func(string) bool { _, err := os.Stat(out); return err == nil })
		screen := s.run("capture-pane", "-p", "-J", "-S", "-", "-t", name)
		rows, shortened := 0, 0
		for _, line := range strings.Split(screen, "\n") {
			if !strings.Contains(line, "main.") && !strings.Contains(line, ").serve") {
				continue
			}
			if strings.Contains(line, "DONE") {
				continue // the command line
			}
			rows++
			if cellWidth(line) > width {
				t.Errorf("%d columns: a row wider than the terminal: %q", width, line)
			}
			if strings.Contains(line, "…") {
				shortened++
				if strings.Contains(line, "serve") && !strings.Contains(line, ").serve") {
					t.Errorf("%d columns: the method's name cut: %q", width, line)
				}
			}
		}
		switch {
		case rows < 3:
			t.Errorf("%d columns: %d rows of the tables on the screen:\n%s", width, rows, screen)
		case width < longest && shortened == 0:
			t.Errorf("%d columns: the tables are %d wide piped, and no cell was shortened:\n%s", width, longest, screen)
		case width >= longest && shortened > 0:
			t.Errorf("%d columns: %d rows shortened that fit:\n%s", width, shortened, screen)
		}

	}
}
