package inspect

import (
	"slices"
	"testing"
)

// TestDeadlocksThroughReaders: a writer W waits on a RWMutex read-held by
// R1 and R2; R1 waits on a channel, R2 on a mutex W holds. Following one
// edge from W (to R1) finds nothing: the cycle W -> R2 -> W is found all
// the same, once, from its least goroutine id, and R1 is not in it.
func TestDeadlocksThroughReaders(t *testing.T) {
	const rw, m, ch = 0x1000, 0x2000, 0x3000
	w := &Goroutine{ID: 7, WaitingOn: []WaitObject{{Kind: "rwmutex", Addr: rw, Dir: "write", Sync: &SyncState{Locked: true, Readers: 2}}}}
	r1 := &Goroutine{ID: 3, WaitingOn: []WaitObject{{Kind: "chan", Addr: ch}}}
	r2 := &Goroutine{ID: 9, WaitingOn: []WaitObject{{Kind: "mutex", Addr: m, Sync: &SyncState{Locked: true}}}}
	other := &Goroutine{ID: 1}
	gs := []*Goroutine{other, w, r1, r2}
	holders := map[uint64][]Holder{
		rw: {{Goid: 3, Read: true, g: r1}, {Goid: 9, Read: true, g: r2}},
		m:  {{Goid: 7, g: w}},
	}
	ds := deadlocks(gs, holders, nil)
	if len(ds) != 1 || len(ds[0].Members) != 2 || ds[0].Members[0].Goid != 7 || ds[0].Members[1].Goid != 9 {
		t.Fatalf("deadlocks %+v, want one of goroutines 7 and 9, from 7", ds)
	}
	if ds[0].Members[0].WaitsFor != "rwmutex 0x1000" || ds[0].Members[1].WaitsFor != "mutex 0x2000" {
		t.Errorf("members wait for %q and %q", ds[0].Members[0].WaitsFor, ds[0].Members[1].WaitsFor)
	}
	if !w.Deadlocked || !r2.Deadlocked || r1.Deadlocked || other.Deadlocked {
		t.Errorf("marked: w %v, r2 %v, r1 %v, other %v", w.Deadlocked, r2.Deadlocked, r1.Deadlocked, other.Deadlocked)
	}
}

// TestDeadlocksChain: a chain of 100k goroutines, each waiting for a
// mutex the next holds, the last waiting on a channel, has no deadlock;
// closed into a ring, one, of all of them, from the least id. The walk
// is iterative: the chain does not grow the stack.
func TestDeadlocksChain(t *testing.T) {
	const n = 100_000
	gs := make([]*Goroutine, n)
	for i := range gs {
		gs[i] = &Goroutine{ID: uint64(n - i)} // the least id last
	}
	holders := map[uint64][]Holder{}
	for i := range n - 1 {
		lock := uint64(0x10000 + 8*i)
		gs[i].WaitingOn = []WaitObject{{Kind: "mutex", Addr: lock, Sync: &SyncState{Locked: true}}}
		holders[lock] = []Holder{{Goid: gs[i+1].ID, g: gs[i+1]}}
	}
	gs[n-1].WaitingOn = []WaitObject{{Kind: "chan", Addr: 0x8}}
	if ds := deadlocks(gs, holders, nil); len(ds) != 0 {
		t.Fatalf("a chain: %d deadlocks", len(ds))
	}
	last := uint64(0x10000 + 8*(n-1))
	gs[n-1].WaitingOn = []WaitObject{{Kind: "mutex", Addr: last, Sync: &SyncState{Locked: true}}}
	holders[last] = []Holder{{Goid: gs[0].ID, g: gs[0]}}
	ds := deadlocks(gs, holders, nil)
	if len(ds) != 1 || len(ds[0].Members) != n || ds[0].Members[0].Goid != 1 {
		t.Fatalf("a ring of %d: %d deadlocks, the first of %d from %d", n, len(ds), len(ds[0].Members), ds[0].Members[0].Goid)
	}
}

// TestStateAgrees: holders only where the lock's state allows them.
func TestStateAgrees(t *testing.T) {
	cases := []struct {
		o    WaitObject
		k    unlockKind
		want bool
	}{
		{WaitObject{Kind: "mutex", Sync: &SyncState{Locked: true}}, unlockWrite, true},
		{WaitObject{Kind: "mutex", Sync: &SyncState{}}, unlockWrite, false},
		{WaitObject{Kind: "mutex", Sync: &SyncState{Locked: true}}, unlockRead, false},
		{WaitObject{Kind: "mutex", Sync: &SyncState{Locked: true}, Unknown: "state not copied"}, unlockWrite, false},
		{WaitObject{Kind: "rwmutex", Sync: &SyncState{Locked: true}}, unlockWrite, true},
		{WaitObject{Kind: "rwmutex", Sync: &SyncState{Readers: 2}}, unlockWrite, false},
		{WaitObject{Kind: "rwmutex", Sync: &SyncState{Readers: 2}}, unlockRead, true},
		{WaitObject{Kind: "rwmutex", Sync: &SyncState{Locked: true}}, unlockRead, false},
	}
	for _, c := range cases {
		if got := stateAgrees(c.o, c.k); got != c.want {
			t.Errorf("%s %+v, unlock kind %d: %v, want %v", c.o.Kind, *c.o.Sync, c.k, got, c.want)
		}
	}
}

