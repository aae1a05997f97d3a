package inspect_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	dlvproc "github.com/go-delve/delve/pkg/proc"
	dlvcore "github.com/go-delve/delve/pkg/proc/core"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
)

// TestSnapshotCoreReadsBack writes a core of a live target from a
// snapshot's stop (SnapshotCore: the pages the listing read, and with
// All every mapping) and reads it back: the listing gi decodes from the
// core equals the live listing of the same stop, goroutine by goroutine
// (ids, states, waits to the nanosecond, threads, frames, creators,
// labels, what each waits on, descriptors included); the core holds the
// threads with their registers; gdb lists those threads and reads a
// runtime global from it, and Delve lists the same goroutines. Default,
// PIE and stripped builds of every release under test, and in the kernel
// grid's guests (arm64 included; no gdb there).
func TestSnapshotCoreReadsBack(t *testing.T) {
	requirePrivilege(t)
	// The kernel grid's guests have no gdb: what gdb reads is checked on
	// the host.
	withGDB := os.Getenv("GI_WITHOUT_GDB") != "1"
	if withGDB {
		targets.RequireTool(t, "gdb")
	}
	var builds []targets.BuildOptions
	for _, tc := range targets.Toolchains() {
		builds = append(builds, targets.BuildOptions{Toolchain: tc}, targets.BuildOptions{Toolchain: tc, PIE: true}, targets.BuildOptions{Toolchain: tc, Stripped: true})
	}
	for _, opts := range builds {
		for _, all := range []bool{false, true} {
			name := opts.String() + "/listing"
			if all {
				name = opts.String() + "/all"
			}
			t.Run(name, func(t *testing.T) {
				bin := targets.Build(t, "psstates", opts)
				p := targets.Start(t, bin, "-park", "300", "-depth", "50")
				tgt, err := inspect.Open(p.Pid)
				if err != nil {
					t.Fatal(err)
				}
				defer tgt.Close()
				path := filepath.Join(t.TempDir(), "core")
				live, w, err := tgt.SnapshotCore(sharedTracer(), path, inspect.CoreOptions{All: all})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("core: %d bytes of memory in %d segments, %d read after the stop; pause %v, written in %v", w.Memory, w.Segments, w.AfterStop, live.Pause, w.Write)
				if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("core file %v, %v: want mode 0600", st, err)
				}
				if state, _ := proc.StatusField(p.Pid, 0, "State"); strings.HasPrefix(state, "t") || strings.HasPrefix(state, "T") {
					t.Errorf("the target is left %s", state)
				}
				c, err := core.Open(path, "")
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if c.Process.PID != p.Pid || len(c.Threads) < 2 {
					t.Errorf("core of pid %d with %d threads, want pid %d and its threads", c.Process.PID, len(c.Threads), p.Pid)
				}
				back, err := inspect.New(c.Process)
				if err != nil {
					t.Fatal(err)
				}
				now, ok := c.Now()
				if !ok {
					t.Fatal("the core gi wrote does not say when it was taken")
				}
				snap, err := back.Decode(c.Threads, now)
				if err != nil {
					t.Fatal(err)
				}
				compareListings(t, live, snap)
				if !all {
					if w.Memory > 64<<20 {
						t.Errorf("the listing's core holds %d MB of memory", w.Memory>>20)
					}
				} else if w.AfterStop != 0 {
					t.Errorf("a whole core read %d bytes after the stop", w.AfterStop)
				}
				if withGDB {
					checkGDB(t, bin, path, c, len(live.Goroutines))
				}
				checkDelve(t, bin, path, live)
			})
		}
	}
}

// compareListings requires two snapshots' goroutines to be the same.
func compareListings(t *testing.T, want, got *inspect.Snapshot) {
	t.Helper()
	if len(got.Goroutines) != len(want.Goroutines) || len(want.Goroutines) < 300 {
		t.Fatalf("%d goroutines read back, %d live (want at least 300)", len(got.Goroutines), len(want.Goroutines))
	}
	byID := map[uint64]*inspect.Goroutine{}
	for _, g := range got.Goroutines {
		byID[g.ID] = g
	}
	waits := 0
	for _, w := range want.Goroutines {
		g := byID[w.ID]
		if g == nil {
			t.Errorf("goroutine %d: not in the core", w.ID)
			continue
		}
		if a, b := describeGoroutine(w), describeGoroutine(g); a != b {
			t.Errorf("goroutine %d:\nlive: %s\ncore: %s", w.ID, a, b)
		}
		for _, o := range w.WaitingOn {
			if o.FD != nil && o.FD.Kind != "" {
				waits++
			}
		}
	}
	if waits < 2 {
		t.Errorf("%d goroutines wait on a described descriptor, want the target's socket and pipe", waits)
	}
}

