package inspect_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
)

var (
	tracerOnce sync.Once
	tracer     *ptrace.Tracer
)

func sharedTracer() *ptrace.Tracer {
	tracerOnce.Do(func() { tracer = ptrace.NewTracer() })
	return tracer
}

// requirePrivilege skips, or under GI_REQUIRE_PRIVILEGED=1 fails, a test
// that needs root to ptrace another process.
func requirePrivilege(t testing.TB) {
	t.Helper()
	targets.RequirePrivilege(t, "ptrace of another process")
}

// busy reports whether a goroutine of the psstates target spins on a CPU:
// its state and stack legitimately differ between two instants.
func busy(frames []string) bool {
	for _, f := range frames {
		if strings.Contains(f, "main.spin") {
			return true
		}
	}
	return false
}

func frameKeys(fs []targets.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		off := ""
		if f.Offset != 0 {
			off = fmt.Sprintf(" +%#x", f.Offset)
		}
		out[i] = fmt.Sprintf("%s inlined=%v %s:%d%s", f.Function, f.Inlined, f.File, f.Line, off)
	}
	return out
}

// TestSnapshotMatchesRuntimeDump compares gi's snapshot of the psstates target
// with the dump the target took of itself, goroutine by goroutine, for every
// toolchain under test, PIE and not.
func TestSnapshotMatchesRuntimeDump(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		for _, pie := range []bool{false, true} {
			opts := targets.BuildOptions{Toolchain: tc, PIE: pie}
			t.Run(opts.String(), func(t *testing.T) {
				t.Parallel()
				bin := targets.Build(t, "psstates", opts)
				compareWithDump(t, bin, "-park", "2000", "-depth", "300")
			})
		}
	}
}

// TestSnapshotStripped does the same for binaries linked with -s -w: no
// symbols, no DWARF; layouts from the generated table, allgs found in code.
func TestSnapshotStripped(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		for _, pie := range []bool{false, true} {
			opts := targets.BuildOptions{Toolchain: tc, PIE: pie, Stripped: true}
			t.Run(opts.String(), func(t *testing.T) {
				t.Parallel()
				bin := targets.Build(t, "psstates", opts)
				compareWithDump(t, bin, "-park", "2000", "-depth", "300")
			})
		}
	}
}

// TestSnapshotFrozen compares the snapshot read from a copy the target
// made of itself in the stop (Target.Freeze) with the target's own dump,
// on every toolchain, PIE and stripped, and checks the copy is gone: no
// process, no zombie left among the target's children.
func TestSnapshotFrozen(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		for _, opts := range []targets.BuildOptions{{Toolchain: tc}, {Toolchain: tc, PIE: true}, {Toolchain: tc, Stripped: true}} {
			t.Run(opts.String(), func(t *testing.T) {
				t.Parallel()
				p := targets.Start(t, targets.Build(t, "psstates", opts), "-park", "2000", "-depth", "300")
				compareFrozen(t, p)
			})
		}
	}
}

// compareFrozen takes a frozen snapshot of p, compares it with p's dump,
// and checks that no copy is left among p's children.
func compareFrozen(t *testing.T, p *targets.Process) *inspect.Snapshot {
	snap := takeAndCompare(t, p, true)
	if !snap.Frozen || snap.FreezeRefused != "" {
		t.Fatalf("snapshot not frozen: %q", snap.FreezeRefused)
	}
	if kids := targets.Children(p.Pid); len(kids) != 0 {
		t.Errorf("the target has children after the snapshot: %v", kids)
	}
	return snap
}

func compareWithDump(t *testing.T, bin string, args ...string) {
	compareSnapshot(t, targets.Start(t, bin, args...))
}

// compareSnapshot compares gi's snapshot of a running psstates target with
// the dump the target took of itself.
func compareSnapshot(t *testing.T, p *targets.Process) *inspect.Snapshot {
	return takeAndCompare(t, p, false)
}

func takeAndCompare(t *testing.T, p *targets.Process, freeze bool) *inspect.Snapshot {
	tgt, err := inspect.Open(p.Pid)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer tgt.Close()
	tgt.Freeze = freeze
	snap, err := tgt.Snapshot(sharedTracer())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	targets.CheckNotStopped(t, p.Pid)

	raw, err := os.ReadFile(p.DumpPath)
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, snap, raw, p.DumperGoid, 2000)
	return snap
}

