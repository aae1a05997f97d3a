package leak_test

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/leak"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// checkFound compares the walk's verdict with the target's own account:
// never a goroutine reported that the target kept (nor any other, the
// main goroutine's select {} included), every one that blocks forever
// by definition reported, and at least found of the leaked ones (all,
// where the walk scans everything precisely; fewer where some of it is
// scanned conservatively, which may hide a leak, never invent one).
func checkFound(t *testing.T, gt targets.LeakyTruth, res *leak.Result, found int) {
	t.Helper()
	if res.Undecided != "" {
		t.Fatalf("undecided: %s", res.Undecided)
	}
	missed := 0
	for id, class := range gt.Leaked {
		if _, ok := res.Leaked[id]; !ok {
			missed++
			if found == len(gt.Leaked) || class == "nilchan" || class == "selectnone" {
				t.Errorf("goroutine %d (%s, leaked) not reported", id, class)
			}
		}
	}
	if len(gt.Leaked)-missed < found {
		t.Errorf("%d of the %d leaked goroutines reported, want at least %d", len(gt.Leaked)-missed, len(gt.Leaked), found)
	}
	for id, why := range res.Leaked {
		if _, ok := gt.Leaked[id]; !ok {
			t.Errorf("goroutine %d (%s) reported leaked: %s", id, gt.Kept[id], why)
		}
	}
}

var tracer = ptrace.NewTracer()

// openTarget opens process pid until the test ends.
func openTarget(t *testing.T, pid int) *inspect.Target {
	t.Helper()
	tg, err := inspect.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg
}