// describeGoroutine renders everything gi shows of a goroutine.
func describeGoroutine(g *inspect.Goroutine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %q wait=%v/%v thread=%d locked=%v system=%v start=%s parent=%d trunc=%v %q",
		g.ID, g.Status, g.WaitReason, g.Wait, g.WaitKnown, g.ThreadID, g.LockedToThread, g.System, g.StartFunction, g.ParentID, g.Truncated, g.Problem)
	if g.CreatedBy != nil {
		fmt.Fprintf(&b, " created by %s %s:%d", g.CreatedBy.Function, g.CreatedBy.File, g.CreatedBy.Line)
	}
	var labels []string
	for k, v := range g.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	fmt.Fprintf(&b, " labels=%v", labels)
	for _, o := range g.WaitingOn {
		fmt.Fprintf(&b, " on[%s]", o.String())
	}
	for _, f := range g.Frames {
		fmt.Fprintf(&b, " | %s %s:%d %#x", f.Function, f.File, f.Line, f.PC)
	}
	return b.String()
}

// gdbGuessesIntelXSave tells whether gdb is older than 14 and the
// processor AMD's: gdb 13 reads an XSAVE area by Intel's offsets.
func gdbGuessesIntelXSave() bool {
	cpu, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(cpu), "AuthenticAMD") {
		return false
	}
	out, err := exec.Command("gdb", "--version").Output()
	if err != nil {
		return false
	}
	m := regexp.MustCompile(`GNU gdb .*?(\d+)\.\d+`).FindSubmatch(out)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(string(m[1]))
	return major < 14
}

// checkGDB has gdb open the core: it must list the core's threads, by
// the ids the core gives them, and read the runtime's count of goroutines.
func checkGDB(t *testing.T, exe, path string, c *core.Core, goroutines int) {
	t.Helper()
	args := []string{"-batch", "-nx", "-ex", "info threads"}
	stripped := strings.Contains(exe, "stripped")
	if !stripped {
		args = append(args, "-ex", "p 'runtime.allglen'")
	}
	out, err := exec.Command("gdb", append(args, exe, path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	text := string(out)
	var lwps []int
	for _, m := range regexp.MustCompile(`(?m)^[* ]\s*\d+\s+LWP (\d+)`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		lwps = append(lwps, n)
	}
	var tids []int
	for _, th := range c.Threads {
		tids = append(tids, th.TID)
	}
	sort.Ints(lwps)
	sort.Ints(tids)
	if fmt.Sprint(lwps) != fmt.Sprint(tids) {
		t.Errorf("gdb lists threads %v, the core holds %v:\n%s", lwps, tids, text)
	}
	// (gdb warns that the core "may not match" its executable when the
	// executable's name is longer than the 15 bytes of the process's name
	// the core holds, as for the kernel's own cores: not a complaint.)
	// gdb before 14 takes every XSAVE area for Intel's layout, and finds
	// the one an AMD processor with AVX-512 saves (the kernel's size, as
	// in its own cores) too small for it: its limit, not the core's.
	if gdbGuessesIntelXSave() {
		text = regexp.MustCompile("(?m)^.*Section `.reg-xstate/\\d+' in core file too small.*$").ReplaceAllString(text, "")
	}
	for _, complaint := range []string{"too small", "Couldn't find general-purpose registers", "Cannot access memory"} {
		if strings.Contains(text, complaint) {
			t.Errorf("gdb complains (%q):\n%s", complaint, text)
		}
	}
	if stripped {
		return // no symbol for gdb to print
	}
	if m := regexp.MustCompile(`\$1 = (\d+)`).FindStringSubmatch(text); m == nil {
		t.Errorf("gdb prints no runtime.allglen:\n%s", text)
	} else if n, _ := strconv.Atoi(m[1]); n < goroutines {
		t.Errorf("gdb reads runtime.allglen %d from the core, gi lists %d goroutines", n, goroutines)
	}
}

// checkDelve has Delve open the core (a binary with DWARF): it must list
// the goroutines gi listed live, each where gi says it was created.
func checkDelve(t *testing.T, exe, path string, live *inspect.Snapshot) {
	t.Helper()
	if strings.Contains(exe, "stripped") {
		return // Delve needs DWARF
	}
	tg, err := dlvcore.OpenCore(path, exe, nil)
	if err != nil {
		t.Fatalf("Delve opens the core: %v", err)
	}
	defer tg.Detach(false)
	gs, _, err := dlvproc.GoroutinesInfo(tg.Selected, 0, 0)
	if err != nil {
		t.Fatalf("Delve lists goroutines: %v", err)
	}
	theirs := map[uint64]*dlvproc.G{}
	for _, g := range gs {
		theirs[uint64(g.ID)] = g
	}
	missing := 0
	for _, g := range live.Goroutines {
		d := theirs[g.ID]
		if d == nil {
			missing++
			continue
		}
		if g.CreatedBy != nil {
			if loc := d.Go(); loc.Fn == nil || loc.Fn.Name != g.CreatedBy.Function {
				t.Errorf("goroutine %d: Delve says created at %v, gi %s", g.ID, loc, g.CreatedBy.Function)
			}
		}
	}
	if missing > 0 || len(gs) < len(live.Goroutines) {
		t.Errorf("Delve lists %d goroutines, %d of gi's %d missing", len(gs), missing, len(live.Goroutines))
	}
}
