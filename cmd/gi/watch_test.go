package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

// growthDoc is the part of a gi ps --since/--watch --json document the
// tests read.
type growthDoc struct {
	Before, After, Unmoved int
	Sites                  []struct {
		Function      string
		Before, After int
		PerSec        float64 `json:"per_sec"`
	}
	UnmovedGoids []uint64 `json:"unmoved_goids"`
}

func (d growthDoc) site(fn string) (before, after int, perSec float64, ok bool) {
	for _, s := range d.Sites {
		if s.Function == fn {
			return s.Before, s.After, s.PerSec, true
		}
	}
	return 0, 0, 0, false
}

func parseGrowth(t *testing.T, line string) growthDoc {
	t.Helper()
	var d growthDoc
	if err := json.Unmarshal([]byte(line), &d); err != nil {
		t.Fatalf("%v: %.300s", err, line)
	}
	return d
}

// TestPsSince saves a listing of testdata/leaky, has it leak 30 more
// goroutines (created in main.grow), and compares: gi ps --since says the
// 30 grew there, and that every goroutine the target parked before has
// not moved while none of the new ones is among the unmoved; two saved
// listings compare the same; the documents match the schema.
func TestPsSince(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2")
	pid := strconv.Itoa(p.Pid)
	dir := t.TempDir()
	before := filepath.Join(dir, "before.json")
	if err := os.WriteFile(before, []byte(giOK(t, "ps", "--json", pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	parked := map[uint64]bool{}
	for _, line := range p.Lines() {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "G" {
			id, _ := strconv.ParseUint(f[1], 10, 64)
			parked[id] = true
		}
	}
	if _, err := p.Do("grow 30", time.Minute); err != nil {
		t.Fatal(err)
	}
	live := giOK(t, "ps", "--since", before, "--json", pid)
	validate(t, compileSchema(t, "growth"), "gi ps --since --json", live)
	d := parseGrowth(t, live)
	if b, a, _, ok := d.site("main.grow"); !ok || b != 0 || a != 30 {
		t.Errorf("site main.grow: %d before, %d after (%v), want 0 and 30", b, a, ok)
	}
	if d.After-d.Before != 30 {
		t.Errorf("%d goroutines before, %d after: want 30 more", d.Before, d.After)
	}
	unmoved := map[uint64]bool{}
	for _, id := range d.UnmovedGoids {
		unmoved[id] = true
	}
	for id := range parked {
		if !unmoved[id] {
			t.Errorf("goroutine %d, parked all along, is not among the unmoved", id)
		}
	}
	if len(unmoved) > len(parked)+2 { // the main goroutine's select {}, the holder's sleep
		t.Errorf("%d goroutines have not moved, the target parked %d (and 2 of its own)", len(unmoved), len(parked))
	}

	after := filepath.Join(dir, "after.json")
	if err := os.WriteFile(after, []byte(giOK(t, "ps", "--json", pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := parseGrowth(t, giOK(t, "ps", "--since", before, "--json", after))
	if b, a, _, _ := saved.site("main.grow"); b != 0 || a != 30 || saved.Unmoved != d.Unmoved {
		t.Errorf("two saved listings: main.grow %d → %d, %d unmoved; live: %d unmoved", b, a, saved.Unmoved, d.Unmoved)
	}
	table := giOK(t, "ps", "--since", before, pid)
	if !regexp.MustCompile(`(?m)^\s*\+30\s+30\s+0\s+[0-9.]+/s\s+0\s+main\.grow \(leaky/main\.go:\d+\)`).MatchString(table) {
		t.Errorf("no growth row for main.grow:\n%s", table)
	}
	_, stderr, code := runGi(t, "ps", "--since", filepath.Join(dir, "none.json"), pid)
	checkOneLineError(t, stderr, code, `--since: open .*none\.json: no such file or directory`)
	_, stderr, code = runGi(t, "ps", "--count", "2", pid)
	checkOneLineError(t, stderr, code, `--count goes with --watch D`)
}

// TestPsWatch runs gi ps --watch with two intervals on testdata/leaky
// and has it leak 10 goroutines once gi has taken its first snapshot:
// the last line says main.grow grew by 10, at a rate above 0; gi exits
// by itself after its two intervals and the target runs on.
func TestPsWatch(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "1")
	cmd := exec.Command(buildGi(t), "ps", "--watch", "700ms", "--count", "2", "--json", strconv.Itoa(p.Pid))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	first, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "gi: watching pid "+strconv.Itoa(p.Pid)) {
		t.Fatalf("gi's first line: %q, %v", first, err)
	}
	if _, err := p.Do("grow 10", time.Minute); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gi ps --watch: %v", err)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per interval, 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	d := parseGrowth(t, lines[1])
	if b, a, rate, ok := d.site("main.grow"); !ok || a-b != 10 || rate <= 0 {
		t.Errorf("main.grow: %d → %d at %.1f/s (%v), want 10 more", b, a, rate, ok)
	}
	if err := targets.NotStopped(p.Pid); err != nil {
		t.Fatal(err)
	}
}
