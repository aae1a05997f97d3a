package inspect_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
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
	var builds []targets.BuildOptions
	for _, tc := range targets.Toolchains() {
		builds = append(builds, targets.BuildOptions{Toolchain: tc}, targets.BuildOptions{Toolchain: tc, PIE: true}, targets.BuildOptions{Toolchain: tc, Stripped: true})
	}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "500", "-depth", "50")
			path := targets.Gcore(t, p.Pid)
			if !core.IsCore(path) {
				t.Fatalf("%s is not a core file", path)
			}
			c, err := core.Open(path, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Process.PID != p.Pid || !strings.HasPrefix(c.Command, "psstates") || len(c.Threads) < 2 {
				t.Errorf("core of pid %d (%q), %d threads; want pid %d, psstates, its threads", c.Process.PID, c.Command, len(c.Threads), p.Pid)
			}
			tgt, err := inspect.New(c.Process)
			if err != nil {
				t.Fatal(err)
			}
			now, ok := c.Now()
			if !ok {
				t.Fatal("the time of a core written just now is unknown")
			}
			start := time.Now()
			snap, err := tgt.Decode(c.Threads, now)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("decoded %d goroutines of gcore's core (signal %d, %d threads) in %v", len(snap.Goroutines), c.Signal, len(c.Threads), time.Since(start))
			raw, err := os.ReadFile(p.DumpPath)
			if err != nil {
				t.Fatal(err)
			}
			compareDump(t, snap, raw, p.DumperGoid, 500)
			checkIOWaitInCore(t, snap)
		})
	}
}
