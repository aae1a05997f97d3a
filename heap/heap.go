// Package heap reads a Go process's heap from outside: the runtime's
// arena index (runtime.mheap_), each arena's spans of objects, and which
// slots of a span hold allocated objects — from any memory image of the
// process (a live one's memory, a core file's) and the runtime layout of
// its binary (runtimelayout.HeapLayout) — and which words of each object
// hold pointers, by the runtime's own pointer maps (ReadPointers). It is
// the ground the leak detector of gi ps --leaks walks (issue #32); every
// loop over the target's memory is bounded (Limits, PointerOptions).
package heap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// Reader reads the process's memory: a few words at a time, and many
// ranges in one batch (*proc.Memory, a core file's memory, *proc.Tracked).
type Reader interface {
	ReadAt(p []byte, addr uint64) (int, error)
	ReadBatch(ranges []proc.Range, dst []byte) error
}

// Limits bound a walk of the heap.
type Limits struct {
	// Arenas and Spans bound the arenas and spans read (0: the
	// defaults, 1<<20 arenas — 64 TiB — and 1<<24 spans); Specials the
	// special records followed (0: 1<<24).
	Arenas, Spans, Specials int
}

// Span is a span of heap objects in use.
type Span struct {
	// Record is the address of its runtime.mspan.
	Record uint64
	// Start is its first byte, Pages its length in runtime pages.
	Start uint64
	Pages uint64
	// ElemSize is the size of its objects, NElems how many slots it has.
	ElemSize uint64
	NElems   int
	// Class is the size class (0: one large object), Noscan says its
	// objects hold no pointer.
	Class  uint8
	Noscan bool

	// Roots are the span's objects the garbage collector treats as
	// roots: those with a finalizer or a cleanup (their special
	// records, which hold the function, are in Roots too).
	Roots []Root

	freeIndex int
	allocBits []byte
	specials  uint64 // the first special record, 0 if none
	largeType uint64 // mspan.largeType (Go 1.22+), 0 if none or unknown
}

// Root is an object of a span with a finalizer or a cleanup: the
// garbage collector marks the function its special record holds and,
// for a finalizer only, what the object points to (not the object
// itself). A cleanup's object is not scanned (runtime.AddCleanup: it may
// be collected while its cleanup waits).
type Root struct {
	// Object is the object's address; Record the special record's.
	Object, Record uint64
	// Words are the words of the record (the function, the types of
	// its argument and results, or the cleanup's function and
	// argument).
	Words []uint64
	// Kind is the special's kind (runtime._KindSpecial*).
	Kind uint8
	// Finalizer says it is a finalizer's: what the object points to is
	// marked.
	Finalizer bool
}

// Allocated reports whether slot i holds an allocated object: below the
// span's free index every slot does; above it, the slots whose bit in
// allocBits is set (the runtime's own rule).
func (s *Span) Allocated(i int) bool {
	if i < 0 || i >= s.NElems {
		return false
	}
	return i < s.freeIndex || s.allocBits[i/8]&(1<<(i%8)) != 0
}

// AllocatedCount returns how many slots hold allocated objects.
func (s *Span) AllocatedCount() int {
	n := s.freeIndex
	for i := s.freeIndex; i < s.NElems; i++ {
		if s.allocBits[i/8]&(1<<(i%8)) != 0 {
			n++
		}
	}
	return n
}

// Object returns the slot holding addr and its first byte, if addr falls
// in one of the span's slots.
func (s *Span) Object(addr uint64) (slot int, start uint64, ok bool) {
	if addr < s.Start || s.ElemSize == 0 {
		return 0, 0, false
	}
	slot64 := (addr - s.Start) / s.ElemSize
	if slot64 >= uint64(s.NElems) {
		return 0, 0, false
	}
	return int(slot64), s.Start + slot64*s.ElemSize, true
}

