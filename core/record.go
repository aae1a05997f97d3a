package core

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/internal/hugemem"
	"github.com/gi-debug/gi/proc"
)

// pageSize is the page size of the cores gi writes (amd64's and the
// arm64 kernels' gi supports: 4 KiB).
const pageSize = 4096

// maxSegments bounds the PT_LOAD segments of a core gi writes: the ELF
// header counts program headers in 16 bits (PN_XNUM, the escape beyond,
// is not read by debug/elf, hence not by gi or Delve).
const maxSegments = 60000

// Reader is the memory a Recorder reads through: a live process's
// (*proc.Memory).
type Reader interface {
	ReadAt(p []byte, addr uint64) (int, error)
	ReadBatch(ranges []proc.Range, dst []byte) error
}

// Recorder reads a live process's memory for a reader that decodes it
// (inspect) and keeps every byte it read, as it read it, for a core file
// of what the reader saw. A snapshot's reads fall in three stages:
// before the stop (copies that the stop validates), in the stop, and after
// it (decoding); a byte read in the stop outranks one read before it,
// which outranks one read after. It is safe for concurrent reads. Close
// releases what it kept.
type Recorder struct {
	mem Reader

	mu    sync.Mutex
	stage int // stageBefore, stageIn, stageAfter
	// pieces are the bytes read, by stage; in the stop a batch read's are
	// held in the reader's own buffer (held), copied once it is resumed.
	pieces [3][]piece
	held   []piece
	seq    int // reads recorded
	// kept holds the copies, outside the Go heap: no collection walks
	// them, and no page of them faults one by one.
	kept   arena
	sorted bool
}

// The stages of a snapshot.
const (
	stageBefore = iota
	stageIn
	stageAfter
)

// piece is bytes read at addr.
type piece struct {
	addr uint64
	data []byte
	seq  int // when it was read, in the order of reads
}

// NewRecorder returns a Recorder reading through mem.
func NewRecorder(mem Reader) *Recorder { return &Recorder{mem: mem} }

// ReadAt reads as mem does, and records what it read.
func (r *Recorder) ReadAt(p []byte, addr uint64) (int, error) {
	n, err := r.mem.ReadAt(p, addr)
	if n > 0 {
		r.mu.Lock()
		r.keep(addr, p[:n], true)
		r.mu.Unlock()
	}
	return n, err
}

// ReadBatch reads as mem does, and records the ranges it read. In the
// stop it holds on to dst until Resumed, instead of copying it then:
// the caller must leave what it read there until the process is resumed.
func (r *Recorder) ReadBatch(ranges []proc.Range, dst []byte) error {
	err := r.mem.ReadBatch(ranges, dst)
	var failed map[int]bool
	var be *proc.BatchError
	if errors.As(err, &be) {
		failed = make(map[int]bool, len(be.Failed))
		for _, i := range be.Failed {
			failed[i] = true
		}
	} else if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	off := 0
	for i, rg := range ranges {
		if !failed[i] && rg.Len > 0 && off+rg.Len <= len(dst) {
			r.keep(rg.Addr, dst[off:off+rg.Len], r.stage != stageIn)
		}
		off += rg.Len
	}
	return err
}

// keep records b, read at addr: copied, or held if copy is false.
func (r *Recorder) keep(addr uint64, b []byte, copied bool) {
	if !copied {
		r.seq++
		r.held = append(r.held, piece{addr, b, r.seq})
		return
	}
	r.seq++
	r.pieces[r.stage] = append(r.pieces[r.stage], piece{addr, r.kept.copy(b), r.seq})
}

// Stats forwards the statistics of the memory it reads through, if it
// keeps any.
func (r *Recorder) Stats() proc.ReadStats {
	if s, ok := r.mem.(interface{ Stats() proc.ReadStats }); ok {
		return s.Stats()
	}
	return proc.ReadStats{}
}

// Stopping marks the start of the stop: reads from now on are the stop's.
func (r *Recorder) Stopping() {
	r.mu.Lock()
	r.stage = stageIn
	r.mu.Unlock()
}

// Resumed marks the end of the stop: what the stop's batch reads left in
// the reader's buffers is copied, and reads from now on come after.
func (r *Recorder) Resumed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.held {
		r.pieces[stageIn] = append(r.pieces[stageIn], piece{p.addr, r.kept.copy(p.data), p.seq})
	}
	r.held = nil
	r.stage = stageAfter
}

// Keep records bytes the caller read in the stop itself (Stopping to
// Resumed): memory a core holds beyond what the reader read.
func (r *Recorder) Keep(addr uint64, b []byte) {
	r.mu.Lock()
	r.keep(addr, b, true)
	r.mu.Unlock()
}

// Close releases the recorded bytes.
func (r *Recorder) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pieces, r.held = [3][]piece{}, nil
	r.kept.release()
}

// Layout returns the memory of a core, as page-aligned ranges by address:
// the pages holding every byte recorded and the ranges extra, whole.
// afterStop is how many of their bytes no recorded byte covers: Fill
// reads them from the process as it is now.
func (r *Recorder) Layout(extra []proc.Range) (ranges []proc.Range, afterStop int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage == stageIn {
		return nil, 0, fmt.Errorf("core memory: the process is still stopped")
	}
	r.sortPieces()
	var spans []span
	for _, ps := range r.pieces {
		for _, p := range ps {
			spans = append(spans, span{p.addr &^ (pageSize - 1), (p.addr + uint64(len(p.data)) + pageSize - 1) &^ (pageSize - 1)})
		}
	}
	for _, e := range extra {
		if e.Len > 0 {
			spans = append(spans, span{e.Addr &^ (pageSize - 1), (e.Addr + uint64(e.Len) + pageSize - 1) &^ (pageSize - 1)})
		}
	}
	if spans, err = mergeSpans(spans, maxSegments); err != nil {
		return nil, 0, err
	}
	for _, s := range spans {
		ranges = append(ranges, proc.Range{Addr: s.lo, Len: int(s.hi - s.lo)})
		afterStop += int64(s.hi - s.lo)
	}
	return ranges, max(0, afterStop-r.recordedSpan()), nil
}

