package leak

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gi-debug/gi/heap"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/runtimelayout"
)

// walker marks the heap objects reachable from what it is given to scan.
type walker struct {
	im      *Image
	h       *heap.Heap
	lo, hi  uint64 // the heap's bounds: no pointer outside them
	marks   [][]uint64
	work    []objRef
	marked  int
	scanned int64
	// frames counts the frames of the stacks scanned, wholeFrames those
	// scanned whole (no stack map applied), wholeStacks the stacks.
	frames, wholeFrames, wholeStacks int
	lim                              Options
	start                            time.Time
	// parent, when tracing (Options.Trace), maps each marked object's
	// start to where the word that marked it was found.
	parent map[uint64]string
	from   string
	// masks are the runtime's structures whose pointer words are known,
	// by address: Ps, Ms, and every goroutine's g.
	masks map[uint64]*runtimelayout.PointerMask
	// sudogs maps the start of each sudog's slot to the value the walk
	// does not follow there: c for a channel wait, elem (the semaphore,
	// the Cond's notifyList) for a sync wait — the runtime's
	// maybeTraceablePtrs, untraceable in its leak cycle.
	sudogs map[uint64]uint64
	// ptrs are the runtime's pointer maps of the heap's objects;
	// precise and conservative count the objects scanned by them and
	// without (whys: why, by count, a few reasons).
	ptrs                  *heap.Pointers
	precise, conservative int
	whys                  map[string]int
}

type objRef struct {
	span int
	slot int32
}

