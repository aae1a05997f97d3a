package trace

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// These tests drive the call-tree builder with hand-made events: no root,
// no BPF, no process. Frame keys grow with depth (g.stack.hi - sp).

var (
	fnA = &Function{Index: 0, Name: "main.a"}
	fnB = &Function{Index: 1, Name: "main.b"}
	fnC = &Function{Index: 2, Name: "main.c"}
)

var g1 = GoroutineKey{PID: 10, Goid: 1}

// builderLog records what a Builder reports, in order.
type builderLog struct {
	calls []string // "goid:func@start-end" with U for unwound
	roots []*Call
}

func newLoggedBuilder() (*Builder, *builderLog) {
	b := NewBuilder()
	l := &builderLog{}
	b.OnCall = func(k GoroutineKey, c *Call) {
		u := ""
		if c.Unwound {
			u = " U"
		}
		l.calls = append(l.calls, fmt.Sprintf("%d:%s@%d-%d%s", k.Goid, c.Func.Name, c.Start, c.End, u))
	}
	b.OnRoot = func(k GoroutineKey, g uint64, c *Call) { l.roots = append(l.roots, c) }
	return b, l
}

func (l *builderLog) want(t *testing.T, want ...string) {
	t.Helper()
	if strings.Join(l.calls, ", ") != strings.Join(want, ", ") {
		t.Errorf("completed calls:\n got  %v\n want %v", l.calls, want)
	}
}

func TestBuilderNesting(t *testing.T) {
	b, l := newLoggedBuilder()
	b.Entry(g1, 0xc000, fnA, 100, 0x100, 0x4010)
	b.Entry(g1, 0xc000, fnB, 110, 0x180, 0x4020)
	b.Entry(g1, 0xc000, fnC, 120, 0x200, 0x4030)
	if b.Open() != 1 {
		t.Fatalf("Open() = %d with one goroutine in calls", b.Open())
	}
	b.Return(g1, fnC, 130, 0x200, 0x5003)
	b.Return(g1, fnB, 140, 0x180, 0x5002)
	b.Entry(g1, 0xc000, fnC, 150, 0x180, 0x4040) // a second child of A
	b.Return(g1, fnC, 155, 0x180, 0x5003)
	b.Return(g1, fnA, 160, 0x100, 0x5001)
	l.want(t, "1:main.c@120-130", "1:main.b@110-140", "1:main.c@150-155", "1:main.a@100-160")
	if len(l.roots) != 1 {
		t.Fatalf("%d roots, want 1", len(l.roots))
	}
	a := l.roots[0]
	if a.Func != fnA || a.Depth != 0 || a.Duration() != 60 || a.ReturnSite != 0x5001 || a.CallerPC != 0x4010 || a.Unwound {
		t.Errorf("root %+v", a)
	}
	if len(a.Children) != 2 || a.Children[0].Func != fnB || a.Children[1].Func != fnC {
		t.Fatalf("root's children %v", a.Children)
	}
	bb := a.Children[0]
	if bb.Depth != 1 || len(bb.Children) != 1 || bb.Children[0].Func != fnC || bb.Children[0].Depth != 2 || bb.Children[0].Duration() != 10 {
		t.Errorf("B's subtree wrong: %+v", bb)
	}
	if a.Children[1].Depth != 1 || a.Children[1].CallerPC != 0x4040 {
		t.Errorf("second child %+v", a.Children[1])
	}
	if b.Open() != 0 || b.Unmatched != 0 || b.Overflow != 0 || len(b.OpenCalls()) != 0 {
		t.Errorf("after the root returned: open %d, unmatched %d, overflow %d", b.Open(), b.Unmatched, b.Overflow)
	}
}

// TestBuilderPanicRecover: A recovers a panic raised two frames down; B and
// C never reach a RET and are unwound when A returns.
func TestBuilderPanicRecover(t *testing.T) {
	b, l := newLoggedBuilder()
	b.Entry(g1, 1, fnA, 100, 0x100, 0)
	b.Entry(g1, 1, fnB, 110, 0x180, 0)
	b.Entry(g1, 1, fnC, 120, 0x200, 0)
	b.Return(g1, fnA, 170, 0x100, 0x5001)
	l.want(t, "1:main.c@120-170 U", "1:main.b@110-170 U", "1:main.a@100-170")
	a := l.roots[0]
	if a.Unwound || !a.Children[0].Unwound || !a.Children[0].Children[0].Unwound || a.Children[0].ReturnSite != 0 {
		t.Errorf("unwound flags: A %v B %v C %v", a.Unwound, a.Children[0].Unwound, a.Children[0].Children[0].Unwound)
	}
	if b.Unmatched != 0 || b.Open() != 0 {
		t.Errorf("unmatched %d, open %d", b.Unmatched, b.Open())
	}
}

