package core

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gi-debug/gi/proc"
)

// image is memory as a map of pages, changed by the test between reads.
type image struct {
	base  uint64
	bytes []byte
}

func (m *image) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < m.base || addr+uint64(len(p)) > m.base+uint64(len(m.bytes)) {
		return 0, fmt.Errorf("%#x unmapped", addr)
	}
	return copy(p, m.bytes[addr-m.base:]), nil
}

func (m *image) ReadBatch(ranges []proc.Range, dst []byte) error {
	var failed []int
	off := 0
	for i, r := range ranges {
		if _, err := m.ReadAt(dst[off:off+r.Len], r.Addr); err != nil {
			failed = append(failed, i)
		}
		off += r.Len
	}
	if failed != nil {
		return &proc.BatchError{Failed: failed, First: fmt.Errorf("unmapped")}
	}
	return nil
}

// TestRecorderStages records reads before, in and after a stop while
// the memory changes between them, and checks the core's bytes: a byte
// read in the stop as the stop read it, over one read before it, over
// one read after; the rest of each page as the memory is when the core
// is written; pages whole, merged where they touch.
func TestRecorderStages(t *testing.T) {
	const base = 0x10000
	m := &image{base: base, bytes: bytes.Repeat([]byte{'a'}, 4*pageSize)}
	r := NewRecorder(m)
	defer r.Close()
	read := func(addr uint64, n int) {
		if err := r.ReadBatch([]proc.Range{{Addr: addr, Len: n}}, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	read(base+10, 10) // before the stop: "a"
	copy(m.bytes[10:], "bbbbbbbbbbbbbbbbbbbb")
	r.Stopping()
	buf := make([]byte, 5)
	if err := r.ReadBatch([]proc.Range{{Addr: base + 15, Len: 5}}, buf); err != nil { // in the stop: "b", held
		t.Fatal(err)
	}
	r.Keep(base+3*pageSize, []byte("kept"))
	r.Resumed()
	copy(buf, "zzzzz") // the reader's buffer reused after the stop: the core keeps what the stop read
	copy(m.bytes[10:], "cccccccccccccccccccccccccccccc")
	read(base+12, 2) // after the stop: "c", outranked by the earlier reads
	copy(m.bytes[100:], "dd")

	ranges, after, err := r.Layout(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 2 || ranges[0] != (proc.Range{Addr: base, Len: pageSize}) || ranges[1] != (proc.Range{Addr: base + 3*pageSize, Len: pageSize}) {
		t.Fatalf("layout %+v, want the first and fourth pages", ranges)
	}
	if after != 2*pageSize-10-4 {
		t.Errorf("%d bytes read after the stop, want %d", after, 2*pageSize-14)
	}
	page := make([]byte, pageSize)
	r.Fill(base, page)
	want := append([]byte(nil), m.bytes[:pageSize]...)
	copy(want[10:], "aaaaabbbbb") // before the stop, then the stop's over it
	if !bytes.Equal(page, want) {
		t.Errorf("page 0: %q..., want %q...", page[:40], want[:40])
	}
	if page[100] != 'd' {
		t.Errorf("byte 100 %q: the rest of a page is read when the core is written", page[100])
	}
	r.Fill(base+3*pageSize, page)
	if !bytes.HasPrefix(page, []byte("kept")) {
		t.Errorf("page 3 starts %q, want what Keep kept", page[:8])
	}

	// A page the process no longer has keeps its recorded bytes.
	m.bytes = m.bytes[:pageSize]
	r.Fill(base+3*pageSize, page)
	if !bytes.HasPrefix(page, []byte("kept")) || page[4] != 0 {
		t.Errorf("unmapped page 3 starts %q, want its kept bytes then zeros", page[:8])
	}
}

// TestMergeSpans merges touching spans, and across the smallest gaps
// until the limit holds, refusing past 1 MiB gaps.
func TestMergeSpans(t *testing.T) {
	p := uint64(pageSize)
	got, err := mergeSpans([]span{{5 * p, 6 * p}, {0, p}, {p, 2 * p}, {10 * p, 11 * p}}, 10)
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]span{{0, 2 * p}, {5 * p, 6 * p}, {10 * p, 11 * p}}) {
		t.Errorf("merge: %v, %v", got, err)
	}
	got, err = mergeSpans([]span{{0, p}, {3 * p, 4 * p}, {10 * p, 11 * p}}, 2)
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]span{{0, 4 * p}, {10 * p, 11 * p}}) {
		t.Errorf("merge to 2: %v, %v", got, err)
	}
	if _, err := mergeSpans([]span{{0, p}, {1 << 40, 1<<40 + p}}, 1); err == nil {
		t.Error("merged across a terabyte")
	}
}