// TestWaitGraphEmpty: nothing waited on is an empty graph.
func TestWaitGraphEmpty(t *testing.T) {
	g := NewWaitGraph(&Snapshot{}, []*Goroutine{{ID: 1}})
	if len(g.Nodes) != 0 || len(g.Edges) != 0 || g.CutObjects != 0 {
		t.Errorf("empty graph %+v", g)
	}
}

// TestWaitGraphBounded: 1000 goroutines each holding a mutex and waiting
// on a channel of their own keep MaxGraphObjects objects, the rest cut
// and counted.
func TestWaitGraphBounded(t *testing.T) {
	var gs []*Goroutine
	for i := range 1000 {
		holder := &Goroutine{ID: uint64(2*i + 1), WaitingOn: []WaitObject{{Kind: "chan", Addr: uint64(0x100000 + 8*i)}}}
		waiter := &Goroutine{ID: uint64(2*i + 2), WaitingOn: []WaitObject{{Kind: "mutex", Addr: uint64(0x200000 + 8*i),
			Sync: &SyncState{Locked: true, Holders: []Holder{{Goid: holder.ID, g: holder}}}}}}
		gs = append(gs, holder, waiter)
	}
	g := NewWaitGraph(&Snapshot{}, gs)
	objects := slices.IndexFunc(g.Nodes, func(n GraphNode) bool { return n.Kind != "object" })
	if objects != MaxGraphObjects || g.CutObjects != 2000-MaxGraphObjects || g.CutGoroutines == 0 {
		t.Errorf("%d objects kept, %d cut (%d goroutines)", objects, g.CutObjects, g.CutGoroutines)
	}
}

// TestDeadlocksThroughPendingWriter: a reader waits for a writer pending
// on the RWMutex (it holds the inner mutex), which waits for the read
// holder R1, which waits for a mutex R2, the waiting reader, holds: one
// cycle of three.
func TestDeadlocksThroughPendingWriter(t *testing.T) {
	const rw, m = 0x1000, 0x2000
	w := &Goroutine{ID: 5, WaitingOn: []WaitObject{{Kind: "rwmutex", Addr: rw, Dir: "write", Sema: rw + 8, Sync: &SyncState{Locked: true, Readers: 2}}}}
	r1 := &Goroutine{ID: 6, WaitingOn: []WaitObject{{Kind: "mutex", Addr: m, Sync: &SyncState{Locked: true}}}}
	r2 := &Goroutine{ID: 4, WaitingOn: []WaitObject{{Kind: "rwmutex", Addr: rw, Dir: "read", Sema: rw + 12, Sync: &SyncState{Locked: true, Readers: 2}}}}
	gs := []*Goroutine{w, r1, r2}
	holders := map[uint64][]Holder{rw: {{Goid: 6, Read: true, g: r1}}, m: {{Goid: 4, g: r2}}}
	if ds := deadlocks(gs, holders, nil); len(ds) != 0 {
		t.Fatalf("without the pending writer's edge: %+v", ds)
	}
	ds := deadlocks(gs, holders, map[uint64][]*Goroutine{rw: {w}})
	if len(ds) != 1 || len(ds[0].Members) != 3 || ds[0].Members[0].Goid != 4 || ds[0].Members[1].Goid != 5 || ds[0].Members[2].Goid != 6 {
		t.Fatalf("deadlocks %+v, want 4 -> 5 -> 6", ds)
	}
}

// TestHoldsAt: a frame holds a global mutex by its code only between a
// completed Lock and the Unlock after it: not inside the call of the Lock
// (still taking it), not after an Unlock with no Lock since.
func TestHoldsAt(t *testing.T) {
	const a, b = 0x1000, 0x2000
	sites := []plainSite{
		{addr: a, off: 10, end: 15},               // Lock(a)
		{addr: b, off: 16, end: 21},               // Lock(b)
		{addr: a, off: 20, end: 25, unlock: true}, // Unlock(a)
		{addr: a, off: 40, end: 45},               // Lock(a) again
		{addr: a, off: 60, end: 65, unlock: true}, // Unlock(a)
		{addr: b, off: 70, end: 75, unlock: true}, // Unlock(b)
	}
	cases := []struct {
		addr, off uint64
		holds     bool
	}{
		{a, 5, false},  // before any Lock
		{a, 15, false}, // in the call of the Lock: taking it
		{a, 18, true},  // between the Lock and its Unlock
		{a, 30, false}, // after the Unlock, before the next Lock
		{a, 45, false}, // in the second Lock's call
		{a, 50, true},  // held again
		{a, 80, false}, // no Unlock after
		{b, 50, true},  // b held from 21 to 70
		{b, 21, false}, // in b's Lock
	}
	for _, c := range cases {
		if got := holdsAt(sites, c.addr, c.off); got != c.holds {
			t.Errorf("holdsAt(%#x, %d) = %v, want %v", c.addr, c.off, got, c.holds)
		}
	}
}