// TestBuilderShallowerEntry: after a recover in an untraced frame, the next
// traced call at a shallower (or the same) frame unwinds the open ones.
func TestBuilderShallowerEntry(t *testing.T) {
	b, l := newLoggedBuilder()
	b.Entry(g1, 1, fnA, 100, 0x100, 0)
	b.Entry(g1, 1, fnB, 110, 0x200, 0)
	b.Entry(g1, 1, fnC, 120, 0x180, 0) // shallower than B: B is gone
	b.Return(g1, fnC, 125, 0x180, 0x5003)
	b.Return(g1, fnA, 130, 0x100, 0x5001)
	l.want(t, "1:main.b@110-120 U", "1:main.c@120-125", "1:main.a@100-130")
	if a := l.roots[0]; len(a.Children) != 2 || a.Children[1].Depth != 1 {
		t.Errorf("C should be A's second child at depth 1: %+v", a.Children)
	}
}

// TestBuilderReentrySameFrame: a call at the same frame as an open call of
// the same function means the first one ended without a RET (its panic was
// recovered by an untraced caller); each is its own root.
func TestBuilderReentrySameFrame(t *testing.T) {
	b, l := newLoggedBuilder()
	b.Entry(g1, 1, fnA, 100, 0x100, 0)
	b.Entry(g1, 1, fnA, 200, 0x100, 0)
	b.Return(g1, fnA, 250, 0x100, 0x5001)
	l.want(t, "1:main.a@100-200 U", "1:main.a@200-250")
	if len(l.roots) != 2 || !l.roots[0].Unwound || l.roots[1].Unwound || l.roots[1].Depth != 0 {
		t.Errorf("roots %+v", l.roots)
	}
	if b.Unmatched != 0 {
		t.Errorf("%d unmatched", b.Unmatched)
	}
}

func TestBuilderGoexit(t *testing.T) {
	b, l := newLoggedBuilder()
	g2 := GoroutineKey{PID: 10, Goid: 2}
	b.Entry(g1, 1, fnA, 100, 0x100, 0)
	b.Entry(g1, 1, fnB, 110, 0x180, 0)
	b.Entry(g2, 2, fnC, 115, 0x100, 0)
	b.GoroutineExit(g1, 140)
	l.want(t, "1:main.b@110-140 U", "1:main.a@100-140 U")
	if len(l.roots) != 1 || l.roots[0].Func != fnA || len(l.roots[0].Children) != 1 {
		t.Fatalf("roots %+v", l.roots)
	}
	if b.Open() != 1 {
		t.Errorf("Open() = %d: goroutine 1's state should be freed, goroutine 2's kept", b.Open())
	}
	// A return of the exited goroutine has nothing to match any more.
	b.Return(g1, fnA, 150, 0x100, 0x5001)
	if b.Unmatched != 1 {
		t.Errorf("return after Goexit: unmatched %d, want 1", b.Unmatched)
	}
	b.GoroutineExit(GoroutineKey{PID: 10, Goid: 99}, 160) // unknown: no-op
	b.GoroutineExit(g2, 170)
	l.want(t, "1:main.b@110-140 U", "1:main.a@100-140 U", "2:main.c@115-170 U")
	if b.Open() != 0 {
		t.Errorf("Open() = %d after every goroutine exited", b.Open())
	}
}

