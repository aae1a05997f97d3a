package measure

import (
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/trace"
)

// snapshot builds a snapshot of goroutines given as id → stack (see stack).
func snapshot(gs map[uint64]*inspect.Goroutine) *inspect.Snapshot {
	s := &inspect.Snapshot{}
	for id, g := range gs {
		g.ID = id
		s.Goroutines = append(s.Goroutines, g)
	}
	return s
}

// TestRelate checks the measurement's rules on a window built by hand: statistics
// of calls that began and ended in the window, the time in the current call
// when its entry was seen, stuck for a goroutine that sat in one call of a
// returning function the whole window, never for a worker loop.
func TestRelate(t *testing.T) {
	handle := &trace.Function{Name: "main.handle", Returns: []uint64{1}}
	loop := &trace.Function{Name: "main.loop", EntryOnly: true}
	prog := Program{Untraceable: notRuntime}
	w := newWindow(time.Second)
	start := w.monoStart
	const pid = 7
	key := func(id uint64) trace.GoroutineKey { return trace.GoroutineKey{PID: pid, Goid: id} }

	// Calls of main.handle: 3 inside the window, one that began before it
	// and one that ended after it (not counted).
	for _, c := range []struct{ s, e uint64 }{{10, 20}, {30, 50}, {60, 100}, {0, 20}, {900_000_000, 1_100_000_000}} {
		from := start + c.s
		if c.s == 0 {
			from = start - 5
		}
		w.call(trace.Header{}, &trace.Call{Func: handle, Start: from, End: start + c.e})
	}
	// Goroutine 1 entered main.handle in the window and is still in it;
	// goroutine 2 sat in main.handle all along (no event); goroutine 3 was
	// in main.handle before and returned from it in the window; goroutine 4
	// is in the worker loop all along; goroutine 5 is in no traced function.
	w.event(&trace.Event{Func: handle, PID: pid, Goid: 1})
	w.event(&trace.Event{Func: handle, PID: pid, Goid: 3})
	before := snapshot(map[uint64]*inspect.Goroutine{
		2: stack("sync.runtime_SemacquireMutex", "main.handle", "main.worker"),
		3: stack("time.Sleep", "main.handle", "main.worker"),
		4: stack("runtime.gopark elided", "main.loop"),
	})
	after := snapshot(map[uint64]*inspect.Goroutine{
		1: stack("sync.runtime_SemacquireMutex", "main.handle", "main.worker"),
		2: stack("sync.runtime_SemacquireMutex", "main.handle", "main.worker"),
		3: stack("sync.runtime_SemacquireMutex", "main.handle", "main.worker"),
		4: stack("runtime.gopark elided", "main.loop"),
		5: stack("runtime.gopark elided", "runtime.bgsweep"),
	})
	open := []trace.OpenCall{
		{Goroutine: key(1), Func: handle, Start: start + 400_000_000, Depth: 0},
		{Goroutine: key(4), Func: loop, Start: start - 50, Depth: 0},
	}
	// Goroutine 6 sits in main.late, attached 600ms into the window (a
	// later snapshot found it there), since before the window: not stuck,
	// no call of it completed. Goroutine 7 is in main.unseen, which no
	// snapshot found before the window ended.
	late := &trace.Function{Name: "main.late", Returns: []uint64{1}}
	before.Goroutines = append(before.Goroutines, &inspect.Goroutine{ID: 6, Frames: stack("time.Sleep", "main.late").Frames})
	after.Goroutines = append(after.Goroutines,
		&inspect.Goroutine{ID: 6, Frames: stack("time.Sleep", "main.late").Frames},
		&inspect.Goroutine{ID: 7, Frames: stack("time.Sleep", "main.unseen").Frames},
		&inspect.Goroutine{ID: 8, Frames: stack("runtime.gopark elided", "main.loop").Frames})
	end := start + 1_000_000_000
	traced := map[string]tracedFunction{"main.handle": {handle, start}, "main.loop": {loop, start}, "main.late": {late, start + 600_000_000}}
	if withLoss := w.relate(prog, 1, before, after.Goroutines, traced, open, pid, end, true); withLoss[2] == nil || withLoss[2].Stuck {
		t.Errorf("goroutine 2 with lost events: %+v, want measured, not stuck", withLoss[2])
	}
	got := w.relate(prog, 1, before, after.Goroutines, traced, open, pid, end, false)

	if l := got[1]; l == nil || l.Function != "main.handle" || l.Calls != 3 || l.MaxNS != 40 || l.InCallNS != 600_000_000 || l.Stuck {
		t.Errorf("goroutine 1 (entered in the window): %+v, want main.handle, 3 calls, max 40ns, in call 600ms, not stuck", l)
	}
	if l := got[2]; l == nil || !l.Stuck || l.InCallNS != 0 {
		t.Errorf("goroutine 2 (in one call all along): %+v, want stuck", l)
	}
	if l := got[3]; l == nil || l.Stuck {
		t.Errorf("goroutine 3 (returned in the window): %+v, want not stuck", l)
	}
	if l := got[4]; l == nil || l.Function != "main.loop" || l.Stuck || l.InCallNS == 0 {
		t.Errorf("goroutine 4 (worker loop): %+v, want main.loop, in call, never stuck", l)
	}
	if l := got[5]; l == nil || l.Function != "runtime.bgsweep" || l.Why != WhyUntraceable+"runtime internals are not traced" || l.TracedNS != 0 {
		t.Errorf("goroutine 5 (nothing traceable): %+v, want runtime.bgsweep, untraceable with the reason", l)
	}
	if l := got[6]; l == nil || l.Function != "main.late" || l.Stuck || l.Why != WhyNoCall || l.TracedNS != 400_000_000 {
		t.Errorf("goroutine 6 (in a function attached during the window): %+v, want main.late, traced 400ms, no call completed, not stuck", l)
	}
	if l := got[7]; l == nil || l.Function != "main.unseen" || l.Why != WhyAppeared || l.TracedNS != 0 {
		t.Errorf("goroutine 7 (in a function no snapshot saw): %+v, want main.unseen, not traced", l)
	}
	if l := got[8]; l == nil || l.Function != "main.loop" || l.Why != WhyNoReturn {
		t.Errorf("goroutine 8 (in a worker loop entered before the window): %+v, want main.loop, never returns", l)
	}
	if l := got[1]; l.TracedNS != 1_000_000_000 || l.Why != "" {
		t.Errorf("goroutine 1: traced %dns, why %q; want the whole window, no why", l.TracedNS, l.Why)
	}

	res := &Result{ByGoid: got}
	members := make([]*inspect.Goroutine, 3)
	for _, g := range after.Goroutines {
		if g.ID <= 3 {
			members[g.ID-1] = g
		}
	}
	l, stuck, ok := res.GroupLatency(members[0], members)
	if !ok || stuck != 1 || l.Stuck || l.InCallNS != 600_000_000 || l.Calls != 3 {
		t.Errorf("group of 1, 2, 3: %+v, %d stuck, %v; want 1 stuck, not all, in call 600ms", l, stuck, ok)
	}
}

func TestMeasuredFunctions(t *testing.T) {
	gs := []*inspect.Goroutine{
		stack("time.Sleep", "main.traceC", "main.worker"),
		stack("sync.runtime_SemacquireMutex", "main.handle", "main.worker"),
		stack("runtime.gopark elided", "runtime.bgsweep"),
	}
	prog := Program{}
	got := measuredFunctions(prog, gs, 2)
	want := []string{"main.traceC", "main.worker", "main.handle"}
	if len(got) != len(want) {
		t.Fatalf("measuredFunctions = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("measuredFunctions = %q, want %q", got, want)
		}
	}
}