// takeQuiet takes snapshots of tg until one finds it quiet — no thread
// at work (Image.Busy), no goroutine running — and returns
// it: a thread at work has its registers and system stack scanned whole,
// and their stale words may hide a leak (never invent one), which an
// exact verdict cannot allow. A target that parked everything is quiet
// within a few stops (the runtime finishing a collection's work).
func takeQuiet(t *testing.T, tg *inspect.Target) (*inspect.Snapshot, *leak.Image) {
	t.Helper()
	var last []string
	for i := 0; i < 200; i++ {
		snap, im := take(t, tg)
		last = last[:0]
		for _, th := range im.Threads {
			if im.Busy[th.TID] {
				fn := "?"
				if f := tg.Binary.Lines.FuncForPC(th.Regs.PC - tg.Bias); f != nil {
					fn = f.Name
				}
				last = append(last, fmt.Sprintf("thread %d at work in %s (system call %d)", th.TID, fn, th.Regs.Syscall))
			}
		}
		for _, g := range snap.Goroutines {
			if g.Status == "running" {
				last = append(last, fmt.Sprintf("goroutine %d running", g.ID))
			}
		}
		if len(last) == 0 {
			return snap, im
		}
		snap.ReleaseStacks()
		im.Release()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("200 stops never found the target quiet; the last: %s", strings.Join(last, "; "))
	return nil, nil
}

// take takes a snapshot of tg with the image the walk reads, released
// when the test ends.
func take(t *testing.T, tg *inspect.Target) (*inspect.Snapshot, *leak.Image) {
	t.Helper()
	return takeWith(t, tg, leak.Options{})
}

// takeWith is take with the capture's options.
func takeWith(t *testing.T, tg *inspect.Target, opts leak.Options) (*inspect.Snapshot, *leak.Image) {
	t.Helper()
	snap, im, err := leak.Take(tg, func() (*inspect.Snapshot, error) { return tg.Snapshot(tracer) }, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(im.Release)
	// A live target is read from a copy it made of itself in the stop,
	// where gi may have it make one.
	if !im.Frozen && !opts.NoFreeze && ptrace.FreezeBlocked(tg.PID) == nil {
		t.Fatalf("the capture was not read from a frozen copy: %s", im.InStop)
	}
	if kids := targets.Children(tg.PID); len(kids) != 0 {
		t.Fatalf("the target has children after the capture: %v", kids)
	}
	return snap, im
}

// TestLeaksMatchTarget parks goroutines of every kind the runtime's
// detector judges (channel receive, send and select, Mutex, RWMutex,
// WaitGroup, Cond, nil channel, select {}, a chain of two), half of them
// on objects only they hold and half on objects a global or a sleeping
// goroutine keeps, and checks that gi ps --leaks reports exactly the
// leaked ones — every one, and no other — on every release under test,
// default, PIE and stripped builds, heap objects scanned by the runtime's
// pointer maps; on Go 1.27 also that the runtime's own goroutineleak
// profile, requested after gi, reports the same set. From Go 1.24 one
// leaked goroutine waits on a channel only an object with a cleanup
// holds: the collector does not scan a cleanup's object. The target is
// quiet: no thread at work whose registers and system stack the walk
// would scan whole, whose stale words could hide a leak.
func TestLeaksMatchTarget(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	for _, tc := range targets.Toolchains() {
		for _, opts := range []targets.BuildOptions{{Toolchain: tc}, {Toolchain: tc, PIE: true}, {Toolchain: tc, Stripped: true}} {
			t.Run(opts.String(), func(t *testing.T) {
				p := targets.Start(t, targets.Build(t, "leaky", opts), "-n", "4", "-cleanup")
				gt := targets.ReadLeakyTruth(t, p)
				tg := openTarget(t, p.Pid)
				snap, im := takeQuiet(t, tg)
				res := leak.Find(tg, snap, im, leak.Options{})
				t.Logf("%d candidates, %d leaked, %d objects marked, %d bytes scanned in %d rounds; capture %v in a pause of %v, walk %v",
					res.Candidates, len(res.Leaked), res.Marked, res.Scanned, res.Rounds, im.Took, snap.Pause, res.Took)
				t.Logf("mode: %s", res.Mode)
				if !strings.Contains(res.Mode, "heap precise") {
					t.Errorf("heap objects not scanned by their pointer maps: %s", res.Mode)
				}
				switch sdErr := proc.SoftDirty(); {
				case sdErr == nil && im.InStop != "":
					t.Errorf("the kernel tracks written pages, yet the heap was copied in the stop: %s", im.InStop)
				case sdErr == nil:
					t.Logf("heap copied before the stop in %v; %d of %d pages read again in the stop", im.PreCopy, im.Rewritten, im.Synced)
				default:
					t.Logf("heap copied in the stop: %s", im.InStop)
				}
				checkFound(t, gt, res, len(gt.Leaked))
				for _, g := range snap.Goroutines {
					if _, reported := res.Leaked[g.ID]; g.Leaked != reported {
						t.Errorf("goroutine %d: Leaked %v in the snapshot", g.ID, g.Leaked)
					}
				}
				if !strings.HasPrefix(tc, "go1.27") {
					return
				}
				answer, err := p.Do("leakprofile", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				var runtimeSet []uint64
				for _, s := range strings.Split(answer["leaked"], ",") {
					if id, err := strconv.ParseUint(s, 10, 64); err == nil {
						runtimeSet = append(runtimeSet, id)
					}
				}
				var ours []uint64
				for id := range res.Leaked {
					ours = append(ours, id)
				}
				sort.Slice(runtimeSet, func(i, j int) bool { return runtimeSet[i] < runtimeSet[j] })
				sort.Slice(ours, func(i, j int) bool { return ours[i] < ours[j] })
				inRuntime := map[uint64]bool{}
				for _, id := range runtimeSet {
					inRuntime[id] = true
				}
				for _, id := range ours {
					if !inRuntime[id] {
						t.Errorf("gi reports goroutine %d leaked, the runtime's goroutineleak profile does not (%v)", id, runtimeSet)
					}
				}
				if fmt.Sprint(ours) != fmt.Sprint(runtimeSet) {
					t.Errorf("the runtime's goroutineleak profile reports %v, gi %v", runtimeSet, ours)
				}
				// The runtime marked them: gi shows its marks.
				snap2, im2 := takeQuiet(t, tg)
				res2 := leak.Find(tg, snap2, im2, leak.Options{})
				marked := 0
				for _, g := range snap2.Goroutines {
					if g.Status == "leaked" {
						marked++
						if res2.Leaked[g.ID] != "marked leaked by the runtime" {
							t.Errorf("goroutine %d, marked leaked by the runtime: %q", g.ID, res2.Leaked[g.ID])
						}
					}
				}
				if marked != len(runtimeSet) {
					t.Errorf("%d goroutines in status leaked after the runtime's profile, which reported %d", marked, len(runtimeSet))
				}
				checkFound(t, gt, res2, len(gt.Leaked))
			})
		}
	}
}

// TestLeaksBounded: a walk that hits its bound of objects says so and
// reports only the goroutines blocked forever by definition (a nil
// channel, select {}), never a guess.
func TestLeaksBounded(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "3")
	gt := targets.ReadLeakyTruth(t, p)
	tg := openTarget(t, p.Pid)
	snap, im := take(t, tg)
	res := leak.Find(tg, snap, im, leak.Options{Objects: 5})
	if !strings.Contains(res.Undecided, "more than the bound of 5 reachable objects") {
		t.Errorf("undecided %q, want the bound named", res.Undecided)
	}
	forever := 0
	for id, class := range gt.Leaked {
		if class == "nilchan" || class == "selectnone" {
			forever++
			if _, ok := res.Leaked[id]; !ok {
				t.Errorf("goroutine %d (%s) blocks forever by definition, not reported", id, class)
			}
		}
	}
	if len(res.Leaked) != forever || forever != 6 {
		t.Errorf("%d reported leaked, %d block forever by definition (want 6)", len(res.Leaked), forever)
	}
}

// TestGoModules: of the files a process maps, those holding Go code
// other than its executable (a plugin's, a -linkshared library's) are
// named; C libraries and the executable itself are not.
func TestGoModules(t *testing.T) {
	leaky := targets.Build(t, "leaky", targets.BuildOptions{})
	other := targets.Build(t, "heapobjs", targets.BuildOptions{})
	exe, err := elfbin.Open(leaky)
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	libc := ""
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/bin/sh"} {
		if _, err := os.Stat(p); err == nil {
			libc = p
			break
		}
	}
	got := leak.GoModules("/", []string{leaky, libc, other, "[vdso]", other, "/no/such/file.so"}, exe)
	if len(got) != 1 || got[0] != other {
		t.Errorf("GoModules = %q, want only %s", got, other)
	}
}

// TestLeaksRunningOnSystemStack stops testdata/leaky 200 times while a
// goroutine of it spins reading the clock, most of its time in a vDSO
// call on its thread's system stack: every stop that finds it running
// unwinds it from where it left its own stack (m.vdsoSP, as the
// runtime's traceback does; never a stack copied and scanned whole), to
// main.readClock, and the verdict is decided and right (checkFound).
func TestLeaksRunningOnSystemStack(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2", "-clock")
	gt := targets.ReadLeakyTruth(t, p)
	tg := openTarget(t, p.Pid)
	running := 0
	for i := 0; i < 200 && !t.Failed(); i++ {
		// Not frozen: with a thread spinning on the clock, some stops find
		// no thread parked in runtime.futex to make the copy (gi then
		// copies in the stop); the copy is not what this test is about.
		snap, im := takeWith(t, tg, leak.Options{NoFreeze: true})
		for _, g := range snap.Goroutines {
			if g.StartFunction != "main.readClock" || g.Status != "running" {
				continue
			}
			running++
			if g.Stack == nil || g.Stack.Whole || !slices.ContainsFunc(g.Frames, func(f inspect.Frame) bool { return f.Function == "main.readClock" }) {
				t.Errorf("stop %d: the clock-reading goroutine, running, not unwound to main.readClock (whole stack %v): %+v", i+1, g.Stack != nil && g.Stack.Whole, g.Frames)
			}
		}
		res := leak.Find(tg, snap, im, leak.Options{})
		checkFound(t, gt, res, len(gt.Leaked)*3/4)
		snap.ReleaseStacks()
		im.Release()
	}
	t.Logf("%d of 200 stops found the clock-reading goroutine running", running)
	if running < 20 {
		t.Errorf("only %d of 200 stops found the clock-reading goroutine running", running)
	}
}

// TestLeaksQueuedFinalizer: a goroutine waits on a channel that only a
// queued finalizer holds (the runtime's finalizer goroutine busy with
// another object's, the one that would close the channel waits in the
// queue, off the heap): it is not leaked, on every release under test,
// default and stripped builds (where the queue is found in the code).
// The walk is decided, and reports exactly the goroutines the target
// leaked. (On Go 1.22 a leaked goroutine's RWMutex is the heap's first
// object here: the bytes read around its semaphore began below the
// heap's mapping, and the goroutine went unjudged, until such a window
// was read again within the semaphore's page.)
func TestLeaksQueuedFinalizer(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	for _, tc := range targets.Toolchains() {
		for _, opts := range []targets.BuildOptions{{Toolchain: tc}, {Toolchain: tc, Stripped: true}} {
			t.Run(opts.String(), func(t *testing.T) {
				p := targets.Start(t, targets.Build(t, "leaky", opts), "-n", "1", "-finq")
				gt := targets.ReadLeakyTruth(t, p)
				tg := openTarget(t, p.Pid)
				snap, im := takeQuiet(t, tg)
				res := leak.Find(tg, snap, im, leak.Options{})
				if res.Undecided != "" {
					t.Fatalf("undecided: %s", res.Undecided)
				}
				if len(im.Queued) == 0 {
					t.Error("no block of queued finalizers read")
				}
				found := false
				for id, class := range gt.Kept {
					if class == "finq" {
						found = true
						if why, ok := res.Leaked[id]; ok {
							t.Errorf("goroutine %d, whose channel a queued finalizer holds, reported leaked: %s", id, why)
						}
					}
				}
				if !found {
					t.Fatal("the target parked no goroutine on a finalizer's channel")
				}
				for id, why := range res.Leaked {
					if _, ok := gt.Leaked[id]; !ok {
						t.Errorf("goroutine %d (%s) reported leaked: %s", id, gt.Kept[id], why)
					}
				}
				for id, class := range gt.Leaked {
					if _, ok := res.Leaked[id]; !ok {
						t.Errorf("goroutine %d (%s), leaked, not reported", id, class)
					}
				}
			})
		}
	}
}

// TestLeaksMovingChannel: a goroutine waits on a channel another keeps
// moving between two heap objects far apart, every few microseconds.
// Where the kernel tracks written pages the heap is copied while the
// target runs and made exact in the stop; a copy that were not could
// miss the channel in both objects and report the waiter leaked. Over
// ten stops it never is, nor any goroutine the target kept.
func TestLeaksMovingChannel(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "1", "-mover")
	gt := targets.ReadLeakyTruth(t, p)
	moved := false
	for _, class := range gt.Kept {
		moved = moved || class == "moved"
	}
	if !moved {
		t.Fatal("the target parked no goroutine on the moving channel")
	}
	tg := openTarget(t, p.Pid)
	// From a frozen copy, and as a process that cannot be frozen is
	// read: before the stop where the kernel tracks written pages, else
	// in it.
	for _, opts := range []leak.Options{{}, {NoFreeze: true}} {
		for i := 0; i < 10; i++ {
			snap, im := takeWith(t, tg, opts)
			if opts.NoFreeze && im.Frozen {
				t.Fatal("NoFreeze: read from a frozen copy all the same")
			}
			res := leak.Find(tg, snap, im, leak.Options{})
			if res.Undecided != "" {
				t.Fatalf("%+v, stop %d: undecided: %s", opts, i+1, res.Undecided)
			}
			for id, why := range res.Leaked {
				if _, ok := gt.Leaked[id]; !ok {
					t.Errorf("%+v, stop %d: goroutine %d (%s) reported leaked: %s", opts, i+1, id, gt.Kept[id], why)
				}
			}
			snap.ReleaseStacks()
			im.Release()
		}
	}
}