func TestBuilderUnmatched(t *testing.T) {
	b, l := newLoggedBuilder()
	// A return on a goroutine never seen: the call began before the probes.
	b.Return(g1, fnA, 100, 0x100, 0x5001)
	if b.Unmatched != 1 {
		t.Errorf("unmatched %d, want 1", b.Unmatched)
	}
	// A return shallower than every open frame has no entry either, and
	// leaves the open calls alone.
	b.Entry(g1, 1, fnB, 110, 0x200, 0)
	b.Return(g1, fnA, 120, 0x100, 0x5001)
	// Same frame, other function: not a match.
	b.Return(g1, fnC, 125, 0x200, 0x5003)
	if b.Unmatched != 3 {
		t.Errorf("unmatched %d, want 3", b.Unmatched)
	}
	if len(l.calls) != 0 {
		t.Errorf("unmatched returns completed calls: %v", l.calls)
	}
	if oc := b.OpenCalls(); len(oc) != 1 || oc[0].Func != fnB || oc[0].Start != 110 {
		t.Errorf("open calls %+v, want B only", oc)
	}
	b.Return(g1, fnB, 130, 0x200, 0x5002)
	l.want(t, "1:main.b@110-130")
}

// TestBuilderMorestack: the runtime copies a growing stack elsewhere, so sp
// and stack.hi both move between a call's entry and its RET; the frame key
// (their distance) does not.
func TestBuilderMorestack(t *testing.T) {
	b, l := newLoggedBuilder()
	entry := &Event{StackHi: 0xc000100000, SP: 0xc0000fff00}
	child := &Event{StackHi: 0xc000100000, SP: 0xc0000ffe00}
	// After the copy: a stack twice as large at another address.
	childRet := &Event{StackHi: 0xc000302000, SP: 0xc000301e00}
	ret := &Event{StackHi: 0xc000302000, SP: 0xc000301f00}
	if frameKey(entry) != 0x100 || frameKey(ret) != 0x100 || frameKey(child) != 0x200 || frameKey(childRet) != 0x200 {
		t.Fatalf("frame keys %#x %#x %#x %#x", frameKey(entry), frameKey(ret), frameKey(child), frameKey(childRet))
	}
	if k := frameKey(&Event{StackHi: 0x1000, SP: 0x2000}); k != 0 {
		t.Errorf("frame key of an sp above stack.hi: %#x, want 0", k)
	}
	b.Entry(g1, 1, fnA, 100, frameKey(entry), 0)
	b.Entry(g1, 1, fnB, 110, frameKey(child), 0)
	b.Return(g1, fnB, 120, frameKey(childRet), 0x5002)
	b.Return(g1, fnA, 130, frameKey(ret), 0x5001)
	l.want(t, "1:main.b@110-120", "1:main.a@100-130")
	if b.Unmatched != 0 {
		t.Errorf("unmatched %d", b.Unmatched)
	}
}

func TestBuilderOpenCallsAndFlush(t *testing.T) {
	b, l := newLoggedBuilder()
	g2 := GoroutineKey{PID: 11, Goid: 1} // same goid, other process
	b.Entry(g1, 1, fnA, 100, 0x100, 0)
	b.Entry(g1, 1, fnB, 110, 0x180, 0)
	b.Entry(g2, 2, fnC, 120, 0x100, 0)
	oc := b.OpenCalls()
	sort.SliceStable(oc, func(i, j int) bool { return oc[i].Goroutine.PID < oc[j].Goroutine.PID })
	want := []OpenCall{{g1, fnA, 100, 0}, {g1, fnB, 110, 1}, {g2, fnC, 120, 0}}
	if fmt.Sprint(oc) != fmt.Sprint(want) {
		t.Errorf("open calls\n got  %v\n want %v", oc, want)
	}
	running := b.Flush(500)
	// Ordered by goroutine; outermost first; every open call ends at 500,
	// marked running, without being reported as completed.
	if len(running) != 2 || running[0].Goroutine != g1 || running[1].Goroutine != g2 {
		t.Fatalf("Flush returned %+v, want goroutines %v then %v", running, g1, g2)
	}
	s1, s2 := running[0].Calls, running[1].Calls
	if len(s1) != 2 || s1[0].Func != fnA || s1[1].Func != fnB || len(s2) != 1 || s2[0].Func != fnC {
		t.Fatalf("open stacks %v and %v", s1, s2)
	}
	for _, c := range append(s1, s2...) {
		if !c.Running || c.Unwound || c.End != 500 {
			t.Errorf("%s after Flush: running %v unwound %v end %d", c.Func.Name, c.Running, c.Unwound, c.End)
		}
	}
	if s1[0].Duration() != 400 || s1[1].Duration() != 390 || s2[0].Duration() != 380 {
		t.Errorf("time so far: %d %d %d, want 400 390 380", s1[0].Duration(), s1[1].Duration(), s2[0].Duration())
	}
	if len(s1[0].Children) != 1 || s1[0].Children[0] != s1[1] || s1[0].Depth != 0 {
		t.Errorf("the open root's tree does not hold the open child")
	}
	if len(l.calls) != 0 || len(l.roots) != 0 {
		t.Errorf("Flush completed calls: %v", l.calls)
	}
	if len(b.OpenCalls()) != 3 || b.Open() != 2 {
		t.Errorf("after Flush: %d open calls, %d goroutines; want 3 and 2", len(b.OpenCalls()), b.Open())
	}
}

