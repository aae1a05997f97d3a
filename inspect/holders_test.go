package inspect_test

import (
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// TestLockHolders: the holders target takes locks with mu.Lock(); defer
// mu.Unlock() (a global mutex, a field through a pointer receiver, a
// global RWMutex for writing) and blocks holding them while others wait;
// it says which goroutine holds which lock and the line of its defer.
// Every waiter's object names exactly that holder, and the locks whose
// holder cannot be seen (taken without defer; a defer registered before
// the Lock its goroutine waits in) name none. On the releases whose
// open-coded defer info differ (enumerated before Go 1.22, the wrapper
// named funcN), PIE and stripped builds, and from a core of the default
// build.
func TestLockHolders(t *testing.T) {
	requirePrivilege(t)
	builds := []targets.BuildOptions{{}, {PIE: true}, {Stripped: true}, {Toolchain: "go1.20.14"}, {Toolchain: "go1.21.13"}, {Toolchain: "go1.22.12"}, {Toolchain: "go1.27.4"}}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "holders", opts), "-n", "2")
			type hold struct {
				goid uint64
				fn   string
				line int
			}
			holds := map[string]hold{}
			reads := map[string][]hold{}
			waits := map[uint64]string{}
			plain := map[string]uint64{} // lock -> the goroutine that took it without defer
			for _, line := range p.Lines() {
				f := strings.Fields(line)
				switch {
				case len(f) == 4 && f[0] == "PLAIN":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					plain[f[2]] = id
				case len(f) == 5 && f[0] == "HOLD":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					n, _ := strconv.Atoi(f[4])
					holds[f[2]] = hold{id, f[3], n}
				case len(f) == 5 && f[0] == "READ":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					n, _ := strconv.Atoi(f[4])
					reads[f[2]] = append(reads[f[2]], hold{id, f[3], n})
				case len(f) == 3 && f[0] == "WAIT":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					waits[id] = f[2]
				}
			}
			if len(holds) != 4 || len(reads["main.shared"]) != 2 || len(waits) != 12 {
				t.Fatalf("the target reported %d holds, %d read holds and %d waits: %q", len(holds), len(reads["main.shared"]), len(waits), p.Lines())
			}
			snap := snapshotOf(t, p.Cmd.Process.Pid)
			if opts == (targets.BuildOptions{}) {
				// And from a core of the process: the same holders.
				snap = snapshotFromCore(t, p.Cmd.Process.Pid)
			}
			checked := 0
			for _, g := range snap.Goroutines {
				lock, ok := waits[g.ID]
				if !ok {
					continue
				}
				var obj *inspect.WaitObject
				for i := range g.WaitingOn {
					if k := g.WaitingOn[i].Kind; k == "mutex" || k == "rwmutex" {
						obj = &g.WaitingOn[i]
					}
				}
				if obj == nil || obj.Sync == nil {
					t.Errorf("goroutine %d waits on %s: gi found %v", g.ID, lock, g.WaitingOn)
					continue
				}
				checked++
				want, held := holds[lock]
				got := obj.Sync.Holders
				if rs := reads[lock]; len(rs) > 0 {
					// Readers hold it; a writer waits for them.
					ok := len(got) == len(rs)
					for _, r := range rs {
						found := false
						for _, h := range got {
							found = found || h.Goid == r.goid && h.Read && h.Function == r.fn && h.Line == r.line
						}
						ok = ok && found
					}
					if s := obj.String(); !ok || !strings.Contains(s, "writer pending, 2 readers (goroutine ") {
						t.Errorf("goroutine %d waits to write-lock %s, read-held by %+v: gi names %+v (%s)", g.ID, lock, rs, got, s)
					}
					continue
				}
				if !held {
					if len(got) != 0 || !strings.Contains(obj.String(), "locked, holder unknown") {
						t.Errorf("goroutine %d waits on %s, whose holder cannot be seen: gi names %v (%s)", g.ID, lock, got, obj)
					}
					// Taken without defer and released later in the
					// same function: a suspect, on amd64; taken and never
					// released there (main.lateMu's holder): none.
					sus := obj.Sync.Suspects
					if id, ok := plain[lock]; ok && runtime.GOARCH == "amd64" {
						if len(sus) != 1 || sus[0].Goid != id || sus[0].Function != "main.holdPlain" || !strings.HasSuffix(sus[0].File, "holders/main.go") || sus[0].Line == 0 ||
							!strings.Contains(obj.String(), "suspected goroutine "+strconv.FormatUint(id, 10)+" at main.holdPlain holders/main.go:") {
							t.Errorf("goroutine %d waits on %s, taken without defer by goroutine %d: suspects %+v (%s)", g.ID, lock, id, sus, obj)
						}
					} else if len(sus) != 0 {
						t.Errorf("goroutine %d waits on %s: suspects %+v, where no goroutine's code says it holds it", g.ID, lock, sus)
					}
					continue
				}
				if len(got) != 1 || got[0].Goid != want.goid || got[0].Function != want.fn || got[0].Line != want.line || got[0].Read ||
					!strings.HasSuffix(got[0].File, "holders/main.go") {
					t.Errorf("goroutine %d waits on %s, held by goroutine %d at %s line %d: gi names %+v", g.ID, lock, want.goid, want.fn, want.line, got)
				}
				if s := obj.String(); !strings.Contains(s, "locked by goroutine "+strconv.FormatUint(want.goid, 10)+" at "+want.fn+" holders/main.go:"+strconv.Itoa(want.line)) {
					t.Errorf("goroutine %d waits on %q", g.ID, s)
				}
			}
			if checked != len(waits) {
				t.Errorf("checked %d of the %d waiters", checked, len(waits))
			}
			if len(snap.Deadlocks) != 0 {
				t.Errorf("deadlocks in a program without one: %+v", snap.Deadlocks)
			}
		})
	}
}