func newWalker(im *Image, snap *inspect.Snapshot, layout *runtimelayout.RuntimeLayout, lim Options) *walker {
	h := im.Heap
	w := &walker{im: im, h: h, marks: make([][]uint64, len(h.Spans)), lim: lim, start: time.Now(), sudogs: map[uint64]uint64{}, ptrs: im.Pointers, whys: map[string]int{}}
	if lim.Trace != nil {
		w.parent = map[uint64]string{}
	}
	w.masks = make(map[uint64]*runtimelayout.PointerMask, len(im.Runtime)+len(snap.Goroutines))
	for a, m := range im.Runtime {
		w.masks[a] = m
	}
	if g := &layout.Heap.Objects.G; g.Known() {
		for _, gr := range snap.Goroutines {
			w.masks[gr.Addr] = g
		}
	}
	if n := len(h.Spans); n > 0 {
		w.lo, w.hi = h.Spans[0].Start, h.Spans[n-1].Start+h.Spans[n-1].Pages*h.PageSize
	}
	// The sudogs: those the snapshot read (g.waiting, the semaphore
	// table) and those of each goroutine's g.waiting list, followed here
	// (a Cond waiter's since Go 1.26, which the snapshot reads apart).
	S := layout.Wait.Sudog
	var b [8]byte
	word := func(addr uint64) uint64 {
		if !im.Contents.Read(b[:], addr) {
			return 0
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	addSudog := func(a uint64) bool {
		if _, seen := w.sudogs[a]; seen {
			return false
		}
		k, ok := h.Find(a)
		if !ok {
			return false
		}
		if _, start, ok := h.Spans[k].Object(a); !ok || start != a {
			return false
		}
		if c := word(a + uint64(S.C)); c != 0 {
			w.sudogs[a] = c
		} else {
			w.sudogs[a] = word(a + uint64(S.Elem))
		}
		return true
	}
	for _, a := range snap.Sudogs {
		addSudog(a)
	}
	if layout.Wait.Known {
		for _, g := range snap.Goroutines {
			sg := word(g.Addr + uint64(layout.Wait.GWaiting))
			for n := 0; sg != 0 && n < maxSudogsPerG && addSudog(sg); n++ {
				sg = word(sg + uint64(S.WaitLink))
			}
		}
	}
	return w
}

// word marks the object v points into, if any.
func (w *walker) word(v uint64) {
	if v < w.lo || v >= w.hi {
		return
	}
	k, ok := w.h.Find(v)
	if !ok {
		return
	}
	s := &w.h.Spans[k]
	// Any slot, allocated or not by its bits: a span caught between the
	// two stores of its sweep (freeindex reset, allocBits not yet the
	// mark bits) shows objects allocated since the last cycle as free.
	slot, _, ok := s.Object(v)
	if !ok {
		return
	}
	m := w.marks[k]
	if m == nil {
		m = make([]uint64, (s.NElems+63)/64)
		w.marks[k] = m
	}
	if m[slot/64]&(1<<(slot%64)) != 0 {
		return
	}
	m[slot/64] |= 1 << (slot % 64)
	w.marked++
	if w.parent != nil {
		w.parent[s.Start+uint64(slot)*s.ElemSize] = w.from
	}
	w.work = append(w.work, objRef{k, int32(slot)})
}

// scan marks what the aligned words of b, copied from start, point to;
// a word equal to skip (not 0) is not followed (a sudog's c or elem).
func (w *walker) scan(b []byte, start, skip uint64) {
	w.scanned += int64(len(b))
	for i := int((8 - start%8) % 8); i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		if v < w.lo || v >= w.hi || (skip != 0 && v == skip) {
			continue
		}
		w.word(v)
	}
}

// scanSegment marks what a copied segment's words point to: those its
// mask says hold pointers, or, without a mask, every word.
func (w *walker) scanSegment(s Segment) {
	if s.Mask == nil {
		w.scan(s.Bytes, s.Addr, 0)
		return
	}
	w.scanned += int64(len(s.Bytes))
	for i := 0; 8*i+8 <= len(s.Bytes); i++ {
		if i/8 < len(s.Mask) && s.Mask[i/8]&(1<<(i%8)) != 0 {
			w.word(binary.LittleEndian.Uint64(s.Bytes[8*i:]))
		}
	}
}

// scanMasked marks what the pointer words of a runtime structure (a P,
// an M, a g) point to.
func (w *walker) scanMasked(b []byte, m *runtimelayout.PointerMask) {
	n := min(len(b), int(m.Size)) / 8
	w.scanned += int64(8 * n)
	for i := 0; i < n; i++ {
		if m.Pointer(i) {
			w.word(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
}

// drain scans the marked objects not yet scanned, until none is left.
func (w *walker) drain() error {
	for n := 0; len(w.work) > 0; n++ {
		if w.marked > w.lim.Objects {
			return fmt.Errorf("more than the bound of %d reachable objects", w.lim.Objects)
		}
		if n%4096 == 0 && time.Since(w.start) > w.lim.Time {
			return fmt.Errorf("the walk took longer than its bound of %v", w.lim.Time)
		}
		o := w.work[len(w.work)-1]
		w.work = w.work[:len(w.work)-1]
		s := &w.h.Spans[o.span]
		if s.Noscan {
			continue
		}
		b := w.im.Contents.Object(o.span, int(o.slot))
		if b == nil {
			return fmt.Errorf("heap object in span %#x not copied", s.Record)
		}
		start := s.Start + uint64(o.slot)*s.ElemSize
		if w.parent != nil {
			w.from = fmt.Sprintf("object %#x", start)
		}
		w.object(o.span, int(o.slot), b, start)
	}
	return nil
}

// maxWhys bounds the reasons kept for objects scanned conservatively.
const maxWhys = 8

// object scans the heap object in slot slot of span k, b its bytes from
// start: by the runtime's pointer map of it; where that is unknown, by
// its type's DWARF mask (a P, an M, a g), else every word. A sudog's c
// or elem is not followed.
func (w *walker) object(k, slot int, b []byte, start uint64) {
	skip := w.sudogs[start]
	if w.ptrs != nil {
		m, why := w.ptrs.Object(k, slot)
		if why == "" {
			w.precise++
			w.scanned += int64(len(b))
			m.Each(uint64(len(b)/8), func(i uint64) {
				if v := binary.LittleEndian.Uint64(b[8*i:]); skip == 0 || v != skip {
					w.word(v)
				}
			})
			return
		}
		w.conservative++
		if _, ok := w.whys[why]; ok || len(w.whys) < maxWhys {
			w.whys[why]++
		} else {
			w.whys["other reasons"]++
		}
	}
	if m := w.masks[start]; m != nil {
		w.scanMasked(b, m)
		return
	}
	w.scan(b, start, skip)
}

// stack scans a goroutine's stack as a root.
func (w *walker) stack(g *inspect.Goroutine) error {
	if g.Stack == nil || !g.Stack.Complete {
		why := "not copied"
		if g.Problem != "" {
			why = g.Problem
		}
		return fmt.Errorf("the stack of goroutine %d, which can run, could not be read whole (%s)", g.ID, why)
	}
	if w.parent != nil {
		w.from = fmt.Sprintf("stack of goroutine %d", g.ID)
	}
	c := g.Stack
	if c.Whole || !c.Unwound || g.Truncated || c.Frames == 0 {
		// Not unwound to its end: every word, as a conservative
		// collector would.
		w.scan(c.Bytes, c.SP, 0)
		w.wholeStacks++
		return nil
	}
	for i := 0; 8*i+8 <= len(c.Bytes); i++ {
		if c.Scanned(i) {
			w.scanned += 8
			w.word(binary.LittleEndian.Uint64(c.Bytes[8*i:]))
		}
	}
	w.frames += c.Frames
	w.wholeFrames += c.WholeFrames
	return nil
}

// special scans an object with a finalizer or a cleanup as the garbage
// collector does: the special record (the function) and, for a
// finalizer, what the object points to (not the object itself). A
// cleanup's object is not scanned: an object a leaked goroutine alone
// holds, with a cleanup attached, keeps nothing it points to reachable.
func (w *walker) special(r heap.Root) {
	if k, ok := w.h.Find(r.Object); ok && r.Finalizer {
		s := &w.h.Spans[k]
		if slot, start, ok := s.Object(r.Object); ok && !s.Noscan {
			if b := w.im.Contents.Object(k, slot); b != nil {
				w.object(k, slot, b, start)
			}
		}
	}
	// The record is outside the heap: its words are in no copy but the
	// heap's index read; the function value it points to is found by
	// the word scan of the record, read with the heap.
	for _, v := range r.Words {
		w.word(v)
	}
}

// anyReachable reports whether any of objs is reachable: marked, or
// outside the heap (a global, a stack: the runtime counts those as
// marked too).
func (w *walker) anyReachable(objs []uint64) bool {
	for _, a := range objs {
		k, ok := w.h.Find(a)
		if !ok {
			return true
		}
		s := &w.h.Spans[k]
		slot, _, ok := s.Object(a)
		if !ok || !s.Allocated(slot) {
			return true
		}
		if m := w.marks[k]; m != nil && m[slot/64]&(1<<(slot%64)) != 0 {
			return true
		}
	}
	return false
}

// trace writes, when tracing, the path by which each object of a
// candidate found able to run was reached.
func (w *walker) trace(c *candidate) {
	for _, a := range c.objects {
		fmt.Fprintf(w.lim.Trace, "goroutine %d (%s) can run: %#x <-", c.g.ID, c.g.WaitReason, a)
		if k, ok := w.h.Find(a); ok {
			_, start, _ := w.h.Spans[k].Object(a)
			for n := 0; n < 64; n++ {
				p, ok := w.parent[start]
				if !ok {
					fmt.Fprint(w.lim.Trace, " (not in the heap)")
					break
				}
				fmt.Fprintf(w.lim.Trace, " %s", p)
				if _, err := fmt.Sscanf(p, "object %v", &start); err != nil {
					break
				}
			}
		} else {
			fmt.Fprint(w.lim.Trace, " (not in the heap: a global or a stack)")
		}
		fmt.Fprintln(w.lim.Trace)
	}
}
