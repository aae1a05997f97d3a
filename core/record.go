package core

import (
	"errors"
	"fmt"
	"sort"
	"sync"

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
// which outranks one read after. It is safe for concurrent reads.
type Recorder struct {
	mem Reader

	mu    sync.Mutex
	stage int // stageBefore, stageIn, stageAfter
	// pieces are the bytes read, by stage; in the stop a batch read's are
	// held in the reader's own buffer (held), copied once it is resumed.
	pieces [3][]piece
	held   []piece
	bytes  int64
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
	if copied {
		b = append([]byte(nil), b...)
	} else {
		r.held = append(r.held, piece{addr, b})
	}
	r.bytes += int64(len(b))
	if copied {
		r.pieces[r.stage] = append(r.pieces[r.stage], piece{addr, b})
	}
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
		r.pieces[stageIn] = append(r.pieces[stageIn], piece{p.addr, append([]byte(nil), p.data...)})
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

// Recorded returns the number of bytes recorded.
func (r *Recorder) Recorded() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Segments returns the memory of a core: the pages holding every byte
// recorded and the ranges extra, whole, each page as recorded — the
// stop's bytes over those read before it, over those read after — and
// where nothing recorded a byte of a page, as mem reads it now. filled
// counts the bytes read now that no recorded byte outranks. Pages mem cannot read now keep only their
// recorded bytes (zero elsewhere).
func (r *Recorder) Segments(extra []proc.Range) (segs []Segment, filled int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage == stageIn {
		return nil, 0, fmt.Errorf("core memory: the process is still stopped")
	}
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
	segs = make([]Segment, len(spans))
	ranges := make([]proc.Range, len(spans))
	total := 0
	for i, s := range spans {
		ranges[i] = proc.Range{Addr: s.lo, Len: int(s.hi - s.lo)}
		total += ranges[i].Len
	}
	buf := make([]byte, total)
	readErr := r.mem.ReadBatch(ranges, buf)
	var be *proc.BatchError
	failed := map[int]bool{}
	if errors.As(readErr, &be) {
		for _, i := range be.Failed {
			failed[i] = true
		}
	} else if readErr != nil {
		return nil, 0, fmt.Errorf("core memory: %w", readErr)
	}
	off := 0
	for i, s := range spans {
		segs[i] = Segment{Addr: s.lo, Data: buf[off : off+ranges[i].Len]}
		off += ranges[i].Len
		if failed[i] {
			filled += readPages(r.mem, segs[i])
		} else {
			filled += int64(ranges[i].Len)
		}
	}
	filled = max(0, filled-r.recordedSpan())
	// The stop's bytes last: they outrank the others.
	for _, stage := range []int{stageAfter, stageBefore, stageIn} {
		for _, p := range r.pieces[stage] {
			i := sort.Search(len(segs), func(i int) bool { return segs[i].Addr+uint64(len(segs[i].Data)) > p.addr })
			if i < len(segs) && p.addr >= segs[i].Addr {
				copy(segs[i].Data[p.addr-segs[i].Addr:], p.data)
			}
		}
	}
	return segs, filled, nil
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

// readPages reads a segment page by page (where a batch read of it
// failed), zeroing the pages that cannot be read; it returns the bytes read.
func readPages(mem Reader, s Segment) int64 {
	var n int64
	for off := 0; off < len(s.Data); off += pageSize {
		page := s.Data[off : off+pageSize]
		if k, err := mem.ReadAt(page, s.Addr+uint64(off)); err != nil || k != pageSize {
			clear(page)
			continue
		}
		n += pageSize
	}
	return n
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