// compareDump compares a snapshot of psstates with the runtime's own
// dump of it (dump, taken by goroutine dumper), goroutine by goroutine; at
// least minCompared goroutines must be compared.
func compareDump(t *testing.T, snap *inspect.Snapshot, dump []byte, dumper int64, minCompared int) {
	t.Helper()
	want, err := targets.ParseDump(bytes.NewReader(dump))
	if err != nil {
		t.Fatalf("parse the target's own dump: %v", err)
	}

	got := parsedDump(t, snap)

	gotByID := map[int64]targets.Goroutine{}
	for _, g := range got {
		gotByID[g.ID] = g
	}
	compared, dumpLabels := 0, 0
	for _, w := range want {
		if w.ID == dumper {
			continue // the goroutine that took the dump has exited since
		}
		g, ok := gotByID[w.ID]
		if !ok {
			t.Errorf("goroutine %d [%s] is in the runtime's dump but not in gi's", w.ID, w.State)
			continue
		}
		delete(gotByID, w.ID)
		compared++
		wf, gf := frameKeys(w.Frames), frameKeys(g.Frames)
		if busy(wf) || busy(gf) {
			if !oneOf(g.State, "running", "runnable", "preempted") {
				t.Errorf("goroutine %d: busy goroutine in state %q", w.ID, g.State)
			}
			continue
		}
		if g.State != w.State {
			t.Errorf("goroutine %d: state %q, runtime says %q", w.ID, g.State, w.State)
		}
		if g.Locked != w.Locked {
			t.Errorf("goroutine %d: locked to thread %v, runtime says %v", w.ID, g.Locked, w.Locked)
		}
		if !maps.Equal(g.Labels, w.Labels) {
			t.Errorf("goroutine %d: labels in the header %v, runtime says %v", w.ID, g.Labels, w.Labels)
		}
		if len(w.Labels) > 0 {
			dumpLabels++
		}
		if g.ElidedFrames != w.ElidedFrames {
			t.Errorf("goroutine %d: %d frames elided, runtime says %d", w.ID, g.ElidedFrames, w.ElidedFrames)
		}
		if strings.Join(gf, "\n") != strings.Join(wf, "\n") {
			t.Errorf("goroutine %d [%s] frames differ:\ngi:\n\t%s\nruntime:\n\t%s", w.ID, w.State, strings.Join(gf, "\n\t"), strings.Join(wf, "\n\t"))
		}
		switch {
		case (g.CreatedBy == nil) != (w.CreatedBy == nil):
			t.Errorf("goroutine %d: created by %+v, runtime says %+v", w.ID, g.CreatedBy, w.CreatedBy)
		case g.CreatedBy != nil:
			if frameKeys([]targets.Frame{*g.CreatedBy})[0] != frameKeys([]targets.Frame{*w.CreatedBy})[0] || g.CreatedByGoid != w.CreatedByGoid {
				t.Errorf("goroutine %d: created by %+v in %d, runtime says %+v in %d", w.ID, *g.CreatedBy, g.CreatedByGoid, *w.CreatedBy, w.CreatedByGoid)
			}
		}
	}
	// The dumper prints READY and then exits: gi may still catch it on its
	// way out, inside main.dumper (writing READY) or in the runtime's
	// goroutine exit.
	if g, ok := gotByID[dumper]; ok {
		delete(gotByID, dumper)
		exiting := len(g.Frames) > 0 && strings.HasPrefix(g.Frames[0].Function, "runtime.goexit")
		if !exiting && !slices.ContainsFunc(g.Frames, func(f targets.Frame) bool { return f.Function == "main.dumper" }) {
			t.Errorf("goroutine %d, the dumper, is listed [%s] outside main.dumper:\n\t%s", g.ID, g.State, strings.Join(frameKeys(g.Frames), "\n\t"))
		}
	}
	for id, g := range gotByID {
		t.Errorf("goroutine %d [%s] is in gi's listing but not in the runtime's dump", id, g.State)
	}
	if compared < minCompared {
		t.Errorf("compared only %d goroutines", compared)
	}
	t.Logf("%s: compared %d goroutines, pause %v, total %v, labels in headers: %v", snap.GoVersion, compared, snap.Pause, snap.Total, snap.TracebackLabels)
	// psstates runs with GODEBUG=tracebacklabels=1: from Go 1.26 on the
	// runtime prints its labelled goroutine's labels, and gi must know it
	// from the target (unless stripped: then it cannot, and prints none,
	// which the comparison above catches as a difference).
	if v, ok := strings.CutPrefix(snap.GoVersion, "go1."); ok && (strings.HasPrefix(v, "26") || strings.HasPrefix(v, "27")) {
		if dumpLabels != 1 {
			t.Errorf("the runtime printed labels for %d goroutines, want 1 (GODEBUG=tracebacklabels=1)", dumpLabels)
		}
	}

	// Labels: the target labels exactly one goroutine.
	var labelled []*inspect.Goroutine
	for _, g := range snap.Goroutines {
		if len(g.Labels) > 0 {
			labelled = append(labelled, g)
		}
	}
	if len(labelled) != 1 || labelled[0].Labels["worker"] != "w1" || labelled[0].Labels["shard"] != "3" || len(labelled[0].Labels) != 2 {
		for _, g := range labelled {
			t.Logf("goroutine %d labels %v", g.ID, g.Labels)
		}
		t.Errorf("want exactly one goroutine labelled worker=w1,shard=3; got %d labelled goroutines", len(labelled))
	}
	if len(snap.Warnings) > 0 {
		t.Errorf("warnings: %v", snap.Warnings)
	}

	// Waits: the target ran two collections after its goroutines blocked,
	// so the runtime recorded g.waitsince for the parked ones (seconds ago).
	parked, known := 0, 0
	for _, g := range snap.Goroutines {
		if loc, ok := g.Location(); ok && loc.Function == "main.parked" {
			parked++
			if g.WaitKnown && g.Wait > 0 && g.Wait < time.Minute {
				known++
			}
		}
	}
	if parked == 0 || known < parked*9/10 {
		t.Errorf("%d of %d parked goroutines have a plausible wait (0 < wait < 1m)", known, parked)
	}
}

