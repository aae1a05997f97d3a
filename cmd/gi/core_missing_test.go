package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// TestPsCoreMissingMemory lists cores that lack memory gi needs. A core
// cut short inside the heap (as RLIMIT_CORE or a full disk cut it): one
// warning line naming the mapping cut off and the byte the core ends at,
// and the goroutines gi could still decode, fewer than the whole core's
// but some, in every output (--json follows the schema). Cut at the
// allgs array, or written with a coredump_filter that leaves anonymous
// memory out: one clear error line naming the mapping, non-zero exit.
func TestPsCoreMissingMemory(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.StartToCrash(t, bin, "-park", "200", "-depth", "20")
	path := p.Crash(t)
	whole := listed(t, giOK(t, "ps", path))
	cuts := targets.FindCoreCuts(t, path, bin, gAddrs(t, path))

	if err := os.Truncate(path, cuts.InGs); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runGi(t, "ps", path)
	warning := regexp.MustCompile(`^gi: warning: core ` + regexp.QuoteMeta(path) + ` lacks memory gi needs, so the listing holds only what it could decode: ` +
		`mappings? 0x[0-9a-f]+-0x[0-9a-f]+ \([0-9]+ [KMG]?i?B(ytes)?\).*, cut off: the core is truncated at byte ` + strconv.FormatInt(cuts.InGs, 10) + ` \(RLIMIT_CORE, a full disk\?\)\n$`)
	if code != 0 || !warning.MatchString(stderr) {
		t.Errorf("cut at byte %d: exit %d, stderr %q; want 0 and one warning naming the mapping cut off", cuts.InGs, code, stderr)
	}
	if n := listed(t, out); n == 0 || n >= whole {
		t.Errorf("cut at byte %d: %d goroutines listed, want fewer than the whole core's %d but some:\n%s", cuts.InGs, n, whole, out)
	}
	doc, stderr, code := runGi(t, "ps", "--json", path)
	if code != 0 || !warning.MatchString(stderr) {
		t.Errorf("--json, cut at byte %d: exit %d, stderr %q", cuts.InGs, code, stderr)
	}
	validate(t, compileSchema(t, "ps"), "gi ps --json <truncated core>", doc)

	if err := os.Truncate(path, cuts.AllGs); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runGi(t, "ps", path)
	checkOneLineError(t, stderr, code, `allgs.*: not in the core: mapping 0x[0-9a-f]+-0x[0-9a-f]+ \(.*\), cut off: the core is truncated at byte `+strconv.FormatInt(cuts.AllGs, 10))

	q := targets.StartToCrash(t, bin, "-park", "10")
	targets.SetCoredumpFilter(t, q.Pid, "0x36") // the executable's data, not anonymous memory
	_, stderr, code = runGi(t, "ps", q.Crash(t))
	checkOneLineError(t, stderr, code, `not in the core: mapping 0x[0-9a-f]+-0x[0-9a-f]+ \(.*\), left out of the core \(coredump_filter\)`)
}

// listed returns the number of goroutines a table's footer counts.
func listed(t *testing.T, table string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(\d+) goroutines:`).FindStringSubmatch(table)
	if m == nil {
		t.Fatalf("no footer counting goroutines:\n%s", table)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// gAddrs returns the addresses of the g structures of the core at path.
func gAddrs(t *testing.T, path string) []uint64 {
	t.Helper()
	c, err := core.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tgt, err := inspect.New(c.Process)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tgt.Decode(c.Threads, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, g := range snap.Goroutines {
		out = append(out, g.Addr)
	}
	if len(out) == 0 || strings.Contains(strings.Join(snap.Warnings, "\n"), "unreadable") {
		t.Fatalf("the whole core: %d goroutines, warnings %q", len(out), snap.Warnings)
	}
	return out
}