// TestBuilderEntryOnly: a function without a RET (a worker loop) is only
// ever entered. Its children complete under it; it ends when the goroutine
// exits (Goexit), or is still running at the end.
func TestBuilderEntryOnly(t *testing.T) {
	loop := &Function{Name: "main.workerLoop", EntryOnly: true}
	doomed := &Function{Name: "main.doomed", EntryOnly: true}
	g2 := GoroutineKey{PID: 10, Goid: 2}
	g3 := GoroutineKey{PID: 10, Goid: 3}
	b, l := newLoggedBuilder()
	b.Entry(g1, 1, loop, 100, 0x100, 0x4010)
	for i := uint64(0); i < 3; i++ {
		b.Entry(g1, 1, fnB, 110+10*i, 0x180, 0x4020)
		b.Return(g1, fnB, 115+10*i, 0x180, 0x5002)
	}
	l.want(t, "1:main.b@110-115", "1:main.b@120-125", "1:main.b@130-135")
	if len(l.roots) != 0 {
		t.Fatalf("children of the open loop were reported as roots: %v", l.roots)
	}

	// An always-panicking callee of a traced caller that recovers:
	// unwound when the caller returns.
	b.Entry(g2, 2, fnA, 200, 0x100, 0)
	b.Entry(g2, 2, doomed, 210, 0x180, 0)
	b.Return(g2, fnA, 250, 0x100, 0x5001)
	// An always-panicking root whose panic an untraced caller recovers:
	// unwound by the next call at its frame; the last one stays open.
	b.Entry(g2, 2, doomed, 300, 0x100, 0)
	b.Entry(g2, 2, doomed, 310, 0x100, 0)
	// A loop whose goroutine exits (runtime.Goexit) is unwound.
	b.Entry(g3, 3, loop, 400, 0x100, 0)
	b.GoroutineExit(g3, 450)
	l.want(t, "1:main.b@110-115", "1:main.b@120-125", "1:main.b@130-135",
		"2:main.doomed@210-250 U", "2:main.a@200-250", "2:main.doomed@300-310 U", "3:main.workerLoop@400-450 U")

	running := b.Flush(1000)
	if len(running) != 2 || len(running[0].Calls) != 1 || len(running[1].Calls) != 1 {
		t.Fatalf("running %+v", running)
	}
	w := running[0].Calls[0]
	if w.Func != loop || !w.Running || w.Unwound || w.Duration() != 900 || len(w.Children) != 3 {
		t.Errorf("loop: running %v duration %d children %d", w.Running, w.Duration(), len(w.Children))
	}
	for _, c := range w.Children {
		if c.Running || c.Unwound || c.Duration() != 5 || c.Depth != 1 {
			t.Errorf("child %+v", c)
		}
	}
	if d := running[1].Calls[0]; d.Func != doomed || d.Start != 310 || !d.Running || d.Duration() != 690 {
		t.Errorf("last doomed call: %+v", d)
	}
	if len(l.calls) != 7 {
		t.Errorf("Flush completed calls: %v", l.calls)
	}
}

