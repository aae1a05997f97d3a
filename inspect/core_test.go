package inspect_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// TestCoreMatchesRuntimeDump has the kernel write a core of a target that
// dies of SIGQUIT with GOTRACEBACK=crash, and compares gi's reading of
// the core (core.Open, inspect.New, Decode) with the dump the target took
// of itself, goroutine by goroutine, as TestSnapshotMatchesRuntimeDump
// does for a live stop: default, PIE and stripped builds (the stripped
// one's layout from the generated table, its allgs found in code) of each
// Go release under test (the stripped one's environment, for GODEBUG's
// tracebacklabels, read from its first stack in the core). The
// waits come from the core's time (core.Now): plausible ones are required.
// The test points the kernel's core_pattern at its own directory and
// restores it; the target's RLIMIT_CORE is raised to its hard limit.
func TestCoreMatchesRuntimeDump(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range coreBuilds() {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.StartToCrash(t, targets.Build(t, "psstates", opts), "-park", "500", "-depth", "50")
			c := compareCoreWithDump(t, p.Process, p.Crash(t), 500)
			if c.Signal != int(syscall.SIGABRT) {
				t.Errorf("core of a crash with signal %d, want SIGABRT", c.Signal)
			}
		})
	}
}

// coreBuilds are the builds the core tests read cores of: default, PIE
// and stripped, of each Go release under test.
func coreBuilds() []targets.BuildOptions {
	var builds []targets.BuildOptions
	for _, tc := range targets.Toolchains() {
		builds = append(builds, targets.BuildOptions{Toolchain: tc}, targets.BuildOptions{Toolchain: tc, PIE: true}, targets.BuildOptions{Toolchain: tc, Stripped: true})
	}
	return builds
}

// compareCoreWithDump reads the core at path of psstates target p
// (core.Open, inspect.New, Decode at the core's time) and compares it
// with the dump the target took of itself, goroutine by goroutine, its
// parked goroutines and its IO waiter's descriptor included; it returns
// the core, open until the test ends.
func compareCoreWithDump(t *testing.T, p *targets.Process, path string, parked int) *core.Core {
	t.Helper()
	if !core.IsCore(path) {
		t.Fatalf("%s is not a core file", path)
	}
	c, err := core.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Process.PID != p.Pid || !strings.HasPrefix(c.Command, "psstates") || len(c.Threads) < 2 {
		t.Errorf("core of pid %d (%q), %d threads; want pid %d, psstates, its threads", c.Process.PID, c.Command, len(c.Threads), p.Pid)
	}
	for _, th := range c.Threads {
		// The kernel and gdb write each thread's vector registers
		// after its NT_PRSTATUS (the leak walk scans them).
		if len(th.Vector) < 512 || th.VectorErr != nil {
			t.Errorf("thread %d of the core: %d bytes of vector registers (note %#x)", th.TID, len(th.Vector), th.VectorNote)
		}
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
	t.Logf("decoded %d goroutines of the core (signal %d, %d threads) in %v", len(snap.Goroutines), c.Signal, len(c.Threads), time.Since(start))
	raw, err := os.ReadFile(p.DumpPath)
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, snap, raw, p.DumperGoid, parked)
	checkIOWaitInCore(t, snap)
	return c
}

// checkIOWaitInCore requires psstates' goroutine in IO wait on its TCP
// connection to be found waiting to read a descriptor, from its stack
// (a kernel's core has no epoll registrations to read).
func checkIOWaitInCore(t *testing.T, snap *inspect.Snapshot) {
	t.Helper()
	for _, g := range snap.Goroutines {
		if len(g.Frames) == 0 || g.WaitReason != "IO wait" || !strings.Contains(describeGoroutine(g), "main.ioWaiter") {
			continue
		}
		if len(g.WaitingOn) != 1 || g.WaitingOn[0].FD == nil || g.WaitingOn[0].FD.FD < 3 || g.WaitingOn[0].Dir != "read" || g.WaitingOn[0].Addr == 0 {
			t.Errorf("goroutine %d in main.ioWaiter waits on %+v, want a descriptor it reads, its pollDesc found", g.ID, g.WaitingOn)
		}
		return
	}
	t.Error("no goroutine in IO wait in main.ioWaiter")
}
