// Package dwarfload opens the DWARF of an ELF binary reading only the
// sections a reader needs, each decompressed on its own goroutine: on a big
// Go binary the line and frame tables and the location lists are as large
// as the rest, and elf.File.DWARF decompresses them all, one after another.
package dwarfload

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/gi-debug/gi/internal/decodes"
	"github.com/gi-debug/gi/internal/hugemem"
	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"golang.org/x/sys/unix"
)

// Types are the sections debug/dwarf reads entries and types from (DWARF 4
// and 5), without the line table: enough to walk units, types and
// variables.
var Types = []string{"abbrev", "info", "str", "ranges", "rnglists", "addr", "str_offsets", "line_str"}

// Loader reads the DWARF sections of one binary, each at most once: a
// section is decompressed the first time a reader asks for it, and shared
// by the readers after (the runtime's layouts and the arguments of traced
// functions both need .debug_info). Safe for concurrent use.
type Loader struct {
	f        *elf.File
	mu       sync.Mutex
	sections map[string]*section
}

// section is one section, read once.
type section struct {
	once sync.Once
	read atomic.Bool // once has run
	data []byte
	err  error
}

// NewLoader returns the Loader of f.
func NewLoader(f *elf.File) *Loader {
	return &Loader{f: f, sections: map[string]*section{}}
}

// File returns the binary the Loader reads.
func (l *Loader) File() *elf.File { return l.f }

// Sections returns the sections named (without ".debug_"), plain or
// compressed (SHF_COMPRESSED or .zdebug_), those not read yet read in
// parallel; a section the binary lacks is absent from the map.
func (l *Loader) Sections(names ...string) (map[string][]byte, error) {
	secs := make([]*section, len(names))
	l.mu.Lock()
	for i, name := range names {
		if l.sections[name] == nil {
			l.sections[name] = &section{}
		}
		secs[i] = l.sections[name]
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for i, name := range names {
		if l.f.Section(".debug_"+name) == nil && l.f.Section(".zdebug_"+name) == nil {
			continue
		}
		wg.Go(func() {
			secs[i].once.Do(func() {
				secs[i].data, secs[i].err = readSection(l.f, name)
				secs[i].read.Store(true)
			})
		})
	}
	wg.Wait()
	out := make(map[string][]byte, len(names))
	for i, name := range names {
		if secs[i].err != nil {
			return nil, fmt.Errorf("read DWARF: .debug_%s: %w", name, secs[i].err)
		}
		if secs[i].data != nil {
			out[name] = secs[i].data
		}
	}
	return out, nil
}

// Open returns the DWARF built from the Types sections, and every section
// read (those named in extra too).
func (l *Loader) Open(extra ...string) (*dwarf.Data, map[string][]byte, error) {
	decodes.Add(decodes.DWARF, 1)
	sec, err := l.Sections(append(append([]string(nil), Types...), extra...)...)
	if err != nil {
		return nil, nil, err
	}
	d, err := newData(sec, sec["info"])
	if err != nil {
		return nil, nil, err
	}
	return d, sec, nil
}

// newData builds the DWARF of the Types sections in sec with info as its
// .debug_info.
func newData(sec map[string][]byte, info []byte) (*dwarf.Data, error) {
	d, err := dwarf.New(sec["abbrev"], nil, nil, info, nil, nil, sec["ranges"], sec["str"])
	if err != nil {
		return nil, fmt.Errorf("read DWARF: %w", err)
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if b := sec[name]; b != nil {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, fmt.Errorf("read DWARF: .debug_%s: %w", name, err)
			}
		}
	}
	return d, nil
}

