package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestPsCore lists a core the kernel wrote of a crashed target: the table
// names the core, its process and the signal; the JSON document follows
// the schema and holds the target's parked goroutines with their waits;
// --stacks is the runtime's format; --trace and a wrong --binary are one
// clear line each, and --binary without a core is refused.
func TestPsCore(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.StartToCrash(t, bin, "-park", "100", "-depth", "20")
	path := p.Crash(t)

	out := giOK(t, "ps", path)
	if !regexp.MustCompile(`pid ` + strconv.Itoa(p.Pid) + `, go1\.\d+.*, from core ` + regexp.QuoteMeta(path) + ` \(psstates.*, SIGABRT, written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)`).MatchString(out) {
		t.Errorf("no footer naming the core:\n%s", out)
	}
	if n := strings.Count(out, "main.parked"); n != 100 {
		t.Errorf("%d rows in main.parked, want the target's 100", n)
	}
	doc := giOK(t, "ps", "--json", path)
	validate(t, compileSchema(t, "ps"), "gi ps --json <core>", doc)
	var ps struct {
		PID        int    `json:"pid"`
		Origin     string `json:"origin"`
		Goroutines []struct {
			Function string `json:"function"`
			WaitNS   int64  `json:"wait_ns"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		t.Fatal(err)
	}
	waited := 0
	for _, g := range ps.Goroutines {
		if g.Function == "main.parked" && g.WaitNS > 0 {
			waited++
		}
	}
	if ps.PID != p.Pid || waited < 90 || !strings.Contains(ps.Origin, path) {
		t.Errorf("pid %d, origin %q, %d parked goroutines with a wait; want pid %d, the core, about 100", ps.PID, ps.Origin, waited, p.Pid)
	}
	if stacks := giOK(t, "ps", "--stacks", path); !strings.Contains(stacks, "goroutine 1 [select (no cases)]:\nmain.main(...)") {
		t.Errorf("--stacks is not the runtime's format:\n%.600s", stacks)
	}

	_, stderr, code := runGi(t, "ps", "--trace", "1s", path)
	checkOneLineError(t, stderr, code, `--trace measures a live process; .* is a core file`)
	_, stderr, code = runGi(t, "ps", "--binary", buildGi(t), path)
	checkOneLineError(t, stderr, code, `not the executable the core's process ran`)
	_, stderr, code = runGi(t, "ps", "--binary", bin, "1")
	checkOneLineError(t, stderr, code, `--binary goes with a core file`)

	// The executable moved: named, and given with --binary.
	moved := filepath.Join(t.TempDir(), "server")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, data, 0o755); err != nil {
		t.Fatal(err)
	}
	q := targets.StartToCrash(t, moved, "-park", "10", "-depth", "5")
	movedCore := q.Crash(t)
	if err := os.Remove(moved); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runGi(t, "ps", movedCore)
	checkOneLineError(t, stderr, code, `executable .*server.* is not where the core says.*give it: --binary PATH`)
	if out := giOK(t, "ps", "--binary", bin, movedCore); strings.Count(out, "main.parked") != 10 {
		t.Errorf("with --binary: %d rows in main.parked, want 10:\n%s", strings.Count(out, "main.parked"), out)
	}
}
