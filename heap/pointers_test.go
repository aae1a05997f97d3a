package heap

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/gi-debug/gi/runtimelayout"
)

// ptrImage is a heap image for the pointer maps' tests: arm64 addresses
// (arenas count from 0), arenas of 64 KiB (8 pages of 8 KiB), the heap
// in arenas 1 and 2 ([0x10000, 0x30000)), their heapArenas at 0x4000
// and 0x5000 (spans at 0, pageInUse at 64, the bitmap at 0x100: 1 KiB,
// a bit per word), span records from 0x6000, allocation bits from
// 0x7000, type descriptors from 0x8000.
type ptrImage struct {
	m      image
	l      runtimelayout.HeapLayout
	nspans int
}

// testSpan is a span of ptrImage.
type testSpan struct {
	start, pages, elemSize uint64
	nelems, freeIndex      int
	class                  uint8
	noscan                 bool
	largeType              uint64
}

// newPtrImage makes an empty image with the heap bits' layout b; the
// type descriptor's offsets are those of Go release goVersion's table
// (internal/abi.Type: Size_ 0, PtrBytes 8, TFlag 20, Kind_ 23, GCData 32;
// ArrayType.Elem 48, Len 64; StructType.Fields 56; StructField.Typ 8,
// Offset 16 of 24 bytes).
func newPtrImage(t *testing.T, goVersion string, arena bool) *ptrImage {
	t.Helper()
	v, err := runtimelayout.TableLayout(goVersion, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	p := &ptrImage{m: make(image, 0x30000)}
	p.l = runtimelayout.HeapLayout{
		Known: true, MHeap: 0x1000, Arenas: 0, AllArenas: 16, ArenaL1Bits: 0, ArenaL2Bits: 8,
		HeapArenaBytes: 64 << 10, PageSize: 8 << 10, ArenaSpans: 0, ArenaPageInUse: 64,
		Span:      runtimelayout.SpanLayout{StartAddr: 0, NPages: 8, ElemSize: 16, NElems: 24, NElemsSize: 8, FreeIndex: 32, AllocBits: 40, SpanClass: 48, State: 49, Specials: 56},
		Special:   runtimelayout.SpecialLayout{Next: 0, Offset: 8, OffsetSize: 8, Kind: 16, KindFinalizer: 2, KindCleanup: 7, RecordSize: 32},
		SpanInUse: 1,
		Bits:      v.Layout.Heap.Bits,
	}
	p.l.Bits.SpanLargeType = runtimelayout.Missing
	if !arena {
		p.l.Bits.SpanLargeType = 64
	}
	p.l.Bits.ArenaFormat = arena
	if arena {
		p.l.Bits.ArenaBitmap = 0x100
	}
	p.put(0x1000, 0x2000) // mheap_.arenas[0]: the L2 array
	p.put(0x1010, 0x1200) // mheap_.allArenas: arenas 1 and 2
	p.put(0x1018, 2)
	p.put(0x1200, 1)
	p.put(0x1208, 2)
	p.put(0x2000+8*1, 0x4000)
	p.put(0x2000+8*2, 0x5000)
	return p
}

func (p *ptrImage) put(addr, v uint64) { binary.LittleEndian.PutUint64(p.m[addr:], v) }

// span adds a span in use, all its slots allocated below freeIndex.
func (p *ptrImage) span(s testSpan) {
	rec := uint64(0x6000 + 0x100*p.nspans)
	p.nspans++
	for i := uint64(0); i < s.pages; i++ {
		page := s.start + i*8192
		ha := uint64(0x4000 + 0x1000*(page/0x10000-1))
		p.put(ha+8*(page%0x10000/8192), rec)
		if i == 0 {
			p.m[ha+64] |= 1 << (page % 0x10000 / 8192)
		}
	}
	p.put(rec, s.start)
	p.put(rec+8, s.pages)
	p.put(rec+16, s.elemSize)
	p.put(rec+24, uint64(s.nelems))
	p.put(rec+32, uint64(s.freeIndex))
	p.put(rec+40, 0x7000+0x100*uint64(p.nspans))
	p.m[rec+48] = s.class << 1
	if s.noscan {
		p.m[rec+48] |= 1
	}
	p.m[rec+49] = 1
	p.put(rec+64, s.largeType)
}

// arenaBit sets the arena bitmap's bit of the word at addr.
func (p *ptrImage) arenaBit(addr uint64) {
	ha := uint64(0x4000 + 0x1000*(addr/0x10000-1))
	w := addr % 0x10000 / 8
	p.m[ha+0x100+w/8] |= 1 << (w % 8)
}

// typ writes a type descriptor at addr: size, ptrBytes, its mask at
// gcdata, its flags and kind.
func (p *ptrImage) typ(addr, size, ptrBytes, gcdata uint64, tflag, kind uint8) {
	T := &p.l.Bits.Type
	p.put(addr+uint64(T.SizeField), size)
	p.put(addr+uint64(T.PtrBytes), ptrBytes)
	p.put(addr+uint64(T.GCData), gcdata)
	p.m[addr+uint64(T.TFlag)] = tflag
	p.m[addr+uint64(T.Kind)] = kind
}

// read reads the image's heap, copies it, and reads its pointer maps.
func (p *ptrImage) read(t *testing.T) (*Heap, *Pointers) {
	t.Helper()
	h, err := Read(p.m, &p.l, "arm64", 0, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Copy(p.m, h, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, ReadPointers(p.m, c, &p.l, PointerOptions{ExeLo: 0x8000, ExeHi: 0x9000})
}

// wantWords checks the pointer words of slot i of the span at start
// among its first n words.
func wantWords(t *testing.T, h *Heap, p *Pointers, start uint64, slot, n int, want ...uint64) {
	t.Helper()
	k, ok := h.Find(start)
	if !ok {
		t.Fatalf("no span at %#x", start)
	}
	m, why := p.Object(k, slot)
	if why != "" {
		t.Fatalf("span %#x slot %d: no map: %s", start, slot, why)
	}
	var got, each []uint64
	for w := 0; w < n; w++ {
		if m.Pointer(uint64(w)) {
			got = append(got, uint64(w))
		}
	}
	m.Each(uint64(n), func(w uint64) { each = append(each, w) })
	if fmt.Sprint(each) != fmt.Sprint(got) {
		t.Errorf("span %#x slot %d: Each gives %v, Pointer %v", start, slot, each, got)
	}
	if len(got) != len(want) {
		t.Errorf("span %#x slot %d: pointer words %v, want %v", start, slot, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("span %#x slot %d: pointer words %v, want %v", start, slot, got, want)
			return
		}
	}
}

// wantWhy checks that slot i of the span at start has no map, for a
// reason that holds part.
func wantWhy(t *testing.T, h *Heap, p *Pointers, start uint64, slot int, part string) {
	t.Helper()
	k, _ := h.Find(start)
	if _, why := p.Object(k, slot); !strings.Contains(why, part) {
		t.Errorf("span %#x slot %d: %q, want a reason with %q", start, slot, why, part)
	}
}

// TestPointersArenaBitmap: Go 1.20/1.21's bitmap, a bit per heap word in
// each arena's heapArena, read for a small span and for a large one that
// crosses from arena 1 into arena 2.
func TestPointersArenaBitmap(t *testing.T) {
	p := newPtrImage(t, "go1.20", true)
	// T{*int; uintptr; *int} in 24-byte slots: slot 1's bits 0b101.
	p.span(testSpan{start: 0x10000, pages: 1, elemSize: 24, nelems: 341, freeIndex: 3, class: 3})
	p.arenaBit(0x10000 + 24)
	p.arenaBit(0x10000 + 24 + 16)
	// A large object of 4 pages from 0x1c000 to 0x24000.
	p.span(testSpan{start: 0x1c000, pages: 4, elemSize: 4 * 8192, nelems: 1, freeIndex: 1})
	p.arenaBit(0x1c000)
	p.arenaBit(0x20000 + 8) // in arena 2
	h, ptrs := p.read(t)
	if ptrs.Format() != "the runtime's heap bitmap" {
		t.Fatalf("format %q (%s)", ptrs.Format(), ptrs.Unknown())
	}
	wantWords(t, h, ptrs, 0x10000, 1, 3, 0, 2)
	wantWords(t, h, ptrs, 0x10000, 0, 3)
	wantWords(t, h, ptrs, 0x1c000, 0, 4*1024, 0, 0x4000/8+1)
	// A free slot has its bits all the same (stale at worst).
	p.arenaBit(0x10000 + 24*5 + 8)
	h, ptrs = p.read(t)
	wantWords(t, h, ptrs, 0x10000, 5, 3, 1)
}

// TestPointersSpanBits: Go 1.22+'s bits at the end of a small span's page
// (128 bytes, a bit per word of the page), before the Green Tea
// collector's inline mark bits (128 more) for objects of 16 bytes and
// up, not for 8-byte ones.
func TestPointersSpanBits(t *testing.T) {
	for _, greenTea := range []bool{false, true} {
		p := newPtrImage(t, "go1.24", false)
		if greenTea {
			p = newPtrImage(t, "go1.26", false)
		}
		p.l.Bits.GreenTea = greenTea
		bits := uint64(8192 - 128) // where the bits begin
		if greenTea {
			bits -= 128
		}
		// make([]T, 5) of T{*int; uintptr; *int} in a 128-byte slot:
		// 0b0_101101101101101 (hbtest2's reading).
		p.span(testSpan{start: 0x10000, pages: 1, elemSize: 128, nelems: int(bits / 128), freeIndex: 2, class: 11})
		p.put(0x10000+bits, uint64(0b101101101101101)<<16) // slot 1 starts at word 16
		// 8-byte objects: all ones (initHeapBits), bits at the end
		// whatever the collector.
		p.span(testSpan{start: 0x12000, pages: 1, elemSize: 8, nelems: (8192 - 128) / 8, freeIndex: 4, class: 1})
		p.put(0x12000+8192-128, ^uint64(0))
		h, ptrs := p.read(t)
		if ptrs.Format() != "the runtime's heap bits, malloc headers and types" {
			t.Fatalf("format %q (%s)", ptrs.Format(), ptrs.Unknown())
		}
		wantWords(t, h, ptrs, 0x10000, 1, 16, 0, 2, 3, 5, 6, 8, 9, 11, 12, 14)
		wantWords(t, h, ptrs, 0x10000, 0, 16)
		wantWords(t, h, ptrs, 0x12000, 3, 1, 0)
	}
}

// TestPointersHeaders: Go 1.22+'s objects of 512 bytes to 32 KiB begin
// with a pointer to their type, whose mask repeats from the next word;
// large objects have theirs in mspan.largeType (nil while the object
// is allocated: unknown).
func TestPointersHeaders(t *testing.T) {
	p := newPtrImage(t, "go1.24", false)
	// T{*int; uintptr; *int}: 24 bytes, mask 0b101.
	p.typ(0x8000, 24, 24, 0x8100, 0, 25)
	p.m[0x8100] = 0b101
	// U{*int; [7]uintptr}: 64 bytes, one pointer.
	p.typ(0x8200, 64, 8, 0x8300, 0, 25)
	p.m[0x8300] = 0b1
	p.span(testSpan{start: 0x10000, pages: 1, elemSize: 1024, nelems: 8, freeIndex: 3, class: 40})
	p.put(0x10000, 0x8000)      // slot 0: a T (an array of them)
	p.put(0x10000+1024, 0)      // slot 1: no header yet
	p.put(0x10000+2048, 0x8200) // slot 2: a U
	p.put(0x10000+4096, 0x8000) // slot 4, free: a T's header left
	p.put(0x10000+5120, 0x8f00) // slot 5, free: anything
	p.typ(0x8f00, 24, 8, 0x8f80, 0, 25)
	p.m[0x8f80] = 0b1
	p.span(testSpan{start: 0x14000, pages: 2, elemSize: 16384, nelems: 1, freeIndex: 1, largeType: 0x8200})
	p.span(testSpan{start: 0x18000, pages: 2, elemSize: 16384, nelems: 1, freeIndex: 1})
	h, ptrs := p.read(t)
	wantWords(t, h, ptrs, 0x10000, 0, 8, 1, 3, 4, 6, 7)
	wantWhy(t, h, ptrs, 0x10000, 1, "no malloc header")
	wantWords(t, h, ptrs, 0x10000, 2, 128, 1, 9, 17, 25, 33, 41, 49, 57, 65, 73, 81, 89, 97, 105, 113, 121)
	wantWords(t, h, ptrs, 0x10000, 4, 4, 1, 3)
	wantWhy(t, h, ptrs, 0x10000, 5, "free slot")
	wantWords(t, h, ptrs, 0x14000, 0, 20, 0, 8, 16)
	wantWhy(t, h, ptrs, 0x18000, 0, "largeType")
}

// TestPointersOnDemand: Go 1.24+'s large types whose mask the runtime
// builds at their first scan (TFlagGCMaskOnDemand: GCData points to the
// mask's address): read where it is built, built here from the type's
// fields and array elements where it is not yet (0) or being built
// (runtime.inProgress, or anything in the executable).
func TestPointersOnDemand(t *testing.T) {
	p := newPtrImage(t, "go1.24", false)
	b := &p.l.Bits
	onDemand := uint8(b.TFlagGCMaskOnDemand)
	// *int and int.
	p.typ(0x8000, 8, 8, 0x8040, 0, 22)
	p.m[0x8040] = 1
	p.typ(0x8080, 8, 0, 0, 0, 2)
	// A = [3]*int, on demand, its mask's address at 0x8180.
	p.typ(0x8100, 24, 24, 0x8180, onDemand, uint8(b.KindArray))
	p.put(0x8100+uint64(b.Type.ArrayElem), 0x8000)
	p.put(0x8100+uint64(b.Type.ArrayLen), 3)
	// S{p *int; n int; a A; q int}: 48 bytes, on demand, its mask's
	// address at 0x8280 and its fields at 0x8300.
	p.typ(0x8200, 48, 40, 0x8280, onDemand, uint8(b.KindStruct))
	p.put(0x8200+uint64(b.Type.StructFields), 0x8300)
	p.put(0x8200+uint64(b.Type.StructFields)+8, 4)
	for i, f := range []struct{ typ, off uint64 }{{0x8000, 0}, {0x8080, 8}, {0x8100, 16}, {0x8080, 40}} {
		at := 0x8300 + uint64(i)*uint64(b.Type.FieldSize)
		p.put(at+uint64(b.Type.FieldType), f.typ)
		p.put(at+uint64(b.Type.FieldOffset), f.off)
	}
	// Three large objects of S: its mask not built, built (a wrong one
	// on purpose, to tell it was read: 0b1), being built.
	p.span(testSpan{start: 0x14000, pages: 1, elemSize: 8192, nelems: 1, freeIndex: 1, largeType: 0x8200})
	h, ptrs := p.read(t)
	wantWords(t, h, ptrs, 0x14000, 0, 12, 0, 2, 3, 4, 6, 8, 9, 10)

	p.put(0x8280, 0x20000) // the built mask, outside the executable
	p.put(0x20000, 0b1)
	p.span(testSpan{start: 0x20000 + 8192, pages: 1, elemSize: 8192, nelems: 1, freeIndex: 1})
	h, ptrs = p.read(t)
	wantWords(t, h, ptrs, 0x14000, 0, 12, 0, 6)

	p.put(0x8280, 0x8ff0) // in the executable: runtime.inProgress
	h, ptrs = p.read(t)
	wantWords(t, h, ptrs, 0x14000, 0, 12, 0, 2, 3, 4, 6, 8, 9, 10)
}

// TestPointersUnknown: a layout without pointer maps, or a stripped
// noallocheaders build's (its bitmap's offset unknown), or a Green Tea
// build whose inline mark bits' size is unknown, leaves the objects to
// a conservative scan, and says why; so does a type that cannot be read.
func TestPointersUnknown(t *testing.T) {
	p := newPtrImage(t, "go1.22", true)
	p.l.Bits.ArenaBitmap = runtimelayout.Missing
	p.span(testSpan{start: 0x10000, pages: 1, elemSize: 24, nelems: 341, freeIndex: 3, class: 3})
	h, ptrs := p.read(t)
	if ptrs.Format() != "" || !strings.Contains(ptrs.Unknown(), "noallocheaders") {
		t.Errorf("format %q, unknown %q", ptrs.Format(), ptrs.Unknown())
	}
	wantWhy(t, h, ptrs, 0x10000, 0, "noallocheaders")

	p = newPtrImage(t, "go1.25", false)
	p.l.Bits.GreenTea, p.l.Bits.InlineMarkBits = true, 0
	p.span(testSpan{start: 0x10000, pages: 1, elemSize: 48, nelems: 160, freeIndex: 3, class: 5})
	p.span(testSpan{start: 0x12000, pages: 1, elemSize: 1024, nelems: 8, freeIndex: 3, class: 40})
	p.put(0x12000, 0x2f000) // a header pointing past the image
	p.put(0x12400, 0x8000)  // to a descriptor that is no type
	p.typ(0x8000, 8, 16, 0, 0, 25)
	h, ptrs = p.read(t)
	wantWhy(t, h, ptrs, 0x10000, 0, "inline mark bits")
	wantWhy(t, h, ptrs, 0x12000, 0, "type 0x2f000")
	wantWhy(t, h, ptrs, 0x12000, 1, "not a type")

	p.l.Bits = runtimelayout.HeapBitsLayout{Reason: "no DWARF type runtime.heapArena"}
	_, ptrs = p.read(t)
	if !strings.Contains(ptrs.Unknown(), "runtime.heapArena") {
		t.Errorf("unknown %q", ptrs.Unknown())
	}
}

// FuzzReadPointers reads the pointer maps of corrupted heap images, with
// malloc headers (types anywhere, masks built on demand) and with an
// arena bitmap: a map or a reason for every slot, never a panic or a
// hang, within the bounds given.
func FuzzReadPointers(f *testing.F) {
	seed := func(arena bool) image {
		p := newPtrImage(&testing.T{}, "go1.24", arena)
		b := &p.l.Bits
		p.typ(0x8000, 8, 8, 0x8040, 0, 22)
		p.m[0x8040] = 1
		p.typ(0x8100, 24, 24, 0x8180, uint8(b.TFlagGCMaskOnDemand), uint8(b.KindArray))
		p.put(0x8100+uint64(b.Type.ArrayElem), 0x8000)
		p.put(0x8100+uint64(b.Type.ArrayLen), 3)
		p.span(testSpan{start: 0x10000, pages: 1, elemSize: 1024, nelems: 8, freeIndex: 3, class: 40})
		p.put(0x10000, 0x8100)
		p.span(testSpan{start: 0x12000, pages: 1, elemSize: 48, nelems: 160, freeIndex: 3, class: 5})
		p.span(testSpan{start: 0x14000, pages: 1, elemSize: 8192, nelems: 1, freeIndex: 1, largeType: 0x8100})
		p.arenaBit(0x12000)
		return p.m
	}
	f.Add([]byte(seed(false)), false)
	f.Add([]byte(seed(true)), true)
	f.Fuzz(func(t *testing.T, b []byte, arena bool) {
		p := newPtrImage(t, "go1.24", arena)
		h, err := Read(image(b), &p.l, "arm64", 0, Limits{Arenas: 16, Spans: 1024, Specials: 1024})
		if err != nil {
			return
		}
		c, err := Copy(image(b), h, 1<<20, nil)
		if err != nil {
			return
		}
		ptrs := ReadPointers(image(b), c, &p.l, PointerOptions{ExeLo: 0x8000, ExeHi: 0x9000, Types: 64, Steps: 1 << 16})
		for k := range h.Spans {
			s := &h.Spans[k]
			for i := 0; i < s.NElems && i < 64; i++ {
				m, why := ptrs.Object(k, i)
				if why != "" {
					continue
				}
				n := min(s.ElemSize/8, 4096)
				var want []uint64
				for w := uint64(0); w < n; w++ {
					if m.Pointer(w) {
						want = append(want, w)
					}
				}
				var got []uint64
				m.Each(n, func(w uint64) { got = append(got, w) })
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("span %d slot %d: Each %v, Pointer %v", k, i, got, want)
				}
			}
		}
	})
}