// OpenPrefix returns the DWARF of the Types sections but the range lists,
// with .debug_info cut
// after the first compilation unit last accepts, decompressing no more of
// it than that: on a big binary the runtime's units lie in its first
// quarter, and inflating the rest is most of what reading the runtime's
// types costs. last reads the unit's entries from the reader it is given,
// the unit's own entry first. Offsets are those of the whole section.
// Where no unit is accepted, or .debug_info is already read whole, it is
// Open's DWARF.
func (l *Loader) OpenPrefix(last func(unit *dwarf.Reader) bool) (*dwarf.Data, error) {
	l.mu.Lock()
	info := l.sections["info"]
	l.mu.Unlock()
	s := l.f.Section(".debug_info")
	if (info != nil && info.read.Load()) || s == nil {
		d, _, err := l.Open()
		return d, err
	}
	decodes.Add(decodes.DWARF, 1)
	// Entries and their attributes, not address ranges: the range lists
	// are as large as the prefix.
	sec, err := l.Sections("abbrev", "str", "addr", "str_offsets", "line_str")
	if err != nil {
		return nil, err
	}
	end, buf, err := prefixUntil(s, l.f.ByteOrder, func(unit []byte) (bool, error) {
		d, err := newData(sec, unit)
		if err != nil {
			return false, err
		}
		return last(d.Reader()), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read DWARF: .debug_info: %w", err)
	}
	return newData(sec, buf[:end])
}

// readSection reads the section .debug_<name>: a compressed one inflated
// straight into a buffer of its size, where debug/elf's Section.Data grows
// its buffer in 10 MB steps and copies it each time (a third of the time
// of reading a big binary's .debug_info); the others as Delve reads them
// (.zdebug_ sections among them).
func readSection(f *elf.File, name string) ([]byte, error) {
	s := f.Section(".debug_" + name)
	if s == nil || s.Flags&elf.SHF_COMPRESSED == 0 {
		return godwarf.GetDebugSectionElf(f, name)
	}
	if s.Size > maxSection {
		return nil, fmt.Errorf("%d bytes, more than gi reads (%d)", s.Size, maxSection)
	}
	buf := mapBuffer(int(s.Size), true)
	if _, err := io.ReadFull(s.Open(), buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// mapBuffer returns n zero bytes outside the Go heap, for the life of the
// process: sections are shared by every reader of a binary, and the
// entries and types read from them refer to their bytes. whole says all of
// it will be written: it is then faulted in at once, in huge pages where
// the kernel has them (hugemem.Populated): inflating a big binary's
// .debug_info into the Go heap spent 40% of its time faulting 4 KiB pages
// in on a PVM guest. Where the kernel refuses a mapping, the Go heap
// serves.
func mapBuffer(n int, whole bool) []byte {
	if n == 0 {
		return []byte{}
	}
	if whole && n >= hugemem.PageSize/2 {
		if buf, _, ok := hugemem.Populated(n); ok {
			return buf
		}
		return make([]byte, n)
	}
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	return m[:n:n]
}

// maxSection bounds the size of a section read in part: what its header
// says is not trusted with an allocation beyond it.
const maxSection = 4 << 30

// prefixUntil decompresses s (or reads it, uncompressed) a unit at a time
// until accept takes one, and returns where that unit ends and what was
// read; the whole section where none is taken.
func prefixUntil(s *elf.Section, order binary.ByteOrder, accept func(unit []byte) (bool, error)) (int, []byte, error) {
	const chunk = 256 << 10
	if s.Size > maxSection {
		return 0, nil, fmt.Errorf("%d bytes, more than gi reads (%d)", s.Size, maxSection)
	}
	r := s.Open()
	// Room for the whole section at once: growing it would copy and touch
	// twice the pages, and the pages past the prefix are never touched.
	buf := mapBuffer(int(s.Size), false)[:0]
	eof := false
	// fill reads until buf holds n bytes or the section ends.
	fill := func(n int) error {
		for len(buf) < n && !eof {
			if len(buf) == cap(buf) {
				return fmt.Errorf("longer than its header says (%d bytes)", s.Size)
			}
			m, err := r.Read(buf[len(buf):min(len(buf)+chunk, cap(buf))])
			buf = buf[:len(buf)+m]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		return nil
	}
	for off := 0; ; {
		if err := fill(off + 12); err != nil {
			return 0, nil, err
		}
		if off >= len(buf) {
			return len(buf), buf, nil // the whole section: no unit taken
		}
		if len(buf)-off < 4 {
			return 0, nil, fmt.Errorf("unit at %#x: truncated header", off)
		}
		size, header := uint64(order.Uint32(buf[off:])), 4
		if size == 0xffffffff { // 64-bit DWARF
			if len(buf)-off < 12 {
				return 0, nil, fmt.Errorf("unit at %#x: truncated header", off)
			}
			size, header = order.Uint64(buf[off+4:]), 12
		}
		if size > s.Size {
			return 0, nil, fmt.Errorf("unit at %#x: length %d beyond the section (%d bytes)", off, size, s.Size)
		}
		end := off + header + int(size)
		if err := fill(end); err != nil {
			return 0, nil, err
		}
		if len(buf) < end {
			return 0, nil, fmt.Errorf("unit at %#x: %d bytes, the section ends at %#x", off, size, len(buf))
		}
		ok, err := accept(buf[off:end])
		if err != nil {
			return 0, nil, fmt.Errorf("unit at %#x: %w", off, err)
		}
		if ok {
			return end, buf, nil
		}
		off = end
	}
}

// Open opens the DWARF of f, as Loader.Open does, with nothing shared.
func Open(f *elf.File, extra ...string) (*dwarf.Data, map[string][]byte, error) {
	return NewLoader(f).Open(extra...)
}
