package runtimelayout

import "fmt"

// HeapLayout is where the Go heap's index and span records are, for a
// walk of the heap's objects from outside (issue #32): runtime.mheap_'s
// arena index, each heapArena's span map and in-use page bits, and the
// fields of runtime.mspan that say where a span's objects are, how big,
// and which are allocated. From the binary's DWARF, or for a stripped
// binary the generated table; Known is false with Reason where neither
// describes it.
type HeapLayout struct {
	Known  bool
	Reason string

	// MHeap is the link-time address of runtime.mheap_; 0 in the
	// generated table (an address of the probe program, not of a
	// stripped binary's).
	MHeap uint64
	// Arenas is the offset in mheap_ of its arena index, arenas:
	// [1<<ArenaL1Bits]*[1<<ArenaL2Bits]*heapArena.
	Arenas int64
	// AllArenas is the offset of the slice of every arena's index
	// (mheap_.allArenas, heapArenas from Go 1.25): []arenaIdx.
	AllArenas int64
	// ArenaL1Bits and ArenaL2Bits split an arena's index into the two
	// levels of arenas (runtime.arenaL1Bits, runtime.arenaL2Bits).
	ArenaL1Bits, ArenaL2Bits int64
	// HeapArenaBytes is the size of an arena (runtime.heapArenaBytes),
	// PageSize the runtime's page (runtime.pageSize: not the kernel's).
	HeapArenaBytes, PageSize int64

	// ArenaSpans and ArenaPageInUse are the offsets in runtime.heapArena
	// of spans ([pagesPerArena]*mspan) and pageInUse (a bit per page,
	// set on the first page of each span in use).
	ArenaSpans, ArenaPageInUse int64

	// Span is runtime.mspan.
	Span SpanLayout
	// Special is runtime.special, the records of a span's specials
	// list (finalizers, cleanups, weak handles, profiling samples).
	Special SpecialLayout
	// Queues are where finalizers and cleanups wait to run, once the
	// sweeper took them off their objects.
	Queues QueueLayout
	// Objects are the runtime's own structures in the heap whose
	// pointer words a walk can know (Ps, Ms, gs).
	Objects ObjectsLayout
	// Bits is where the runtime keeps which words of heap objects hold
	// pointers.
	Bits HeapBitsLayout
	// SpanInUse is runtime.mSpanInUse, the state of a span of heap
	// objects.
	SpanInUse int64
}

// SpanLayout is where runtime.mspan's fields are.
type SpanLayout struct {
	// StartAddr is the span's first byte; NPages its length in runtime
	// pages (uintptr each).
	StartAddr, NPages int64
	// ElemSize is the size of its objects (uintptr), NElems how many it
	// holds (uint16 from Go 1.22, uintptr before: NElemsSize says).
	ElemSize, NElems, NElemsSize int64
	// FreeIndex (the same type as NElems) and AllocBits (a pointer to a
	// bit per object): an object is allocated when its index is below
	// FreeIndex or its bit is set.
	FreeIndex, AllocBits int64
	// SpanClass is its size class shifted up one, its low bit set for
	// noscan spans (1 byte); State its mSpanState (1 byte).
	SpanClass, State int64
	// Specials is the offset of specials, the list of the span's
	// special records.
	Specials int64
}

// heapLayoutFromDWARF fills the heap layout; what is missing leaves it
// unknown with the reason, without failing the rest of the layout.
func heapLayoutFromDWARF(d *Debug) HeapLayout {
	h, err := heapLayout(d)
	if err != nil {
		return HeapLayout{Reason: err.Error()}
	}
	h.Known = true
	return h
}

