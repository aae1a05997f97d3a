package heap

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// imageLayout is a small heap layout for images made by hand: arenas of
// 64 KiB (8 pages of 8 KiB), one level of 256 arenas, on arm64 (arena
// addresses count from 0).
var imageLayout = runtimelayout.HeapLayout{
	Known: true, MHeap: 0x1000, Arenas: 0, AllArenas: 16, ArenaL1Bits: 0, ArenaL2Bits: 8,
	HeapArenaBytes: 64 << 10, PageSize: 8 << 10, ArenaSpans: 0, ArenaPageInUse: 64,
	Span:      runtimelayout.SpanLayout{StartAddr: 0, NPages: 8, ElemSize: 16, NElems: 24, NElemsSize: 8, FreeIndex: 32, AllocBits: 40, SpanClass: 48, State: 49, Specials: 56},
	Special:   runtimelayout.SpecialLayout{Next: 0, Offset: 8, OffsetSize: 8, Kind: 16, KindFinalizer: 2, KindCleanup: 7, RecordSize: 32},
	SpanInUse: 1,
}

// image is memory at addresses 0 to len(image): what is past it cannot
// be read.
type image []byte

func (m image) ReadAt(p []byte, addr uint64) (int, error) {
	if addr > uint64(len(m)) || uint64(len(p)) > uint64(len(m))-addr {
		return 0, fmt.Errorf("read %d bytes at %#x: outside the image", len(p), addr)
	}
	return copy(p, m[addr:]), nil
}

func (m image) ReadBatch(ranges []proc.Range, dst []byte) error {
	off := 0
	for _, r := range ranges {
		if _, err := m.ReadAt(dst[off:off+r.Len], r.Addr); err != nil {
			return err
		}
		off += r.Len
	}
	return nil
}

// heapImage makes an image of a heap of one arena (index 1, at 64 KiB)
// with two spans in use: a small-object span of two pages (48-byte
// slots, 3 allocated below the free index and one above, a finalizer on
// its second slot) and a noscan large object of one page.
func heapImage() image {
	m := make(image, 0x4000)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(m[addr:], v) }
	put(0x1000, 0x2000)            // mheap_.arenas[0]: the L2 array
	put(0x1010, 0x1200)            // mheap_.allArenas: [1]
	put(0x1018, 1)                 //
	put(0x1200, 1)                 //
	put(0x2000+8*1, 0x3000)        // arenas[0][1]: the heapArena
	put(0x3000, 0x3100)            // spans[0]
	put(0x3008, 0x3100)            // spans[1]
	put(0x3010, 0x3180)            // spans[2]
	m[0x3040] = 0b101              // pageInUse: pages 0 and 2
	put(0x3100, 0x10000)           // span A: start
	put(0x3108, 2)                 // npages
	put(0x3110, 48)                // elemsize
	put(0x3118, 341)               // nelems
	put(0x3120, 3)                 // freeindex
	put(0x3128, 0x3200)            // allocBits
	m[0x3130], m[0x3131] = 5<<1, 1 // spanclass 5, in use
	put(0x3138, 0x3300)            // specials
	put(0x3180, 0x14000)           // span B: start
	put(0x3188, 1)                 // npages
	put(0x3190, 8192)              // elemsize
	put(0x3198, 1)                 // nelems
	put(0x31a0, 1)                 // freeindex
	put(0x31a8, 0x3240)            // allocBits
	m[0x31b0], m[0x31b1] = 1, 1    // class 0, noscan; in use
	m[0x3200] = 1 << 5             // slot 5 allocated
	put(0x3300, 0)                 // special: next
	put(0x3308, 48)                // offset: slot 1
	m[0x3310] = 2                  // a finalizer
	put(0x3318, 0x77)              // its function
	return m
}

// TestReadImage reads the heap of heapImage: its two spans, their slots
// and which are allocated, the finalizer root.
func TestReadImage(t *testing.T) {
	h, err := Read(heapImage(), &imageLayout, "arm64", 0, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Spans) != 2 {
		t.Fatalf("%d spans, want 2", len(h.Spans))
	}
	a, b := &h.Spans[0], &h.Spans[1]
	if a.Start != 0x10000 || a.Pages != 2 || a.ElemSize != 48 || a.NElems != 341 || a.Class != 5 || a.Noscan || a.AllocatedCount() != 4 || !a.Allocated(5) || a.Allocated(4) {
		t.Errorf("span A: %+v", *a)
	}
	if b.Start != 0x14000 || !b.Noscan || b.Class != 0 || !b.Allocated(0) {
		t.Errorf("span B: %+v", *b)
	}
	if len(a.Roots) != 1 || a.Roots[0].Object != 0x10000+48 || a.Roots[0].Words[3] != 0x77 {
		t.Errorf("roots %+v, want the finalizer of slot 1", a.Roots)
	}
	if k, ok := h.Find(0x10000 + 100); !ok || k != 0 {
		t.Errorf("Find in span A: %d %v", k, ok)
	}
	if n := h.ScanBytes(); n != 2*8192 {
		t.Errorf("%d bytes to scan, want span A's 16384", n)
	}
}

// FuzzReadHeap reads corrupted heap images: an error or a heap whose
// spans are sorted and self-consistent, never a panic or a hang, within
// the bounds given.
func FuzzReadHeap(f *testing.F) {
	f.Add([]byte(heapImage()))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Read(image(b), &imageLayout, "arm64", 0, Limits{Arenas: 16, Spans: 1024, Specials: 1024})
		if err != nil {
			return
		}
		for i := range h.Spans {
			s := &h.Spans[i]
			if i > 0 && s.Start < h.Spans[i-1].Start {
				t.Fatalf("spans out of order at %d", i)
			}
			if s.NElems <= 0 || s.ElemSize == 0 || len(s.allocBits) < (s.NElems+7)/8 {
				t.Fatalf("span %+v", *s)
			}
			s.AllocatedCount()
		}
	})
}
