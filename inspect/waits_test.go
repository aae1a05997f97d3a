package inspect_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// announced is one WAIT line of the waiters target: what a goroutine
// waits on, as the target itself sees it.
type announced struct {
	goid                  uint64
	kind, addr, name, dir string
	fd                    int
	more                  string
}

func parseWaits(t *testing.T, lines []string) map[uint64][]announced {
	out := map[uint64][]announced{}
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "WAIT ")
		if !ok {
			continue
		}
		var a announced
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "goid":
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("bad line %q", l)
				}
				a.goid = n
			case "kind":
				a.kind = v
			case "addr":
				a.addr = v
			case "name":
				a.name = v
			case "dir":
				a.dir = v
			case "more":
				a.more = v
			case "fd":
				a.fd, _ = strconv.Atoi(v)
			}
		}
		out[a.goid] = append(out[a.goid], a)
	}
	return out
}

// waitToolchains are the releases the waiting-on ground truth runs on.
var waitToolchains = []string{"local", "go1.20.14", "go1.22.12", "go1.24.13", "go1.27.4"}

// TestWaitingOn compares what gi says each blocked goroutine of the waiters
// target waits on with what the target printed about its own objects
// (addresses as %p prints them, global names, sides, channel and sync
// state), goroutine by goroutine, for Go 1.20 to 1.27, PIE and stripped.
func TestWaitingOn(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range waitToolchains {
		for _, v := range []struct{ pie, stripped bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			opts := targets.BuildOptions{Toolchain: tc, PIE: v.pie, Stripped: v.stripped}
			t.Run(opts.String(), func(t *testing.T) {
				t.Parallel()
				p := targets.Start(t, targets.Build(t, "waiters", opts), "-fan", "100")
				tgt, err := inspect.Open(p.Pid)
				if err != nil {
					t.Fatal(err)
				}
				defer tgt.Close()
				// The main goroutine prints READY and then sleeps: take
				// snapshots until it has reached its sleep, so that every
				// goroutine but the one in read(2) is blocked.
				var snap *inspect.Snapshot
				for try := 0; ; try++ {
					snap, err = tgt.Snapshot(sharedTracer())
					if err != nil {
						t.Fatal(err)
					}
					if mainSleeps(snap) || try == 200 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				targets.CheckNotStopped(t, p.Pid)
				checkWaits(t, snap, parseWaits(t, p.Lines()), v.stripped)
			})
		}
	}
}

func mainSleeps(snap *inspect.Snapshot) bool {
	for _, g := range snap.Goroutines {
		if g.ID == 1 {
			return g.WaitReason == "sleep"
		}
	}
	return false
}

func checkWaits(t *testing.T, snap *inspect.Snapshot, want map[uint64][]announced, stripped bool) {
	t.Helper()
	if len(want) != 4+3+2+1+100+1+4+1+2+1+1+2+4+1 {
		t.Fatalf("the target announced %d blocked goroutines", len(want))
	}
	byID := map[uint64]*inspect.Goroutine{}
	for _, g := range snap.Goroutines {
		byID[g.ID] = g
	}
	compared := 0
	for goid, as := range want {
		g := byID[goid]
		if g == nil {
			t.Errorf("goroutine %d not in the snapshot", goid)
			continue
		}
		if len(g.WaitingOn) != len(as) {
			t.Errorf("goroutine %d [%s]: waits on %v, the target says %v", goid, g.WaitReason, g.WaitingOn, as)
			continue
		}
		for i, a := range as {
			// A select's sudogs are in lock order (by channel address),
			// not in case order: match by address.
			o := g.WaitingOn[i]
			for _, c := range g.WaitingOn {
				if a.kind == "chan" && fmt.Sprintf("%#x", c.Addr) == a.addr {
					o = c
				}
			}
			desc := fmt.Sprintf("goroutine %d [%s] %s", goid, g.WaitReason, o)
			if o.Kind != a.kind {
				t.Errorf("%s: kind %s, the target says %s", desc, o.Kind, a.kind)
				continue
			}
			switch a.kind {
			case "fd":
				// kind,local,remote as the target's net package says.
				f := strings.Split(a.more, ",")
				if o.FD == nil || o.FD.FD != a.fd || o.Dir != a.dir || len(f) != 3 || o.FD.Kind != f[0] || o.FD.Local != f[1] || o.FD.Remote != f[2] {
					t.Errorf("%s: want fd %d %s, %s (%s → %s)", desc, a.fd, a.dir, f[0], f[1], f[2])
				}
				if wantSys := map[string]string{"syscall": "read", "fd": ""}[a.addr]; o.Syscall != wantSys {
					t.Errorf("%s: in system call %q, want %q", desc, o.Syscall, wantSys)
				}
				compared++
				continue
			case "timer":
				wake, _ := strconv.ParseInt(a.more, 10, 64)
				wantIn := time.Unix(0, wake).Sub(snap.Taken)
				if d := time.Duration(o.WakeIn) - wantIn; d < -2*time.Second || d > 2*time.Second {
					t.Errorf("%s: wakes in %v, the target says %v", desc, time.Duration(o.WakeIn), wantIn)
				}
				continue
			}
			if got := fmt.Sprintf("%#x", o.Addr); got != a.addr {
				t.Errorf("%s: address %s, the target says %s", desc, got, a.addr)
			}
			if !stripped && o.Name != a.name {
				t.Errorf("%s: name %q, the target says %q", desc, o.Name, a.name)
			}
			if a.dir != "" && o.Dir != a.dir {
				t.Errorf("%s: side %q, the target says %q", desc, o.Dir, a.dir)
			}
			compared++
		}
	}
	if compared < 100 {
		t.Errorf("only %d objects compared", compared)
	}

	// Object state, per object: the channels' queues and buffers, the
	// sync objects' state and waiters.
	objs := inspect.WaitedObjects(snap.Goroutines)
	find := func(kind, fn string) *inspect.WaitedObject {
		for _, wo := range objs {
			if wo.Object.Kind == kind && wo.Goroutines[0].Frames != nil {
				for _, f := range wo.Goroutines[0].Frames {
					if f.Function == fn {
						return wo
					}
				}
			}
		}
		t.Errorf("no %s object waited on in %s", kind, fn)
		return nil
	}
	if wo := objs[0]; len(wo.Goroutines) != 100 || wo.Object.Kind != "chan" || wo.Object.Chan.Receivers != 100 ||
		len(wo.Facts()) != 1 || wo.Facts()[0] != "no goroutine waits to send" {
		t.Errorf("first object: %s with %d goroutines, facts %v; want the fan-in channel's 100 receivers, nobody sending", wo.Object, len(wo.Goroutines), wo.Facts())
	}
	elem := func(name string) string {
		if stripped {
			return "chan"
		}
		return "chan " + name
	}
	if wo := find("chan", "main.recvJob"); wo != nil {
		if c := wo.Object.Chan; c.Cap != 0 || c.Receivers != 3 || c.Senders != 0 || c.Closed || wo.Object.Type != elem("main.job") {
			t.Errorf("jobs channel: %s %+v", wo.Object.Type, *c)
		}
	}
	if wo := find("chan", "main.sendOut"); wo != nil {
		if c := wo.Object.Chan; c.Cap != 2 || c.Len != 2 || c.Senders != 2 || c.Receivers != 0 || wo.Object.Type != elem("int") {
			t.Errorf("out channel: %s %+v", wo.Object.Type, *c)
		}
	}
	if wo := find("mutex", "main.lockSlow"); wo != nil {
		if s := wo.Object.Sync; !s.Locked || s.Waiters != 4 {
			t.Errorf("main.slowMu: %+v, want locked with 4 waiters", *s)
		}
	}
	if wo := find("rwmutex", "main.readLock"); wo != nil {
		if s := wo.Object.Sync; !s.Locked || s.Waiters != 2 || s.Readers != 2 {
			t.Errorf("main.rw: %+v, want write-locked, 2 readers waiting", *s)
		}
	}
	// At the start of a mapping: its state read all the same, from the
	// semaphore's page.
	if wo := find("rwmutex", "main.readLockEdge"); wo != nil {
		if s := wo.Object.Sync; wo.Object.Unknown != "" || !s.Locked || s.Waiters != 1 || s.Readers != 1 {
			t.Errorf("the RWMutex at a mapping's start: %+v (%q), want write-locked, 1 reader waiting", *s, wo.Object.Unknown)
		}
	}
	if wo := find("waitgroup", "main.waitGroup"); wo != nil {
		if s := wo.Object.Sync; s.Counter != 1 || s.Waiters != 2 {
			t.Errorf("main.wg: %+v, want counter 1 and 2 waiters", *s)
		}
	}
	if wo := find("cond", "main.condWait"); wo != nil {
		// The heap Cond's three waiters, and the global one's single.
		var counts []int
		for _, o := range objs {
			if o.Object.Kind == "cond" && o.Object.Sync != nil {
				counts = append(counts, o.Object.Sync.Waiters, len(o.Goroutines))
			}
		}
		if fmt.Sprint(counts) != "[3 3 1 1]" {
			t.Errorf("sync.Conds' waiters (state, goroutines): %v, want [3 3 1 1]", counts)
		}
	}
	if blocked, total := inspect.AllBlocked(snap.Goroutines); blocked != total-1 {
		t.Errorf("%d of %d goroutines blocked; the target has all blocked but the one in read(2)", blocked, total)
	}
}