func heapLayout(d *Debug) (HeapLayout, error) {
	var h HeapLayout
	var ok bool
	if h.MHeap, ok = d.Variable("runtime.mheap_"); !ok {
		return h, fmt.Errorf("no runtime.mheap_ in DWARF")
	}
	for _, c := range []struct {
		dst  *int64
		name string
	}{{&h.ArenaL1Bits, "runtime.arenaL1Bits"}, {&h.ArenaL2Bits, "runtime.arenaL2Bits"},
		{&h.HeapArenaBytes, "runtime.heapArenaBytes"}, {&h.PageSize, "runtime.pageSize"}, {&h.SpanInUse, "runtime.mSpanInUse"}} {
		if *c.dst, ok = d.Constant(c.name); !ok {
			return h, fmt.Errorf("no constant %s in DWARF", c.name)
		}
	}
	mheap, err := d.Struct("runtime.mheap")
	if err != nil {
		return h, err
	}
	arenas := []string{"heapArenas"} // Go 1.25+
	if _, _, err := FieldOffset(mheap, "heapArenas"); err != nil {
		arenas = []string{"allArenas"}
	}
	if err := readFields(mheap, "runtime.mheap", []fieldSpec{
		{&h.Arenas, []string{"arenas"}, 8 << h.ArenaL1Bits, false},
		{&h.AllArenas, arenas, 24, false},
	}); err != nil {
		return h, err
	}
	arena, err := d.Struct("runtime.heapArena")
	if err != nil {
		return h, err
	}
	pagesPerArena := h.HeapArenaBytes / h.PageSize
	if err := readFields(arena, "runtime.heapArena", []fieldSpec{
		{&h.ArenaSpans, []string{"spans"}, 8 * pagesPerArena, false},
		{&h.ArenaPageInUse, []string{"pageInUse"}, pagesPerArena / 8, false},
	}); err != nil {
		return h, err
	}
	span, err := d.Struct("runtime.mspan")
	if err != nil {
		return h, err
	}
	s := &h.Span
	if err := readFields(span, "runtime.mspan", []fieldSpec{
		{&s.StartAddr, []string{"startAddr"}, 8, false},
		{&s.NPages, []string{"npages"}, 8, false},
		{&s.ElemSize, []string{"elemsize"}, 8, false},
		{&s.NElems, []string{"nelems"}, 0, false},
		{&s.FreeIndex, []string{"freeindex"}, 0, false},
		{&s.AllocBits, []string{"allocBits"}, 8, false},
		{&s.SpanClass, []string{"spanclass"}, 1, false},
		{&s.State, []string{"state"}, 1, false},
		{&s.Specials, []string{"specials"}, 8, false},
	}); err != nil {
		return h, err
	}
	if h.Special, err = specialLayout(d); err != nil {
		return h, err
	}
	if h.Queues, err = queueLayout(d); err != nil {
		return h, err
	}
	if h.Objects, err = objectsLayout(d); err != nil {
		return h, err
	}
	h.Bits = heapBitsFromDWARF(d)
	_, nt, _ := FieldOffset(span, "nelems")
	_, ft, _ := FieldOffset(span, "freeindex")
	if s.NElemsSize = nt.Size(); ft.Size() != s.NElemsSize || (s.NElemsSize != 2 && s.NElemsSize != 8) {
		return h, fmt.Errorf("runtime.mspan: nelems of %d bytes, freeindex of %d: gi reads 2 or 8, the same", nt.Size(), ft.Size())
	}
	return h, nil
}

// specialLayout reads runtime.special, the finalizer and cleanup kinds
// and their records' sizes.
func specialLayout(d *Debug) (SpecialLayout, error) {
	var sp SpecialLayout
	st, err := d.Struct("runtime.special")
	if err != nil {
		return sp, err
	}
	if err := readFields(st, "runtime.special", []fieldSpec{
		{&sp.Next, []string{"next"}, 8, false},
		{&sp.Offset, []string{"offset"}, 0, false},
		{&sp.Kind, []string{"kind"}, 1, false},
	}); err != nil {
		return sp, err
	}
	_, ot, _ := FieldOffset(st, "offset")
	if sp.OffsetSize = ot.Size(); sp.OffsetSize != 2 && sp.OffsetSize != 8 {
		return sp, fmt.Errorf("runtime.special.offset is %d bytes, gi reads 2 or 8", sp.OffsetSize)
	}
	var ok bool
	if sp.KindFinalizer, ok = d.Constant("runtime._KindSpecialFinalizer"); !ok {
		return sp, fmt.Errorf("no constant runtime._KindSpecialFinalizer in DWARF")
	}
	if sp.KindCleanup, ok = d.Constant("runtime._KindSpecialCleanup"); !ok {
		sp.KindCleanup = Missing
	}
	for _, name := range []string{"runtime.specialfinalizer", "runtime.specialCleanup"} {
		if rec, err := d.Struct(name); err == nil {
			sp.RecordSize = max(sp.RecordSize, rec.Size())
		} else if name == "runtime.specialfinalizer" {
			return sp, err
		}
	}
	return sp, nil
}

// ObjectsLayout finds the runtime's Ps and Ms in the heap and says
// which of their words, and of a g's, hold pointers.
type ObjectsLayout struct {
	// AllP and AllM are the link-time addresses of runtime.allp (a
	// slice of *p) and runtime.allm (the chain of every m, through
	// MAllLink); 0 in the generated table.
	AllP, AllM uint64
	MAllLink   int64
	// P, M and G are the pointer masks of runtime.p, runtime.m and
	// runtime.g.
	P, M, G PointerMask
}

