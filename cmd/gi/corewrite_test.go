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

// TestPsWritesCore has gi ps --core write a core of a live target from
// its stop: the JSON listing gi ps reads back from the core equals the
// one it printed live (but the pause and where it came from), the line
// on stderr says what the core holds, the target runs on untraced; a
// core file cannot be written of a core, --core-all needs --core, and a
// core gi cannot create fails before the target is touched.
func TestPsWritesCore(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.Start(t, bin, "-park", "200", "-depth", "20")
	path := filepath.Join(t.TempDir(), "core.psstates")
	live, stderr, code := runGi(t, "ps", "--json", "--core", path, strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatalf("gi ps --core: exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`^gi: wrote core ` + regexp.QuoteMeta(path) + `: [0-9.]+ MB of memory in \d+ segments \([0-9.]+ MB read after the stop\), pause .*, written in .*\n$`).MatchString(stderr) {
		t.Errorf("stderr does not say what the core holds: %q", stderr)
	}
	if err := targets.NotStopped(p.Pid); err != nil {
		t.Fatal(err)
	}
	back := giOK(t, "ps", "--json", path)
	validate(t, compileSchema(t, "ps"), "gi ps --json <gi's core>", back)
	a, b := listingOf(t, live), listingOf(t, back)
	if a != b {
		t.Errorf("the listing read back from the core differs from the live one:\nlive: %.2000s\ncore: %.2000s", a, b)
	}
	if n := strings.Count(a, `"main.parked"`); n < 200 {
		t.Errorf("%d goroutines in main.parked, want the target's 200", n)
	}

	_, stderr, code = runGi(t, "ps", "--core", filepath.Join(t.TempDir(), "again"), path)
	checkOneLineError(t, stderr, code, `--core writes a core of a live process; .* is a core file already`)
	_, stderr, code = runGi(t, "ps", "--core-all", strconv.Itoa(p.Pid))
	checkOneLineError(t, stderr, code, `--core-all goes with --core FILE`)
	_, stderr, code = runGi(t, "ps", "--core", "/no/such/dir/core", strconv.Itoa(p.Pid))
	checkOneLineError(t, stderr, code, `core file: create /no/such/dir/core: no such file or directory`)
	if err := targets.NotStopped(p.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/no/such/dir/core"); err == nil {
		t.Error("a core was written where no directory is")
	}
}

// listingOf returns a gi ps JSON document's goroutines, re-encoded: what
// a listing says, without the pause and origin of the run that made it.
func listingOf(t *testing.T, doc string) string {
	t.Helper()
	var ps struct {
		PID        int             `json:"pid"`
		GoVersion  string          `json:"go_version"`
		Goroutines json.RawMessage `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		t.Fatalf("%v: %.300s", err, doc)
	}
	return strconv.Itoa(ps.PID) + " " + ps.GoVersion + " " + string(ps.Goroutines)
}
