package inspect_test

import (
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestGcoreMatchesRuntimeDump has gdb's gcore write a core of a live
// psstates target just after the target took its own goroutine dump, and
// compares gi's reading of the core (core.Open, inspect.New, Decode) with
// that dump, goroutine by goroutine, as TestCoreMatchesRuntimeDump does
// for the kernel's cores: default, PIE and stripped builds of each Go
// release under test. gcore's cores differ from the kernel's: gdb names
// and orders the notes its own way, its first thread is not one that
// took a signal (none did: the process was only stopped), and it writes
// the process's memory as gdb reads it. The waits come from the core's
// time (core.Now, its file's modification time): plausible ones are
// required. The target must be running, neither stopped nor traced,
// after gcore (targets.Gcore checks it).
func TestGcoreMatchesRuntimeDump(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range coreBuilds() {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "500", "-depth", "50")
			compareCoreWithDump(t, p, targets.Gcore(t, p.Pid), 500)
		})
	}
}