// objectsLayout reads where the Ps and Ms are and the masks.
func objectsLayout(d *Debug) (ObjectsLayout, error) {
	var o ObjectsLayout
	var ok bool
	if o.AllP, ok = d.Variable("runtime.allp"); !ok {
		return o, fmt.Errorf("no runtime.allp in DWARF")
	}
	if o.AllM, ok = d.Variable("runtime.allm"); !ok {
		return o, fmt.Errorf("no runtime.allm in DWARF")
	}
	m, err := d.Struct("runtime.m")
	if err != nil {
		return o, err
	}
	if err := readFields(m, "runtime.m", []fieldSpec{{&o.MAllLink, []string{"alllink"}, 8, false}}); err != nil {
		return o, err
	}
	for _, x := range []struct {
		dst  *PointerMask
		name string
	}{{&o.P, "runtime.p"}, {&o.M, "runtime.m"}, {&o.G, "runtime.g"}} {
		if *x.dst, err = pointerMask(d, x.name); err != nil {
			return o, err
		}
	}
	return o, nil
}

// QueueLayout is where the runtime keeps the finalizers and cleanups
// it queued to run: blocks outside the heap, chained from a global,
// which its collector scans as roots.
type QueueLayout struct {
	// AllFin is the link-time address of runtime.allfin, the chain of
	// every finBlock (0 in the generated table: stripped binaries find
	// it in their code); FinBlockAllLink the offset of its link in a
	// block, FinBlockSize a block's size.
	AllFin                        uint64
	FinBlockAllLink, FinBlockSize int64
	// GCCleanups is the link-time address of runtime.gcCleanups (Go
	// 1.25+, 0 before and in the table), CleanupQueueAll the offset of
	// its chain of every cleanupBlock (Missing before 1.25),
	// CleanupBlockAllLink the offset of a block's link, CleanupBlockSize
	// a block's size.
	GCCleanups                                             uint64
	CleanupQueueAll, CleanupBlockAllLink, CleanupBlockSize int64
}

// queueLayout reads where finalizers and cleanups wait to run.
func queueLayout(d *Debug) (QueueLayout, error) {
	q := QueueLayout{CleanupQueueAll: Missing, CleanupBlockAllLink: Missing}
	var ok bool
	if q.AllFin, ok = d.Variable("runtime.allfin"); !ok {
		return q, fmt.Errorf("no runtime.allfin in DWARF")
	}
	fb, err := d.Struct("runtime.finBlock") // Go 1.23+
	if err != nil {
		if fb, err = d.Struct("runtime.finblock"); err != nil {
			return q, err
		}
	}
	if err := readFields(fb, "runtime.finBlock", []fieldSpec{{&q.FinBlockAllLink, []string{"alllink"}, 8, false}}); err != nil {
		return q, err
	}
	q.FinBlockSize = fb.Size()
	cq, err := d.Struct("runtime.cleanupQueue")
	if err != nil {
		return q, nil // before Go 1.25: cleanups wait as finalizers
	}
	if q.GCCleanups, ok = d.Variable("runtime.gcCleanups"); !ok {
		return q, fmt.Errorf("no runtime.gcCleanups in DWARF")
	}
	cb, err := d.Struct("runtime.cleanupBlock")
	if err != nil {
		return q, err
	}
	if err := readFields(cq, "runtime.cleanupQueue", []fieldSpec{{&q.CleanupQueueAll, []string{"all"}, 8, false}}); err != nil {
		return q, err
	}
	if err := readFields(cb, "runtime.cleanupBlock", []fieldSpec{{&q.CleanupBlockAllLink, []string{"cleanupBlockHeader", "alllink"}, 8, false}}); err != nil {
		return q, err
	}
	q.CleanupBlockSize = cb.Size()
	return q, nil
}

// SpecialLayout is where runtime.special's fields are, and the kinds
// of special whose object the garbage collector treats as a root.
type SpecialLayout struct {
	// Next (a pointer), Offset (the object's offset in its span, of
	// OffsetSize bytes) and Kind (1 byte).
	Next, Offset, OffsetSize, Kind int64
	// KindFinalizer is runtime._KindSpecialFinalizer; KindCleanup is
	// runtime._KindSpecialCleanup (Go 1.24+), Missing before.
	KindFinalizer, KindCleanup int64
	// RecordSize is the size of the largest of those kinds' records
	// (runtime.specialfinalizer, runtime.specialCleanup): the words
	// that hold the finalizer or cleanup function and its arguments'
	// types.
	RecordSize int64
}

// ArenaBaseOffset returns runtime.arenaBaseOffset for arch (no DWARF
// holds it): what the heap's arena index counts addresses from. On amd64
// the bottom of the upper half of a 48-bit address space, so that its
// negative addresses index first; 0 on arm64.
func ArenaBaseOffset(arch string) uint64 {
	if arch == "amd64" {
		return 0xffff800000000000
	}
	return 0
}