// TestLeaksStaleWords: testdata/leaky -stale keeps the address of every
// object its leaked goroutines wait on as an integer, in a heap object
// the collector scans (it holds a pointer too). Scanned by the runtime's
// pointer maps, the integers keep nothing: every leaked goroutine is
// reported, and no other, on every release under test, default and
// stripped builds. Scanned conservatively (the image without its
// pointer maps), they hide the leaks they name: the test's target does
// keep what it claims to.
func TestLeaksStaleWords(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	for _, tc := range targets.Toolchains() {
		for _, opts := range []targets.BuildOptions{{Toolchain: tc}, {Toolchain: tc, Stripped: true}} {
			t.Run(opts.String(), func(t *testing.T) {
				p := targets.Start(t, targets.Build(t, "leaky", opts), "-n", "2", "-stale")
				gt := targets.ReadLeakyTruth(t, p)
				tg := openTarget(t, p.Pid)
				snap, im := takeQuiet(t, tg)
				res := leak.Find(tg, snap, im, leak.Options{})
				t.Logf("mode: %s", res.Mode)
				checkFound(t, gt, res, len(gt.Leaked))
				im.Pointers = nil
				conservative := leak.Find(tg, snap, im, leak.Options{})
				if !strings.Contains(conservative.Mode, "heap conservative") {
					t.Errorf("without pointer maps, mode %s", conservative.Mode)
				}
				forever := 0
				for _, class := range gt.Leaked {
					if class == "nilchan" || class == "selectnone" {
						forever++
					}
				}
				if len(conservative.Leaked) != forever {
					t.Errorf("scanned conservatively, %d goroutines reported leaked; want only the %d blocked forever by definition (the stale words keep the others' objects)", len(conservative.Leaked), forever)
				}
			})
		}
	}
}
