package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageSize is the page the kernel tracks writes by (amd64 and the arm64
// kernels gi supports: 4 KiB).
const pageSize = 4096

// Bits of a /proc/<pid>/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pagemapSoftDirty = 1 << 55
	pagemapSwapped   = 1 << 62
	pagemapPresent   = 1 << 63
)

// ErrNoSoftDirty means the kernel does not track writes to pages
// (CONFIG_MEM_SOFT_DIRTY: not on arm64), or gi may not use it here.
var ErrNoSoftDirty = errors.New("no soft-dirty page tracking in this kernel")

// Tracked reads a running process's memory and keeps every page it read,
// so that, once the process is stopped, Sync makes what it kept exact at
// that instant by reading again only the pages the process wrote since
// Track began: the kernel's soft-dirty bits (Track clears them through
// /proc/<pid>/clear_refs; /proc/<pid>/pagemap says which pages were
// written since). The process pays a page fault at the first write to
// each page after Track. Writes the kernel does not see as the process's
// own (a device's DMA into pinned pages, io_uring's fixed buffers) are
// not tracked. Safe for concurrent use.
type Tracked struct {
	mem *Memory
	pid int

	mu sync.Mutex
	// pages holds what ReadAt read, a page at a time; extents what
	// ReadBatch read, a range at a time, by its page-aligned start.
	pages   map[uint64][]byte
	extents map[uint64]*extent

	// Synced counts the pages Sync checked, Dirty those it read again.
	Synced, Dirty int
}

// extent is a range ReadBatch read: [lo, lo+len(buf)), page-aligned.
type extent struct {
	lo  uint64
	buf []byte
}

// softDirtyOnce probes, once, whether the kernel tracks writes.
var softDirtyOnce = sync.OnceValue(probeSoftDirty)

// SoftDirty reports whether the kernel tracks the pages a process
// writes (nil), or why not (ErrNoSoftDirty).
func SoftDirty() error { return softDirtyOnce() }

// Track clears the soft-dirty bits of process pid and returns a reader
// of its memory that keeps what it reads. ErrNoSoftDirty: read
// everything in the stop instead.
func Track(pid int, mem *Memory) (*Tracked, error) {
	if err := softDirtyOnce(); err != nil {
		return nil, err
	}
	if err := clearSoftDirty(pid); err != nil {
		return nil, err
	}
	return &Tracked{mem: mem, pid: pid, pages: map[uint64][]byte{}, extents: map[uint64]*extent{}}, nil
}

// clearSoftDirty clears the soft-dirty bits of every page of pid.
func clearSoftDirty(pid int) error {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSoftDirty, err)
	}
	defer f.Close()
	if _, err := f.WriteString("4"); err != nil {
		return fmt.Errorf("%w: %v", ErrNoSoftDirty, err)
	}
	return nil
}

// probeSoftDirty checks on gi's own memory that the kernel tracks
// writes: after clearing the bits, a page gi writes is soft-dirty and
// one it does not write is not.
func probeSoftDirty() error {
	buf, err := unix.Mmap(-1, 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSoftDirty, err)
	}
	defer unix.Munmap(buf)
	buf[0], buf[pageSize] = 1, 1
	if err := clearSoftDirty(os.Getpid()); err != nil {
		return err
	}
	buf[0] = 2
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSoftDirty, err)
	}
	defer pm.Close()
	var e [16]byte
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	if _, err := pm.ReadAt(e[:], int64(addr/pageSize*8)); err != nil {
		return fmt.Errorf("%w: %v", ErrNoSoftDirty, err)
	}
	written, untouched := binary.LittleEndian.Uint64(e[:]), binary.LittleEndian.Uint64(e[8:])
	if written&pagemapSoftDirty == 0 || untouched&pagemapSoftDirty != 0 {
		return ErrNoSoftDirty
	}
	return nil
}

// ReadAt reads len(p) bytes at addr: from the pages kept, the others
// read from the process (whole pages) and kept.
func (t *Tracked) ReadAt(p []byte, addr uint64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n := 0; n < len(p); {
		a := addr + uint64(n)
		page := a &^ (pageSize - 1)
		b, ok := t.pages[page]
		if !ok {
			if e := t.extentHolding(page); e != nil {
				b = e.buf[page-e.lo : page-e.lo+pageSize]
			} else {
				b = make([]byte, pageSize)
				if _, err := t.mem.ReadAt(b, page); err != nil {
					return n, err
				}
				t.pages[page] = b
			}
		}
		n += copy(p[n:], b[a-page:])
	}
	return len(p), nil
}

// extentHolding returns an extent that holds the page at addr, if the
// extent a page-aligned range starts at holds it (extents are found by
// their start only: ReadAt's pages are kept apart).
func (t *Tracked) extentHolding(page uint64) *extent {
	if e, ok := t.extents[page]; ok {
		return e
	}
	return nil
}

