package trace

import (
	"testing"
	"time"
)

// TestEstimateMissed checks the estimate of a whole call's nested sampled
// calls missed between windows, against a call whose pace is known: 75 µs
// of work per nested call, 16 µs of probes on each seen.
func TestEstimateMissed(t *testing.T) {
	f := &Function{Name: "main.work", Sampled: true}
	const us = uint64(time.Microsecond)
	// 100 calls seen in 9.1 ms covered (91 µs each, probes included) of a
	// 30 ms call: the 20.9 ms not covered held 20.9/0.075 calls.
	mc := estimateMissed(f, 100, 30000*us, 9100*us, 16*time.Microsecond)
	if mc.Floor || mc.Unknown || mc.Missed < 278 || mc.Missed > 279 || mc.Seen != 100 || mc.Covered < 0.30 || mc.Covered > 0.31 {
		t.Errorf("paced estimate %+v, want 278 or 279 missed", mc)
	}
	// Probes taking most of the covered time: the estimate at the probed
	// pace, a floor.
	mc = estimateMissed(f, 100, 30000*us, 9100*us, 80*time.Microsecond)
	if !mc.Floor || mc.Missed != 100*20900/9100 {
		t.Errorf("probe-bound estimate %+v, want a floor of %d", mc, 100*20900/9100)
	}
	// Covered whole: nothing missed; not covered: unknown.
	if mc := estimateMissed(f, 400, 30000*us, 30000*us, 16*time.Microsecond); mc.Missed != 0 || mc.Floor || mc.Unknown || mc.Covered != 1 {
		t.Errorf("covered whole: %+v", mc)
	}
	if mc := estimateMissed(f, 0, 30000*us, 0, 16*time.Microsecond); !mc.Unknown || mc.Missed != 0 {
		t.Errorf("not covered: %+v", mc)
	}
}

// TestMissedBook follows calls through the book: sampled calls count in
// the whole calls around them up to the first sampled one, whole calls
// get an estimate per sampled function known nested in their function's
// calls, and a whole call inside a sampled one misses nothing.
func TestMissedBook(t *testing.T) {
	light, mid := &Function{Name: "main.light"}, &Function{Name: "main.mid"}
	work, outer := &Function{Name: "main.work", Sampled: true}, &Function{Name: "main.outer", Sampled: true}
	const u = 10_000 // ns: the book needs a millisecond covered to estimate
	sm := &sampler{}
	// Windows open over [100, 200) and [1000, 1100) units.
	sm.openSpan(100 * u)
	sm.closeSpan(200 * u)
	sm.openSpan(1000 * u)
	sm.closeSpan(1100 * u)
	if c := sm.covered(150*u, 1050*u); c != 100*u {
		t.Fatalf("covered(150, 1050) = %d, want 50+50 units", c)
	}
	if c := sm.covered(200*u, 1000*u); c != 0 {
		t.Fatalf("covered between the windows = %d", c)
	}
	sm.openSpan(2000 * u) // open
	if c := sm.covered(1900*u, 2500*u); c != 500*u {
		t.Fatalf("covered by the open window = %d, want 500 units", c)
	}
	m := newMissedBook(sm.covered, func(*Function) time.Duration { return 0 })
	// light [0, 400) calls mid [50, 390), which makes 10 work calls seen
	// in the first window: 100 of the 340 units of mid covered.
	l := &Call{Func: light, Start: 0, End: 400 * u}
	md := &Call{Func: mid, Start: 50 * u, End: 390 * u, Parent: l}
	for i := range 10 {
		m.completed(&Call{Func: work, Start: uint64(100+10*i) * u, End: uint64(105+10*i) * u, Parent: md})
	}
	m.completed(md)
	m.completed(l)
	if len(md.Missed) != 1 || md.Missed[0].Func != work || md.Missed[0].Seen != 10 || md.Missed[0].Missed != 24 {
		t.Errorf("mid's estimate %+v, want 10 seen, 10*240/100 missed", md.Missed)
	}
	if len(l.Missed) != 1 || l.Missed[0].Seen != 10 || l.Missed[0].Missed != 30 {
		t.Errorf("light's estimate %+v, want 10 seen, 10*300/100 missed", l.Missed)
	}
	// A later light call no window covered: unknown, as work was seen
	// nested in light's calls before; and one a window's edge covered a
	// tenth of a millisecond of, with a work call seen there: unknown too,
	// not an estimate from so little.
	l2 := &Call{Func: light, Start: 300 * u, End: 900 * u}
	m.completed(l2)
	if len(l2.Missed) != 1 || !l2.Missed[0].Unknown {
		t.Errorf("uncovered call: %+v", l2.Missed)
	}
	edge := &Call{Func: light, Start: 1090 * u, End: 1500 * u}
	m.completed(&Call{Func: work, Start: 1095 * u, End: 1096 * u, Parent: edge})
	m.completed(edge)
	if len(edge.Missed) != 1 || !edge.Missed[0].Unknown || edge.Missed[0].Seen != 1 {
		t.Errorf("call at a window's edge: %+v", edge.Missed)
	}
	// A light call inside a reported sampled call misses nothing.
	o := &Call{Func: outer, Start: 1200 * u, End: 1900 * u}
	l3 := &Call{Func: light, Start: 1250 * u, End: 1800 * u, Parent: o}
	m.completed(&Call{Func: work, Start: 1300 * u, End: 1301 * u, Parent: l3})
	m.completed(l3)
	if l3.Missed != nil {
		t.Errorf("a call inside a sampled one: %+v", l3.Missed)
	}
	// A call cut (Builder.Cut) is forgotten.
	cutCall := &Call{Func: light, Start: 2000 * u}
	m.completed(&Call{Func: work, Start: 2001 * u, End: 2002 * u, Parent: cutCall})
	m.forget(cutCall)
	if len(m.seen) != 0 {
		t.Errorf("the book keeps %d calls", len(m.seen))
	}
	if m.Missed != 54 || m.Unknown != 2 || m.Floors != 0 {
		t.Errorf("book: missed %d, unknown %d, floors %d", m.Missed, m.Unknown, m.Floors)
	}
}
