package heap

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/internal/hugemem"
	"github.com/gi-debug/gi/proc"
)

// BatchReader reads many ranges of the process's memory at once
// (*proc.Memory, a core file's memory).
type BatchReader interface {
	ReadBatch(ranges []proc.Range, dst []byte) error
}

// Contents are the bytes of a heap's spans whose objects may hold
// pointers (noscan spans are left out), copied in one batch: read while
// the process is stopped, they are the heap at that instant. Release
// frees them.
type Contents struct {
	heap *Heap
	// data holds each span's bytes by its index in heap.Spans, nil for
	// a noscan span or one that could not be read.
	data [][]byte
	// Bytes is how many bytes were copied; Unread lists the spans
	// (their records' addresses) that could not be read.
	Bytes  int64
	Unread []uint64

	whole []byte // the populated mapping, if the copy is in one
}

// Viewer is memory that keeps what it read and lends it without a copy
// (*proc.Tracked): Copy then fetches the spans through it and keeps its
// views.
type Viewer interface {
	Fetch(ranges []proc.Range) error
	View(addr uint64, n int) []byte
}

// ErrTooBig means the spans to copy hold more bytes than the bound.
var ErrTooBig = errors.New("the heap is larger than the bound")

// ScanBytes returns the bytes of h's spans whose objects may hold
// pointers: what Copy copies.
func (h *Heap) ScanBytes() int64 {
	var n int64
	for i := range h.Spans {
		if !h.Spans[i].Noscan {
			n += int64(h.Spans[i].Pages * h.PageSize)
		}
	}
	return n
}

// Copy reads every span of h whose objects may hold pointers, at most
// maxBytes in all (0: no bound), into buf when it is large enough (the
// caller's, prepared before a stop, its pages faulted in; Release does
// not free it), else into a buffer of its own; through a Viewer, it
// keeps the views instead of copying.
func Copy(mem BatchReader, h *Heap, maxBytes int64, buf []byte) (*Contents, error) {
	return CopyChecked(mem, h, maxBytes, buf, nil)
}

// checkEvery is how many bytes CopyChecked copies between two checks.
const checkEvery = 64 << 20

// CopyChecked is Copy calling check, if set, after each checkEvery bytes
// copied: its error ends the copy (a bound the caller keeps while it
// reads, such as what a process sharing the memory it reads may grow).
func CopyChecked(mem BatchReader, h *Heap, maxBytes int64, buf []byte, check func() error) (*Contents, error) {
	c := &Contents{heap: h, data: make([][]byte, len(h.Spans))}
	var ranges []proc.Range
	var idx []int
	var total int64
	for i := range h.Spans {
		s := &h.Spans[i]
		if s.Noscan {
			continue
		}
		n := int64(s.Pages * h.PageSize)
		total += n
		if maxBytes > 0 && total > maxBytes {
			return nil, fmt.Errorf("%w: more than %d MiB of spans that hold pointers", ErrTooBig, maxBytes>>20)
		}
		ranges = append(ranges, proc.Range{Addr: s.Start, Len: int(n)})
		idx = append(idx, i)
	}
	if v, ok := mem.(Viewer); ok {
		if err := v.Fetch(ranges); err != nil {
			return nil, fmt.Errorf("copy the heap's spans: %w", err)
		}
		for k, r := range ranges {
			if b := v.View(r.Addr, r.Len); b != nil {
				c.data[idx[k]] = b
				c.Bytes += int64(r.Len)
			} else {
				c.Unread = append(c.Unread, h.Spans[idx[k]].Record)
			}
		}
		return c, nil
	}
	if int64(len(buf)) < total {
		buf = nil
	}
	if buf == nil && total >= 4<<20 {
		var ok bool
		if buf, c.whole, ok = hugemem.Populated(int(total)); !ok {
			buf = nil
		}
	}
	if buf == nil {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	failed := map[int]bool{}
	for lo, off := 0, 0; lo < len(ranges); {
		hi, n := lo, 0
		for hi < len(ranges) && (check == nil || hi == lo || n+ranges[hi].Len <= checkEvery) {
			n += ranges[hi].Len
			hi++
		}
		if err := mem.ReadBatch(ranges[lo:hi], buf[off:off+n]); err != nil {
			var be *proc.BatchError
			if !errors.As(err, &be) {
				c.Release()
				return nil, fmt.Errorf("copy the heap's spans: %w", err)
			}
			for _, i := range be.Failed {
				failed[lo+i] = true
			}
		}
		lo, off = hi, off+n
		if check != nil {
			if err := check(); err != nil {
				c.Release()
				return nil, err
			}
		}
	}
	off := 0
	for k, r := range ranges {
		if failed[k] {
			c.Unread = append(c.Unread, h.Spans[idx[k]].Record)
		} else {
			c.data[idx[k]] = buf[off : off+r.Len : off+r.Len]
			c.Bytes += int64(r.Len)
		}
		off += r.Len
	}
	return c, nil
}

// Object returns the bytes of slot i of span k (its index in the
// heap's Spans), nil if the span was not copied (noscan, unread).
func (c *Contents) Object(k, i int) []byte {
	s := &c.heap.Spans[k]
	if c.data[k] == nil || i < 0 || i >= s.NElems {
		return nil
	}
	lo := uint64(i) * s.ElemSize
	return c.data[k][lo : lo+s.ElemSize]
}

// Read copies the bytes at addr from the copied spans into p; false if
// any of them is not in a copied span.
func (c *Contents) Read(p []byte, addr uint64) bool {
	k, ok := c.heap.Find(addr)
	if !ok {
		return false
	}
	s, d := &c.heap.Spans[k], c.data[k]
	if d == nil || addr+uint64(len(p)) > s.Start+uint64(len(d)) {
		return false
	}
	copy(p, d[addr-s.Start:])
	return true
}

// Release frees the copy.
func (c *Contents) Release() {
	if c.whole != nil {
		unix.Munmap(c.whole)
		c.whole = nil
	}
	c.data = nil
}