// parsedDump renders snap's non-system goroutines the way gi ps --stacks
// does and parses them with the runtime dump's grammar.
func parsedDump(t *testing.T, snap *inspect.Snapshot) []targets.Goroutine {
	t.Helper()
	var visible []*inspect.Goroutine
	for _, g := range snap.Goroutines {
		if !g.System {
			visible = append(visible, g)
		}
	}
	var buf bytes.Buffer
	if err := inspect.WriteDump(&buf, snap, visible, false); err != nil {
		t.Fatal(err)
	}
	got, err := targets.ParseDump(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("gi's dump does not parse with the runtime dump grammar: %v\n%s", err, head(buf.String(), 40))
	}
	return got
}

// TestSnapshotInContainer inspects a target in its own PID, mount and time
// namespaces (chrooted, pid 1 in its namespace, its monotonic clock a day
// ahead of the host's) from the host, against the target's own dump.
func TestSnapshotInContainer(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range []string{"local", "go1.27.4"} {
		t.Run(tc, func(t *testing.T) {
			bin := targets.Build(t, "psstates", targets.BuildOptions{Toolchain: tc})
			p := targets.StartInContainer(t, bin, targets.ContainerOptions{MonotonicOffset: 24 * time.Hour}, "-park", "2000", "-depth", "300")
			if ns, err := targets.NSPid(p.Pid); err != nil || ns != 1 {
				t.Fatalf("target is pid %d in its namespace (%v), want 1", ns, err)
			}
			snap := compareSnapshot(t, p)
			if snap.NSPid != 1 {
				t.Errorf("snapshot says namespace pid %d, want 1", snap.NSPid)
			}
			checkRunningInNamespace(t, p.Pid, snap)
			// The copy of a namespace's init is reaped by its pid there.
			checkRunningInNamespace(t, p.Pid, compareFrozen(t, p))
		})
	}
}

// checkRunningInNamespace checks the running goroutines of a psstates
// target in its own PID namespace: m.procid is the thread id inside the
// namespace, so gi must map it to a host thread to find the registers, and
// shows both ids.
func checkRunningInNamespace(t *testing.T, pid int, snap *inspect.Snapshot) {
	t.Helper()
	located := 0
	for _, g := range snap.Goroutines {
		if g.Status != "running" || g.System {
			continue
		}
		if g.HostThreadID == 0 || g.ThreadID == 0 || g.HostThreadID == g.ThreadID {
			t.Errorf("running goroutine %d: thread %d, host thread %d: want both, different", g.ID, g.ThreadID, g.HostThreadID)
		} else if ns, err := targets.NSTid(pid, g.HostThreadID); err != nil || ns != g.ThreadID {
			t.Errorf("running goroutine %d: host thread %d is thread %d in the namespace (%v), gi says %d", g.ID, g.HostThreadID, ns, err, g.ThreadID)
		}
		if loc, ok := g.Location(); ok && loc.Function == "main.spin" {
			located++
		}
	}
	// Two Ps, three spinners: at least one spins on a CPU at any instant.
	if located == 0 {
		t.Errorf("no running goroutine located in main.spin (a running goroutine's registers come from its thread)")
	}
}

func oneOf(s string, set ...string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// TestMatrixPs runs the ground-truth comparison on every cell of the
// compatibility matrix (GI_TEST_MATRIX=1, `make test-matrix`) and prints
// the grid.
func TestMatrixPs(t *testing.T) {
	if !targets.MatrixEnabled() {
		t.Skip("the compatibility matrix runs with GI_TEST_MATRIX=1 (make test-matrix)")
	}
	requirePrivilege(t)
	targets.PrebuildMatrix(t, "psstates")
	var grid targets.Grid
	t.Cleanup(func() { grid.Print(os.Stdout, "gi ps against the runtime's own dump (Go release × build)") })
	for _, c := range targets.MatrixCells() {
		c := c
		t.Run(c.Opts.String(), func(t *testing.T) {
			grid.Set(c, "FAIL")
			compareWithDump(t, targets.Build(t, "psstates", c.Opts), "-park", "2000", "-depth", "300")
			if !t.Failed() {
				grid.Set(c, "ok")
			}
		})
	}
}