// ReadBatch reads each range into dst, back to back: a range read
// before is copied from what was kept, the others read from the process
// and kept, each as one page-aligned range.
func (t *Tracked) ReadBatch(ranges []Range, dst []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.fetch(ranges); err != nil {
		return err
	}
	var be *BatchError
	off := 0
	for i, r := range ranges {
		if v := t.view(r.Addr, r.Len); v != nil {
			copy(dst[off:off+r.Len], v)
		} else {
			clear(dst[off : off+r.Len])
			if be == nil {
				be = &BatchError{First: fmt.Errorf("read %d bytes at %#x: unreadable", r.Len, r.Addr)}
			}
			be.Failed = append(be.Failed, i)
		}
		off += r.Len
	}
	if be != nil {
		return be
	}
	return nil
}

// Fetch reads and keeps the ranges not kept yet, without copying them
// out: each is one page-aligned range, for View.
func (t *Tracked) Fetch(ranges []Range) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fetch(ranges)
}

// fetch reads and keeps the ranges not kept yet; one that cannot be read
// is left out (View and ReadBatch then say so).
func (t *Tracked) fetch(ranges []Range) error {
	var missing []Range
	for _, r := range ranges {
		if t.view(r.Addr, r.Len) == nil {
			lo := r.Addr &^ (pageSize - 1)
			hi := (r.Addr + uint64(r.Len) + pageSize - 1) &^ (pageSize - 1)
			missing = append(missing, Range{Addr: lo, Len: int(hi - lo)})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	total := 0
	for _, m := range missing {
		total += m.Len
	}
	buf := make([]byte, total)
	err := t.mem.ReadBatch(missing, buf)
	var be *BatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	failed := map[int]bool{}
	if be != nil {
		for _, i := range be.Failed {
			failed[i] = true
		}
	}
	off := 0
	for i, m := range missing {
		if !failed[i] {
			if old, ok := t.extents[m.Addr]; !ok || len(old.buf) < m.Len {
				t.extents[m.Addr] = &extent{lo: m.Addr, buf: buf[off : off+m.Len : off+m.Len]}
			}
		}
		off += m.Len
	}
	return nil
}

// View returns the kept bytes of [addr, addr+n) without copying them,
// nil if no range ReadBatch read holds them. They stay valid, and are
// brought up to date by Sync.
func (t *Tracked) View(addr uint64, n int) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.view(addr, n)
}

func (t *Tracked) view(addr uint64, n int) []byte {
	e := t.extents[addr&^(pageSize-1)]
	if e == nil {
		return nil
	}
	off := addr - e.lo
	if off+uint64(n) > uint64(len(e.buf)) {
		return nil
	}
	return e.buf[off : off+uint64(n) : off+uint64(n)]
}

// Sync, with the process stopped, reads again every kept page the
// process wrote since Track (or that is not in memory: never written, or
// swapped out): what it keeps is then the process's memory at this
// instant (Synced and Dirty count the pages checked and read again).
func (t *Tracked) Sync() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	type held struct {
		page uint64
		buf  []byte
	}
	var all []held
	for p, b := range t.pages {
		all = append(all, held{p, b})
	}
	for _, e := range t.extents {
		for off := 0; off < len(e.buf); off += pageSize {
			all = append(all, held{e.lo + uint64(off), e.buf[off : off+pageSize]})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].page < all[j].page })
	pm, err := os.Open("/proc/" + strconv.Itoa(t.pid) + "/pagemap")
	if err != nil {
		return fmt.Errorf("process %d: pagemap: %w", t.pid, err)
	}
	defer pm.Close()
	var dirty []held
	var entries []byte
	for i := 0; i < len(all); {
		// A run of consecutive pages: one read of their entries.
		j := i + 1
		for j < len(all) && all[j].page <= all[j-1].page+pageSize {
			j++
		}
		first, last := all[i].page, all[j-1].page
		n := int((last-first)/pageSize + 1)
		if cap(entries) < 8*n {
			entries = make([]byte, 8*n)
		}
		entries = entries[:8*n]
		if _, err := pm.ReadAt(entries, int64(first/pageSize*8)); err != nil {
			return fmt.Errorf("process %d: pagemap at %#x: %w", t.pid, first, err)
		}
		for _, h := range all[i:j] {
			e := binary.LittleEndian.Uint64(entries[(h.page-first)/pageSize*8:])
			// Written since Track, or not in memory (never written,
			// swapped out): read again.
			if e&pagemapSoftDirty != 0 || e&pagemapPresent == 0 {
				dirty = append(dirty, h)
			}
		}
		i = j
	}
	t.Synced += len(all)
	t.Dirty += len(dirty)
	if len(dirty) == 0 {
		return nil
	}
	ranges := make([]Range, len(dirty))
	for i, h := range dirty {
		ranges[i] = Range{Addr: h.page, Len: pageSize}
	}
	buf := make([]byte, len(dirty)*pageSize)
	err = t.mem.ReadBatch(ranges, buf)
	var be *BatchError
	if err != nil && !errors.As(err, &be) {
		return fmt.Errorf("process %d: read the pages written since tracking began: %w", t.pid, err)
	}
	if be != nil {
		// Pages gone since (unmapped): what was kept of them is the
		// process's no longer, and nothing else can stand for it.
		return fmt.Errorf("process %d: %d pages written since tracking began could not be read again (the first at %#x)", t.pid, len(be.Failed), dirty[be.Failed[0]].page)
	}
	for i, h := range dirty {
		copy(h.buf, buf[i*pageSize:])
	}
	return nil
}