// TestDeadlocks: with -deadlock the holders target also deadlocks two
// goroutines on two mutexes taken in opposite orders, three in a ring,
// and one on a mutex it holds itself, and says which. gi reports exactly
// those cycles, each member waiting for the lock the next holds, and
// marks exactly their members.
func TestDeadlocks(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {Toolchain: "go1.21.13"}, {Toolchain: "go1.27.4"}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "holders", opts), "-n", "1", "-deadlock")
			waitsFor := map[uint64]string{} // goroutine -> the lock it waits for
			holdsLock := map[uint64]string{}
			cycles := map[string][]uint64{} // "ab", "ring", "self" -> goroutines
			for _, line := range p.Lines() {
				f := strings.Fields(line)
				switch {
				case len(f) == 4 && f[0] == "CYCLE":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					name := "ab"
					if strings.HasPrefix(f[2], "main.ring") {
						name = "ring"
					}
					cycles[name] = append(cycles[name], id)
					waitsFor[id], holdsLock[id] = "mutex "+f[3], "mutex "+f[2]
				case len(f) == 3 && f[0] == "SELF":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					cycles["self"] = append(cycles["self"], id)
					waitsFor[id], holdsLock[id] = "mutex "+f[2], "mutex "+f[2]
				}
			}
			if len(cycles["ab"]) != 2 || len(cycles["ring"]) != 3 || len(cycles["self"]) != 1 {
				t.Fatalf("the target reported the cycles %v: %q", cycles, p.Lines())
			}
			snap := snapshotOf(t, p.Cmd.Process.Pid)
			if len(snap.Deadlocks) != 3 {
				t.Fatalf("deadlocks %+v, want %v", snap.Deadlocks, cycles)
			}
			found := map[uint64]bool{}
			for _, d := range snap.Deadlocks {
				var got []uint64
				for k, m := range d.Members {
					if m.WaitsFor != waitsFor[m.Goid] || m.Function == "" || m.Line == 0 {
						t.Errorf("member %+v: waits for %q, the target says %q", m, m.WaitsFor, waitsFor[m.Goid])
					}
					// Each waits for what the next holds.
					next := d.Members[(k+1)%len(d.Members)]
					if m.WaitsFor != holdsLock[next.Goid] {
						t.Errorf("member %+v waits for %q, followed by goroutine %d, which holds %q", m, m.WaitsFor, next.Goid, holdsLock[next.Goid])
					}
					found[m.Goid] = true
					got = append(got, m.Goid)
				}
				slices.Sort(got)
				matched := false
				for _, want := range cycles {
					w := slices.Clone(want)
					slices.Sort(w)
					matched = matched || slices.Equal(got, w)
				}
				if !matched || d.Members[0].Goid != got[0] {
					t.Errorf("a deadlock of %v (from %d): not one the target made, %v, or not from its least goroutine", got, d.Members[0].Goid, cycles)
				}
			}
			for _, g := range snap.Goroutines {
				if g.Deadlocked != found[g.ID] || found[g.ID] != (waitsFor[g.ID] != "") {
					t.Errorf("goroutine %d marked deadlocked %v, in a deadlock %v, the target says %q", g.ID, g.Deadlocked, found[g.ID], waitsFor[g.ID])
				}
			}
		})
	}
}

// snapshotOf takes a snapshot of process pid.
func snapshotOf(t *testing.T, pid int) *inspect.Snapshot {
	t.Helper()
	tg, err := inspect.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	snap, err := tg.Snapshot(sharedTracer())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// snapshotFromCore writes a core of process pid from a snapshot's stop
// and decodes the goroutines it holds.
func snapshotFromCore(t *testing.T, pid int) *inspect.Snapshot {
	t.Helper()
	tg, err := inspect.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	path := filepath.Join(t.TempDir(), "core")
	if _, _, err := tg.SnapshotCore(sharedTracer(), path, inspect.CoreOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := core.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	back, err := inspect.New(c.Process)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := c.Now()
	snap, err := back.Decode(c.Threads, now)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