// ReadOrder returns the indices of ranges (Layout's, sorted by address)
// in the order they were first read, those read in the stop first: the
// ranges no read fell in last.
func (r *Recorder) ReadOrder(ranges []proc.Range) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := make([]int, len(ranges))
	for i := range first {
		first[i] = math.MaxInt
	}
	for stage, ps := range r.pieces {
		// The stop's reads first (the goroutines' list, their g
		// structs), then those before it (stacks copied ahead), then
		// after.
		rank := 1 << 40
		if stage == stageIn {
			rank = 0
		}
		for _, p := range ps {
			i := sort.Search(len(ranges), func(i int) bool { return ranges[i].Addr+uint64(ranges[i].Len) > p.addr })
			if i < len(ranges) && ranges[i].Addr <= p.addr {
				first[i] = min(first[i], rank+p.seq)
			}
		}
	}
	order := make([]int, len(ranges))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return first[order[a]] < first[order[b]] })
	return order
}

// Fill fills dst with the memory at addr for the core: as the process
// holds it now, then the recorded bytes over it, those of the stop last
// (they outrank the others). Pages the process no longer has keep only
// their recorded bytes, zero elsewhere.
func (r *Recorder) Fill(addr uint64, dst []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortPieces()
	if err := r.mem.ReadBatch([]proc.Range{{Addr: addr, Len: len(dst)}}, dst); err != nil {
		readPages(r.mem, addr, dst)
	}
	end := addr + uint64(len(dst))
	for _, stage := range []int{stageAfter, stageBefore, stageIn} {
		ps := r.pieces[stage]
		// Pieces are sorted by address and none is longer than the
		// longest: the first that can reach addr is found by its start.
		from := sort.Search(len(ps), func(i int) bool { return ps[i].addr+r.longest(stage) > addr })
		for _, p := range ps[from:] {
			if p.addr >= end {
				break
			}
			lo, hi := max(p.addr, addr), min(p.addr+uint64(len(p.data)), end)
			if lo < hi {
				copy(dst[lo-addr:hi-addr], p.data[lo-p.addr:hi-p.addr])
			}
		}
	}
}

// sortPieces sorts each stage's pieces by address, once (a stable sort:
// of two reads of the same byte in a stage, the later stays later).
func (r *Recorder) sortPieces() {
	if r.sorted {
		return
	}
	for i := range r.pieces {
		ps := r.pieces[i]
		sort.SliceStable(ps, func(a, b int) bool { return ps[a].addr < ps[b].addr })
	}
	r.sorted = true
}

// longest returns the length of the longest piece of a stage.
func (r *Recorder) longest(stage int) uint64 {
	var n uint64
	for _, p := range r.pieces[stage] {
		n = max(n, uint64(len(p.data)))
	}
	return n
}

// recordedSpan returns the bytes of memory the recorded pieces cover.
func (r *Recorder) recordedSpan() int64 {
	var spans []span
	for _, ps := range r.pieces {
		for _, p := range ps {
			spans = append(spans, span{p.addr, p.addr + uint64(len(p.data))})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var n int64
	var end uint64
	for _, s := range spans {
		lo := max(s.lo, end)
		if s.hi > lo {
			n += int64(s.hi - lo)
			end = s.hi
		}
	}
	return n
}

// readPages reads dst at addr page by page (where one read of it
// failed), zeroing the pages that cannot be read.
func readPages(mem Reader, addr uint64, dst []byte) {
	for off := 0; off < len(dst); off += pageSize {
		page := dst[off:min(off+pageSize, len(dst))]
		if k, err := mem.ReadAt(page, addr+uint64(off)); err != nil || k != len(page) {
			clear(page)
		}
	}
}

// arena holds copies outside the Go heap, in populated mappings of 64 MiB
// or more (hugemem), the Go heap where the kernel refuses one.
type arena struct {
	free     []byte
	mappings [][]byte
}

// copy returns a copy of b.
func (a *arena) copy(b []byte) []byte {
	if len(b) > len(a.free) {
		n := max(64<<20, len(b))
		buf, whole, ok := hugemem.Populated(n)
		if ok {
			a.mappings = append(a.mappings, whole)
		} else {
			buf = make([]byte, n)
		}
		a.free = buf
	}
	out := a.free[:len(b):len(b)]
	copy(out, b)
	a.free = a.free[len(b):]
	return out
}

// release unmaps the arena's mappings.
func (a *arena) release() {
	for _, m := range a.mappings {
		unix.Munmap(m)
	}
	a.free, a.mappings = nil, nil
}

// span is the page-aligned range [lo, hi).
type span struct{ lo, hi uint64 }

// mergeSpans sorts spans and merges those that overlap or touch; if more
// than limit remain, it merges across the smallest gaps, up to 1 MiB,
// until limit do.
func mergeSpans(spans []span, limit int) ([]span, error) {
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	for gap := uint64(pageSize); len(out) > limit; gap *= 2 {
		if gap > 1<<20 {
			return nil, fmt.Errorf("core memory: %d separate ranges, more than a core's %d segments", len(out), limit)
		}
		merged := out[:1]
		for _, s := range out[1:] {
			if last := &merged[len(merged)-1]; s.lo-last.hi <= gap {
				last.hi = max(last.hi, s.hi)
				continue
			}
			merged = append(merged, s)
		}
		out = merged
	}
	return out, nil
}