// Heap is the spans of a process's heap, by address.
type Heap struct {
	Spans []Span
	// PageSize is the runtime's page: a span's length is Pages of it.
	PageSize uint64

	// arenas maps each arena's first byte to its heapArena record;
	// arenaBytes is an arena's size.
	arenas     map[uint64]uint64
	arenaBytes uint64
}

// SpanOf returns the span whose pages hold addr.
func (h *Heap) SpanOf(addr uint64) (*Span, bool) {
	k, ok := h.Find(addr)
	if !ok {
		return nil, false
	}
	return &h.Spans[k], true
}

// Find returns the index in Spans of the span whose pages hold addr.
func (h *Heap) Find(addr uint64) (int, bool) {
	i := sort.Search(len(h.Spans), func(i int) bool { return h.Spans[i].Start+h.Spans[i].Pages*h.PageSize > addr })
	if i == len(h.Spans) || addr < h.Spans[i].Start {
		return 0, false
	}
	return i, true
}

// arenaBatch is how many arenas' span maps Read reads at a time.
const arenaBatch = 64

// ErrNoHeapLayout means the binary does not describe the heap, or the
// address of runtime.mheap_ is unknown (a stripped binary).
var ErrNoHeapLayout = errors.New("the heap's layout is unknown")

// Read walks the heap: every arena of mheap_ (allArenas), every span in
// use of each (pageInUse, spans), and each span's allocation state. bias
// is the executable's load bias, arch its GOARCH.
func Read(mem Reader, l *runtimelayout.HeapLayout, arch string, bias uint64, lim Limits) (*Heap, error) {
	if !l.Known {
		return nil, fmt.Errorf("%w: %s", ErrNoHeapLayout, l.Reason)
	}
	if l.MHeap == 0 {
		return nil, fmt.Errorf("%w: no address of runtime.mheap_ (a stripped binary)", ErrNoHeapLayout)
	}
	if lim.Arenas == 0 {
		lim.Arenas = 1 << 20
	}
	if lim.Spans == 0 {
		lim.Spans = 1 << 24
	}
	if lim.Specials == 0 {
		lim.Specials = 1 << 24
	}
	r := reader{mem: mem}
	mheap := l.MHeap + bias
	hdr := r.bytes(mheap+uint64(l.AllArenas), 16)
	ptr, n := le.Uint64(hdr), le.Uint64(hdr[8:])
	if r.err != nil {
		return nil, fmt.Errorf("read mheap_'s arenas: %w", r.err)
	}
	if n > uint64(lim.Arenas) {
		return nil, fmt.Errorf("%d arenas, more than the bound of %d", n, lim.Arenas)
	}
	idxs := r.bytes(ptr, int(n)*8)
	if r.err != nil {
		return nil, fmt.Errorf("read the arena list: %w", r.err)
	}
	pagesPerArena := uint64(l.HeapArenaBytes / l.PageSize)
	arenaShift := uint(bits.TrailingZeros64(uint64(l.HeapArenaBytes)))
	h := &Heap{PageSize: uint64(l.PageSize), arenas: make(map[uint64]uint64, n), arenaBytes: uint64(l.HeapArenaBytes)}
	// Each arena's heapArena, through the two-level index.
	type arenaAt struct {
		index, base, addr uint64
	}
	arenas := make([]arenaAt, 0, n)
	l2Arrays := map[uint64]uint64{}
	for i := uint64(0); i < n; i++ {
		ai := le.Uint64(idxs[8*i:])
		l1, l2 := ai>>uint(l.ArenaL2Bits), ai&(1<<uint(l.ArenaL2Bits)-1)
		if l1 >= 1<<uint(l.ArenaL1Bits) {
			return nil, fmt.Errorf("arena index %#x outside the index", ai)
		}
		l2Array, ok := l2Arrays[l1]
		if !ok {
			l2Array = r.word(mheap + uint64(l.Arenas) + 8*l1)
			l2Arrays[l1] = l2Array
		}
		arena := r.word(l2Array + 8*l2)
		if r.err != nil || arena == 0 {
			return nil, fmt.Errorf("arena %#x: no heapArena (%v)", ai, r.err)
		}
		arenas = append(arenas, arenaAt{ai, ai<<arenaShift + runtimelayout.ArenaBaseOffset(arch), arena})
		h.arenas[arenas[len(arenas)-1].base] = arena
	}
	// Their page bitmaps and span maps, a batch of arenas at a time (a
	// batch is 4 MiB of maps), and the records of the pages that begin
	// a span in use.
	inUseLen, spansLen := int(pagesPerArena/8), int(pagesPerArena*8)
	var records, starts []uint64
	var maps []byte
	for from := 0; from < len(arenas); from += arenaBatch {
		batch := arenas[from:min(from+arenaBatch, len(arenas))]
		ranges := make([]proc.Range, 0, 2*len(batch))
		for _, a := range batch {
			ranges = append(ranges, proc.Range{Addr: a.addr + uint64(l.ArenaPageInUse), Len: inUseLen}, proc.Range{Addr: a.addr + uint64(l.ArenaSpans), Len: spansLen})
		}
		if n := len(batch) * (inUseLen + spansLen); cap(maps) < n {
			maps = make([]byte, n)
		}
		maps = maps[:len(batch)*(inUseLen+spansLen)]
		if err := mem.ReadBatch(ranges, maps); err != nil {
			return nil, fmt.Errorf("read the arenas' span maps: %w", err)
		}
		for i, a := range batch {
			m := maps[i*(inUseLen+spansLen):]
			inUse, spans := m[:inUseLen], m[inUseLen:inUseLen+spansLen]
			for page := uint64(0); page < pagesPerArena; page++ {
				if inUse[page/8]&(1<<(page%8)) == 0 {
					continue
				}
				if len(records) >= lim.Spans {
					return nil, fmt.Errorf("more than the bound of %d spans", lim.Spans)
				}
				records = append(records, le.Uint64(spans[8*page:]))
				starts = append(starts, a.base+page*uint64(l.PageSize))
			}
		}
	}
	S := &l.Span
	recLen := int(max(S.StartAddr, S.NPages, S.ElemSize, S.FreeIndex, S.NElems, S.AllocBits, S.SpanClass, S.State, S.Specials, l.Bits.SpanLargeType) + 8)
	recs := make([]byte, len(records)*recLen)
	ranges := make([]proc.Range, 0, len(records))
	for _, a := range records {
		ranges = append(ranges, proc.Range{Addr: a, Len: recLen})
	}
	if err := mem.ReadBatch(ranges, recs); err != nil {
		return nil, fmt.Errorf("read the span records: %w", err)
	}
	h.Spans = make([]Span, len(records))
	var bitsAt []proc.Range
	bitsLen := 0
	for i, a := range records {
		s, allocBits, err := decodeSpan(l, a, recs[i*recLen:(i+1)*recLen])
		if err != nil {
			return nil, err
		}
		if s.Start != starts[i] {
			return nil, fmt.Errorf("span %#x starts at %#x, its page at %#x", s.Record, s.Start, starts[i])
		}
		h.Spans[i] = s
		bitsAt = append(bitsAt, proc.Range{Addr: allocBits, Len: (s.NElems + 7) / 8})
		bitsLen += (s.NElems + 7) / 8
	}
	// Their allocation bits, in one batch.
	allBits := make([]byte, bitsLen)
	if err := mem.ReadBatch(bitsAt, allBits); err != nil {
		return nil, fmt.Errorf("read the spans' allocation bits: %w", err)
	}
	off := 0
	for i := range h.Spans {
		h.Spans[i].allocBits = allBits[off : off+bitsAt[i].Len : off+bitsAt[i].Len]
		off += bitsAt[i].Len
	}
	specials := 0
	for i := range h.Spans {
		s := &h.Spans[i]
		for rec := s.specials; rec != 0; {
			if specials++; specials > lim.Specials {
				return nil, fmt.Errorf("more than the bound of %d special records", lim.Specials)
			}
			b := r.bytes(rec, int(max(l.Special.Next+8, l.Special.Offset+l.Special.OffsetSize, l.Special.Kind+1)))
			if r.err != nil {
				return nil, fmt.Errorf("span %#x's specials: %w", s.Record, r.err)
			}
			off := uint64(le.Uint16(b[l.Special.Offset:]))
			if l.Special.OffsetSize == 8 {
				off = le.Uint64(b[l.Special.Offset:])
			}
			kind := int64(b[l.Special.Kind])
			if off >= s.Pages*h.PageSize {
				return nil, fmt.Errorf("span %#x: special %#x at offset %#x, past the span", s.Record, rec, off)
			}
			if kind == l.Special.KindFinalizer || (l.Special.KindCleanup != runtimelayout.Missing && kind == l.Special.KindCleanup) {
				root := Root{Object: s.Start + off, Record: rec, Kind: uint8(kind), Finalizer: kind == l.Special.KindFinalizer}
				words := r.bytes(rec, int(l.Special.RecordSize))
				if r.err != nil {
					return nil, fmt.Errorf("span %#x's special %#x: %w", s.Record, rec, r.err)
				}
				for i := 0; i+8 <= len(words); i += 8 {
					root.Words = append(root.Words, le.Uint64(words[i:]))
				}
				s.Roots = append(s.Roots, root)
			}
			rec = le.Uint64(b[l.Special.Next:])
		}
	}
	sort.Slice(h.Spans, func(i, j int) bool { return h.Spans[i].Start < h.Spans[j].Start })
	return h, nil
}

