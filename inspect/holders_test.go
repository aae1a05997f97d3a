package inspect_test

import (
	"strconv"
	"strings"
	"testing"

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
// named funcN) and a PIE build.
func TestLockHolders(t *testing.T) {
	requirePrivilege(t)
	builds := []targets.BuildOptions{{}, {PIE: true}, {Toolchain: "go1.20.14"}, {Toolchain: "go1.21.13"}, {Toolchain: "go1.22.12"}, {Toolchain: "go1.27.4"}}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "holders", opts), "-n", "2")
			type hold struct {
				goid uint64
				fn   string
				line int
			}
			holds := map[string]hold{}
			waits := map[uint64]string{}
			for _, line := range p.Lines() {
				f := strings.Fields(line)
				switch {
				case len(f) == 5 && f[0] == "HOLD":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					n, _ := strconv.Atoi(f[4])
					holds[f[2]] = hold{id, f[3], n}
				case len(f) == 3 && f[0] == "WAIT":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					waits[id] = f[2]
				}
			}
			if len(holds) != 3 || len(waits) != 9 {
				t.Fatalf("the target reported %d holds and %d waits: %q", len(holds), len(waits), p.Lines())
			}
			snap := snapshotOf(t, p.Cmd.Process.Pid)
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
				if !held {
					if len(got) != 0 || !strings.Contains(obj.String(), "locked, holder unknown") {
						t.Errorf("goroutine %d waits on %s, whose holder cannot be seen: gi names %v (%s)", g.ID, lock, got, obj)
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
// goroutines on two mutexes taken in opposite orders, and one on a mutex
// it holds itself, and says which. gi reports exactly those cycles, each
// member waiting for the lock the next holds, and marks exactly their
// members.
func TestDeadlocks(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {Toolchain: "go1.21.13"}, {Toolchain: "go1.27.4"}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "holders", opts), "-n", "1", "-deadlock")
			waitsFor := map[uint64]string{} // goroutine -> the lock it waits for
			var pair []uint64
			var self uint64
			for _, line := range p.Lines() {
				f := strings.Fields(line)
				switch {
				case len(f) == 4 && f[0] == "CYCLE":
					id, _ := strconv.ParseUint(f[1], 10, 64)
					pair = append(pair, id)
					waitsFor[id] = "mutex " + f[3]
				case len(f) == 3 && f[0] == "SELF":
					self, _ = strconv.ParseUint(f[1], 10, 64)
					waitsFor[self] = "mutex " + f[2]
				}
			}
			if len(pair) != 2 || self == 0 {
				t.Fatalf("the target reported the pair %v and %d: %q", pair, self, p.Lines())
			}
			snap := snapshotOf(t, p.Cmd.Process.Pid)
			if len(snap.Deadlocks) != 2 {
				t.Fatalf("deadlocks %+v, want the pair %v and %d alone", snap.Deadlocks, pair, self)
			}
			found := map[uint64]bool{}
			for _, d := range snap.Deadlocks {
				for _, m := range d.Members {
					if m.WaitsFor != waitsFor[m.Goid] || m.Function == "" || m.Line == 0 {
						t.Errorf("member %+v: waits for %q, the target says %q", m, m.WaitsFor, waitsFor[m.Goid])
					}
					found[m.Goid] = true
				}
				switch len(d.Members) {
				case 1:
					if d.Members[0].Goid != self || d.Members[0].Function != "main.lockAgain" {
						t.Errorf("a deadlock of one: %+v, want goroutine %d in main.lockAgain", d.Members, self)
					}
				case 2:
					if got := []uint64{d.Members[0].Goid, d.Members[1].Goid}; !(got[0] == min(pair[0], pair[1]) && got[1] == max(pair[0], pair[1])) {
						t.Errorf("the pair's deadlock: %+v, want goroutines %v from the least", d.Members, pair)
					}
				default:
					t.Errorf("a deadlock of %d: %+v", len(d.Members), d.Members)
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