func TestBuilderBounds(t *testing.T) {
	t.Run("open frames", func(t *testing.T) {
		b, _ := newLoggedBuilder()
		for i := 0; i < maxOpenFrames+3; i++ {
			b.Entry(g1, 1, fnA, uint64(i), uint64(0x100+16*i), 0)
		}
		if b.Overflow != 3 {
			t.Errorf("overflow %d, want 3", b.Overflow)
		}
		if n := len(b.OpenCalls()); n != maxOpenFrames {
			t.Errorf("%d open calls, want %d", n, maxOpenFrames)
		}
	})
	t.Run("tree nodes", func(t *testing.T) {
		b, l := newLoggedBuilder()
		completed := 0
		b.OnCall = func(GoroutineKey, *Call) { completed++ }
		b.Entry(g1, 1, fnA, 0, 0x100, 0)
		const children = maxTreeNodes + 5
		for i := 0; i < children; i++ {
			b.Entry(g1, 1, fnB, uint64(2*i+1), 0x180, 0)
			b.Return(g1, fnB, uint64(2*i+2), 0x180, 0x5002)
		}
		b.Return(g1, fnA, 3*children, 0x100, 0x5001)
		if len(l.roots) != 1 {
			t.Fatalf("%d roots", len(l.roots))
		}
		// The root is a node too: maxTreeNodes-1 children fit.
		a := l.roots[0]
		if len(a.Children) != maxTreeNodes-1 || a.Dropped != children-(maxTreeNodes-1) {
			t.Errorf("%d children kept, %d dropped; want %d and %d", len(a.Children), a.Dropped, maxTreeNodes-1, children-(maxTreeNodes-1))
		}
		if completed != children+1 {
			t.Errorf("OnCall saw %d calls, want %d: dropped nodes are still reported", completed, children+1)
		}
	})
	t.Run("goroutines", func(t *testing.T) {
		b, _ := newLoggedBuilder()
		b.maxGoroutines = 3
		for i := 1; i <= 5; i++ {
			b.Entry(GoroutineKey{PID: 1, Goid: uint64(i)}, 1, fnA, 100, 0x100, 0)
		}
		if b.Open() != 3 || b.Overflow != 2 {
			t.Errorf("open %d, overflow %d; want 3 and 2", b.Open(), b.Overflow)
		}
		// A goroutine whose root returned frees its slot.
		b.Return(GoroutineKey{PID: 1, Goid: 1}, fnA, 150, 0x100, 0x5001)
		b.Entry(GoroutineKey{PID: 1, Goid: 4}, 1, fnA, 160, 0x100, 0)
		if b.Open() != 3 || b.Overflow != 2 {
			t.Errorf("after a slot was freed: open %d, overflow %d; want 3 and 2", b.Open(), b.Overflow)
		}
	})
}

// TestBuilderParentsAndSeq checks what exporters link spans by: each call
// knows its caller and root, and numbers are unique and in entry order,
// also for calls dropped from a full tree.
func TestBuilderParentsAndSeq(t *testing.T) {
	b := NewBuilder()
	var done []*Call
	b.OnCall = func(_ GoroutineKey, c *Call) { done = append(done, c) }
	b.Entry(g1, 0xc000, fnA, 100, 0x100, 0x4010)
	b.Entry(g1, 0xc000, fnB, 110, 0x180, 0x4020)
	b.Entry(g1, 0xc000, fnC, 120, 0x200, 0x4030)
	b.Return(g1, fnC, 130, 0x200, 0x5003)
	b.Return(g1, fnB, 140, 0x180, 0x5002)
	b.Return(g1, fnA, 160, 0x100, 0x5001)
	b.Entry(g1, 0xc000, fnA, 170, 0x100, 0x4010)
	b.Return(g1, fnA, 180, 0x100, 0x5001)
	if len(done) != 4 {
		t.Fatalf("%d calls completed", len(done))
	}
	c, bb, a, a2 := done[0], done[1], done[2], done[3]
	if c.Parent != bb || bb.Parent != a || a.Parent != nil || a2.Parent != nil {
		t.Errorf("parents: c→%v b→%v a→%v", c.Parent, bb.Parent, a.Parent)
	}
	if c.Root() != a || bb.Root() != a || a.Root() != a || a2.Root() != a2 {
		t.Error("roots wrong")
	}
	if a.Seq != 1 || bb.Seq != 2 || c.Seq != 3 || a2.Seq != 4 {
		t.Errorf("seq a=%d b=%d c=%d a2=%d, want 1 2 3 4", a.Seq, bb.Seq, c.Seq, a2.Seq)
	}
}