var le = binary.LittleEndian

// decodeSpan decodes the mspan record rec read at addr, and returns
// where its allocation bits are.
func decodeSpan(l *runtimelayout.HeapLayout, addr uint64, rec []byte) (Span, uint64, error) {
	S := &l.Span
	small := func(off int64) int {
		if S.NElemsSize == 2 {
			return int(le.Uint16(rec[off:]))
		}
		return int(le.Uint64(rec[off:]))
	}
	s := Span{Record: addr, Start: le.Uint64(rec[S.StartAddr:]), Pages: le.Uint64(rec[S.NPages:]),
		ElemSize: le.Uint64(rec[S.ElemSize:]), NElems: small(S.NElems), freeIndex: small(S.FreeIndex)}
	s.specials = le.Uint64(rec[S.Specials:])
	if off := l.Bits.SpanLargeType; off >= 0 {
		s.largeType = le.Uint64(rec[off:])
	}
	class := rec[S.SpanClass]
	s.Class, s.Noscan = class>>1, class&1 != 0
	if state := rec[S.State]; int64(state) != l.SpanInUse {
		return Span{}, 0, fmt.Errorf("mspan %#x in state %d, not in use", addr, state)
	}
	pageBytes := uint64(l.PageSize)
	if s.Pages == 0 || s.Pages > 1<<30 || s.ElemSize == 0 || s.ElemSize > s.Pages*pageBytes || s.NElems <= 0 || uint64(s.NElems) > s.Pages*pageBytes/s.ElemSize || s.freeIndex > s.NElems {
		return Span{}, 0, fmt.Errorf("mspan %#x: %d pages of %d slots of %d bytes, free index %d: not a span", addr, s.Pages, s.NElems, s.ElemSize, s.freeIndex)
	}
	return s, le.Uint64(rec[S.AllocBits:]), nil
}

// reader reads, keeping the first error.
type reader struct {
	mem Reader
	err error
}

func (r *reader) bytes(addr uint64, n int) []byte {
	b := make([]byte, n)
	if r.err != nil {
		return b
	}
	if _, err := r.mem.ReadAt(b, addr); err != nil {
		r.err = fmt.Errorf("read %d bytes at %#x: %w", n, addr, err)
	}
	return b
}

func (r *reader) word(addr uint64) uint64 { return le.Uint64(r.bytes(addr, 8)) }
