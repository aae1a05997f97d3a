// Package elfbin opens Go ELF executables: segments and file offsets,
// symbols, relocations, the build info, and the pc/line table and
// moduledata located in them (decoded by package pclntab). All addresses
// are link-time: for a PIE the caller adds the load bias.
package elfbin

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gi-debug/gi/bincache"
	"github.com/gi-debug/gi/internal/decodes"
	"github.com/gi-debug/gi/internal/dwarfload"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
	"golang.org/x/sys/unix"
)

// Errors returned (wrapped) by Open.
var (
	// ErrNotELF means the file is not an ELF object.
	ErrNotELF = errors.New("not an ELF file")
	// ErrNoPclntab means the ELF file has no Go pc/line table: not a Go binary.
	ErrNoPclntab = errors.New("not a Go binary: no pclntab")
	// ErrUnsupportedArch means the ELF file is for a machine other than amd64 or arm64.
	ErrUnsupportedArch = errors.New("unsupported architecture")
)

// Binary is an opened Go ELF executable.
//
// All addresses a Binary takes and returns are link-time virtual addresses:
// for a position-independent executable the caller adds the load bias.
// A Binary is safe for concurrent use.
type Binary struct {
	// File is the parsed ELF file. It reads from the underlying file, so it
	// is unusable after Close.
	File *elf.File
	// Path is the path the binary was opened by (for example /proc/<pid>/exe).
	Path string
	// Arch is the GOARCH spelling of the ELF machine: "amd64" or "arm64".
	Arch string
	// GoVersion is the toolchain version from the build info, such as
	// "go1.26.8", or "" if the binary has no readable build info.
	GoVersion string
	// MainModule is the path of the main module from the build info
	// ("github.com/acme/server", "command-line-arguments"), or "".
	MainModule string
	// DefaultGODEBUG is the build info's DefaultGODEBUG setting: the
	// GODEBUG defaults the main module's go version selects.
	DefaultGODEBUG string
	// PIE reports whether the binary is position independent (ET_DYN).
	PIE bool
	// Stripped reports whether the binary has no .symtab (-ldflags=-s).
	Stripped bool
	// Lines is the decoded Go pc/line table.
	Lines *pclntab.LineTable

	f io.ReaderAt // the file's contents
	// mapped is the file mapped into memory (Open), nil when it is read.
	mapped []byte
	close  func() error
	loads  []*elf.Prog // PT_LOAD segments, sorted by Vaddr
	order  binary.ByteOrder

	symOnce sync.Once
	// objects are the sized data symbols, by address (DataSymbol).
	objects []Symbol
	syms    map[string]Symbol // a read binary's symbols by name
	// found are the names a mapped binary's symbols were looked for by.
	symMu sync.Mutex
	found map[string]Symbol

	relOnce sync.Once
	rel     map[uint64]uint64 // R_*_RELATIVE: link-time address -> addend

	// layoutKey names the runtime layout in the cache ("": not cached).
	layoutKey bincache.Key
	// dwarf reads the DWARF sections, each once, for every reader of the
	// binary (the runtime layout, the arguments of traced functions).
	dwarf *dwarfload.Loader
}

// Symbol is an ELF .symtab symbol.
type Symbol struct {
	Name string // as in .symtab: ABI0 wrappers of Go functions end in .abi0
	Addr uint64 // link-time address
	Size uint64 // in bytes, 0 for markers such as runtime.text
}

// Open opens the Go ELF executable at path and decodes its pc/line table.
// Callers inspecting a process pass /proc/<pid>/exe. Errors carry the path;
// os errors (permission, not found) stay matchable with errors.Is, as do
// ErrNotELF, ErrNoPclntab and ErrUnsupportedArch.
//
// The file is mapped into memory, not read: the pc/line table and the other
// big tables gi decodes are slices of the mapping, whose pages the kernel
// shares with the page cache (caddy, 82 MB: a copy of its tables cost a
// quarter of a second). The mapping outlives Close, as the line table does.
func Open(path string) (*Binary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError already names the path
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var r io.ReaderAt = f
	mapped := mapFile(f, st.Size())
	if mapped != nil {
		r = bytes.NewReader(mapped)
	}
	b, err := newBinary(r, mapped, path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	b.close = f.Close
	b.layoutKey = bincache.KeyOf(b.File, st.Size(), "runtime-layout")
	return b, nil
}

// mapFile maps the file's size bytes privately (copy on write: a slice of
// it may be written to without touching the file), or returns nil when it
// cannot (an empty or special file): the file is then read.
func mapFile(f *os.File, size int64) []byte {
	if size <= 0 || size > 1<<40 {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return m
}

// OpenReader decodes the Go ELF executable whose contents r holds, as Open
// does a file: for binaries that are not files (fuzzing, tests). path only
// names it in errors.
func OpenReader(r io.ReaderAt, path string) (*Binary, error) {
	b, err := newBinary(r, nil, path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	b.close = func() error { return nil }
	return b, nil
}

// parses counts the binaries newBinary read (see Parses).
var parses atomic.Int64

// Parses returns how many executables this process has parsed (ELF
// headers, build info and pclntab): what tests and benchmarks count to
// check that a command reads its target's binary once.
func Parses() int64 { return parses.Load() }

// newBinary decodes the executable f holds; mapped, if not nil, is the
// same contents mapped into memory.
func newBinary(f io.ReaderAt, mapped []byte, path string) (*Binary, error) {
	parses.Add(1)
	decodes.Add(decodes.ELF, 1)
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read ELF header: %w", err)
		}
		return nil, ErrNotELF
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotELF, err)
	}
	b := &Binary{
		File:     ef,
		Path:     path,
		PIE:      ef.Type == elf.ET_DYN,
		Stripped: ef.Section(".symtab") == nil,
		f:        f,
		mapped:   mapped,
		order:    ef.ByteOrder,
		dwarf:    dwarfload.NewLoader(ef),
	}
	switch ef.Machine {
	case elf.EM_X86_64:
		b.Arch = "amd64"
	case elf.EM_AARCH64:
		b.Arch = "arm64"
	default:
		return nil, fmt.Errorf("%w: ELF machine %v", ErrUnsupportedArch, ef.Machine)
	}
	if ef.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("%w: %v %v", ErrUnsupportedArch, ef.Machine, ef.Class)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			b.loads = append(b.loads, p)
		}
	}
	sort.Slice(b.loads, func(i, j int) bool { return b.loads[i].Vaddr < b.loads[j].Vaddr })
	if bi, err := buildinfo.Read(f); err == nil {
		b.GoVersion, b.MainModule = bi.GoVersion, bi.Main.Path
		if b.MainModule == "" {
			b.MainModule = bi.Path // go run and builds without a module
		}
		for _, s := range bi.Settings {
			if s.Key == "DefaultGODEBUG" {
				b.DefaultGODEBUG = s.Value
			}
		}
	}
	if b.Lines, err = b.loadLineTable(); err != nil {
		return nil, err
	}
	return b, nil
}

// Close closes the underlying file. The LineTable stays usable: it holds
// its own copy of the tables.
func (b *Binary) Close() error {
	return b.close()
}

// Symbol looks name up in .symtab; a stripped binary has no symbols. In a
// mapped binary each name is looked for once, by a pass over the table that
// copies nothing (caddy's 300k symbols: milliseconds, where indexing them
// all took a tenth of a second); otherwise the table is indexed on first
// use.
func (b *Binary) Symbol(name string) (Symbol, bool) {
	if tab, ok := b.mappedSymtab(); ok {
		b.symMu.Lock()
		defer b.symMu.Unlock()
		if s, seen := b.found[name]; seen {
			return s, s.Name != ""
		}
		s, _ := tab.lookup(name)
		if b.found == nil {
			b.found = map[string]Symbol{}
		}
		b.found[name] = s
		return s, s.Name != ""
	}
	b.symOnce.Do(b.indexSymbols)
	s, ok := b.syms[name]
	return s, ok
}

// elfSymSize is the size of an Elf64_Sym.
const elfSymSize = 24

// rawSymtab is .symtab and its string table as the mapped file holds them.
type rawSymtab struct {
	syms, strs []byte
	order      binary.ByteOrder
}

// mappedSymtab returns the symbol table of a mapped binary.
func (b *Binary) mappedSymtab() (rawSymtab, bool) {
	if b.mapped == nil {
		return rawSymtab{}, false
	}
	st := b.File.Section(".symtab")
	if st == nil || st.Type != elf.SHT_SYMTAB || int(st.Link) >= len(b.File.Sections) {
		return rawSymtab{}, false
	}
	str := b.File.Sections[st.Link]
	end, strEnd := st.Offset+st.Size, str.Offset+str.Size
	if end < st.Offset || end > uint64(len(b.mapped)) || strEnd < str.Offset || strEnd > uint64(len(b.mapped)) {
		return rawSymtab{}, false
	}
	return rawSymtab{syms: b.mapped[st.Offset:end], strs: b.mapped[str.Offset:strEnd], order: b.order}, true
}

// each calls fn with every named symbol but files and sections, in table
// order, until fn returns false. name is a view of the string table.
func (t rawSymtab) each(fn func(name []byte, info byte, value, size uint64) bool) {
	for off := elfSymSize; off+elfSymSize <= len(t.syms); off += elfSymSize { // entry 0 is null
		e := t.syms[off : off+elfSymSize]
		info := e[4]
		if typ := elf.SymType(info & 0xf); typ == elf.STT_FILE || typ == elf.STT_SECTION {
			continue
		}
		at := int(t.order.Uint32(e[0:4]))
		if at <= 0 || at >= len(t.strs) {
			continue
		}
		n := bytes.IndexByte(t.strs[at:], 0)
		if n <= 0 {
			continue
		}
		if !fn(t.strs[at:at+n], info, t.order.Uint64(e[8:16]), t.order.Uint64(e[16:24])) {
			return
		}
	}
}

// lookup finds the first symbol named name.
func (t rawSymtab) lookup(name string) (Symbol, bool) {
	var out Symbol
	t.each(func(n []byte, _ byte, value, size uint64) bool {
		if string(n) != name {
			return true
		}
		out = Symbol{Name: name, Addr: value, Size: size}
		return false
	})
	return out, out.Name != ""
}

func (b *Binary) indexSymbols() {
	if tab, ok := b.mappedSymtab(); ok {
		// Only the sized data symbols, for DataSymbol: their names are
		// views of the mapping, which lives as long as gi.
		tab.each(func(name []byte, info byte, value, size uint64) bool {
			if elf.SymType(info&0xf) == elf.STT_OBJECT && size > 0 {
				b.objects = append(b.objects, Symbol{Name: unsafe.String(&name[0], len(name)), Addr: value, Size: size})
			}
			return true
		})
		sort.Slice(b.objects, func(i, j int) bool { return b.objects[i].Addr < b.objects[j].Addr })
		return
	}
	syms, err := b.File.Symbols()
	b.syms = make(map[string]Symbol, len(syms))
	if err != nil {
		return
	}
	for _, s := range syms {
		if s.Name == "" || elf.ST_TYPE(s.Info) == elf.STT_FILE || elf.ST_TYPE(s.Info) == elf.STT_SECTION {
			continue
		}
		if _, dup := b.syms[s.Name]; !dup {
			b.syms[s.Name] = Symbol{Name: s.Name, Addr: s.Value, Size: s.Size}
		}
		if elf.ST_TYPE(s.Info) == elf.STT_OBJECT && s.Size > 0 {
			b.objects = append(b.objects, Symbol{Name: s.Name, Addr: s.Value, Size: s.Size})
		}
	}
	sort.Slice(b.objects, func(i, j int) bool { return b.objects[i].Addr < b.objects[j].Addr })
}

// GlobalName names the global variable holding link-time address addr:
// "main.slowMu", "main.srv+16" for an address inside one; "" if none
// does (or the binary is stripped).
func (b *Binary) GlobalName(addr uint64) string {
	s, off, ok := b.DataSymbol(addr)
	switch {
	case !ok:
		return ""
	case off == 0:
		return s.Name
	}
	return fmt.Sprintf("%s+%d", s.Name, off)
}

// DataSymbol returns the variable (a data symbol with a size) whose storage
// holds link-time address addr, and addr's offset in it: the name of a
// global such as main.slowMu. A stripped binary has none.
func (b *Binary) DataSymbol(addr uint64) (Symbol, uint64, bool) {
	b.symOnce.Do(b.indexSymbols)
	i := sort.Search(len(b.objects), func(i int) bool { return b.objects[i].Addr > addr }) - 1
	if i < 0 || addr-b.objects[i].Addr >= b.objects[i].Size {
		return Symbol{}, 0, false
	}
	return b.objects[i], addr - b.objects[i].Addr, true
}

// ReadAt reads the static file contents at link-time virtual address vaddr,
// as the PT_LOAD segments map them. The zero-filled tail of a segment (.bss,
// .noptrbss) reads as zeros. Contents are as the linker wrote them: dynamic
// relocations are not applied. A read reaching outside every segment returns
// the bytes read so far and an error.
func (b *Binary) ReadAt(p []byte, vaddr uint64) (int, error) {
	n := 0
	for n < len(p) {
		addr := vaddr + uint64(n)
		seg := b.segment(addr)
		if seg == nil {
			return n, fmt.Errorf("read %#x: address not in any PT_LOAD segment", addr)
		}
		chunk := p[n:]
		if rest := seg.Vaddr + seg.Memsz - addr; uint64(len(chunk)) > rest {
			chunk = chunk[:rest]
		}
		if addr < seg.Vaddr+seg.Filesz {
			fileChunk := chunk
			if rest := seg.Vaddr + seg.Filesz - addr; uint64(len(fileChunk)) > rest {
				fileChunk = fileChunk[:rest]
			}
			m, err := b.f.ReadAt(fileChunk, int64(seg.Off+addr-seg.Vaddr))
			n += m
			if err != nil {
				return n, fmt.Errorf("read %#x: %w", addr, err)
			}
			chunk = chunk[m:]
		}
		clear(chunk)
		n += len(chunk)
	}
	return n, nil
}

// segment returns the PT_LOAD segment whose memory image holds addr.
func (b *Binary) segment(addr uint64) *elf.Prog {
	i := sort.Search(len(b.loads), func(i int) bool { return b.loads[i].Vaddr+b.loads[i].Memsz > addr })
	if i < len(b.loads) && b.loads[i].Vaddr <= addr {
		return b.loads[i]
	}
	return nil
}

// FileOffset translates a link-time virtual address to its offset in the
// file (what uprobes are attached by). The address must be backed by file
// contents of a PT_LOAD segment.
func (b *Binary) FileOffset(vaddr uint64) (uint64, error) {
	seg := b.segment(vaddr)
	if seg == nil || vaddr >= seg.Vaddr+seg.Filesz {
		return 0, fmt.Errorf("address %#x is not file-backed by any PT_LOAD segment", vaddr)
	}
	return seg.Off + vaddr - seg.Vaddr, nil
}

// TextRange returns the link-time bounds [lo, hi) of the .text section (with
// external linking it also holds C code). Without section headers it falls
// back to the range of the functions in the pc/line table.
func (b *Binary) TextRange() (lo, hi uint64) {
	if s := b.File.Section(".text"); s != nil && s.Addr != 0 {
		return s.Addr, s.Addr + s.Size
	}
	if fs := b.Lines.Funcs(); len(fs) > 0 {
		return fs[0].Entry, fs[len(fs)-1].End
	}
	return 0, 0
}

// readSection returns the file contents of the first allocated section
// among names, with its address.
func (b *Binary) readSection(names ...string) (data []byte, addr uint64, err error) {
	for _, name := range names {
		s := b.File.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		if b.mapped != nil && s.Offset+s.Size <= uint64(len(b.mapped)) && s.Offset+s.Size >= s.Offset {
			return b.mapped[s.Offset : s.Offset+s.Size : s.Offset+s.Size], s.Addr, nil
		}
		data, err := s.Data()
		if err != nil {
			return nil, 0, fmt.Errorf("read section %s: %w", name, err)
		}
		return data, s.Addr, nil
	}
	return nil, 0, nil
}

// read returns n bytes at vaddr: a slice of the mapped file when they are
// all file-backed in one segment, else a copy.
func (b *Binary) read(vaddr uint64, n uint64) ([]byte, error) {
	if n > 1<<30 {
		return nil, fmt.Errorf("read %#x: implausible size %d", vaddr, n)
	}
	if seg := b.segment(vaddr); b.mapped != nil && seg != nil && vaddr+n <= seg.Vaddr+seg.Filesz && vaddr+n >= vaddr {
		off := seg.Off + vaddr - seg.Vaddr
		if off+n <= uint64(len(b.mapped)) {
			return b.mapped[off : off+n : off+n], nil
		}
	}
	p := make([]byte, n)
	if _, err := b.ReadAt(p, vaddr); err != nil {
		return nil, err
	}
	return p, nil
}

// readToSegmentEnd returns the file contents from vaddr to the end of the
// file-backed part of its segment, or of its section when there is one.
func (b *Binary) readToSegmentEnd(vaddr uint64) ([]byte, error) {
	for _, s := range b.File.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS && s.Addr <= vaddr && vaddr < s.Addr+s.Size {
			return b.read(vaddr, s.Addr+s.Size-vaddr)
		}
	}
	seg := b.segment(vaddr)
	if seg == nil || vaddr >= seg.Vaddr+seg.Filesz {
		return nil, fmt.Errorf("address %#x is not file-backed", vaddr)
	}
	return b.read(vaddr, seg.Vaddr+seg.Filesz-vaddr)
}

// relocations returns the R_X86_64_RELATIVE / R_AARCH64_RELATIVE dynamic
// relocations of a PIE, by address. The Go linker also writes the link-time
// value into the file, but external linkers (notably GNU ld on arm64) leave
// zeros there, so pointers in relocated data are read through this map.
func (b *Binary) relocations() map[uint64]uint64 {
	b.relOnce.Do(func() {
		b.rel = map[uint64]uint64{}
		var relative uint32
		switch b.File.Machine {
		case elf.EM_X86_64:
			relative = uint32(elf.R_X86_64_RELATIVE)
		case elf.EM_AARCH64:
			relative = uint32(elf.R_AARCH64_RELATIVE)
		}
		for _, s := range b.File.Sections {
			if s.Type != elf.SHT_RELA {
				continue
			}
			data, err := s.Data()
			if err != nil {
				continue
			}
			for i := 0; i+24 <= len(data); i += 24 {
				off := b.order.Uint64(data[i:])
				info := b.order.Uint64(data[i+8:])
				if elf.R_TYPE64(info) == relative {
					b.rel[off] = b.order.Uint64(data[i+16:])
				}
			}
		}
	})
	return b.rel
}

// pointerAt decodes the pointer at vaddr inside data (which starts at base),
// using the dynamic relocation's addend when the file holds no value.
func (b *Binary) pointerAt(data []byte, base, vaddr uint64) uint64 {
	v := b.order.Uint64(data[vaddr-base:])
	if v == 0 && b.PIE {
		v = b.relocations()[vaddr]
	}
	return v
}

// moduleCandidates returns the sections that may hold runtime.firstmoduledata,
// most likely first: .go.module (Go 1.26+), then .noptrdata and .data. Without
// section headers, the writable PT_LOAD segments.
func (b *Binary) moduleCandidates() (regions []region, err error) {
	for _, name := range []string{".go.module", ".noptrdata", ".data", ".data.rel.ro"} {
		data, addr, err := b.readSection(name)
		if err != nil {
			return nil, err
		}
		if data != nil {
			regions = append(regions, region{addr, data})
		}
	}
	if len(regions) == 0 {
		for _, p := range b.loads {
			if p.Flags&elf.PF_W != 0 && p.Filesz > 0 {
				data, err := b.read(p.Vaddr, p.Filesz)
				if err != nil {
					return nil, err
				}
				regions = append(regions, region{p.Vaddr, data})
			}
		}
	}
	return regions, nil
}

type region struct {
	addr uint64
	data []byte
}

// findPclntab locates the pc/line table: section .gopclntab (also the name
// in Go 1.26 PIEs), .data.rel.ro.gopclntab (internally linked PIEs before Go
// 1.26), the runtime.pclntab symbol or, for stripped externally linked PIEs
// where the table is merged into .data.rel.ro, the first 8-byte aligned
// pcHeader in a non-executable segment.
func (b *Binary) findPclntab() (data []byte, addr uint64, err error) {
	data, addr, err = b.readSection(".gopclntab", ".data.rel.ro.gopclntab")
	if err != nil || data != nil {
		return data, addr, err
	}
	if s, ok := b.Symbol("runtime.pclntab"); ok && s.Addr != 0 {
		end, ok := b.Symbol("runtime.epclntab")
		if ok && end.Addr > s.Addr {
			data, err := b.read(s.Addr, end.Addr-s.Addr)
			return data, s.Addr, err
		}
		data, err := b.readToSegmentEnd(s.Addr)
		return data, s.Addr, err
	}
	for _, p := range b.loads {
		if p.Flags&elf.PF_X != 0 || p.Filesz == 0 {
			continue
		}
		seg, err := b.read(p.Vaddr, p.Filesz)
		if err != nil {
			return nil, 0, err
		}
		for _, magic := range pclntab.Magics {
			var pat [4]byte
			b.order.PutUint32(pat[:], magic)
			for off := 0; off < len(seg); {
				i := bytes.Index(seg[off:], pat[:])
				if i < 0 {
					break
				}
				off += i
				if (p.Vaddr+uint64(off))%8 == 0 {
					if _, err := pclntab.ParseHeader(seg[off:], b.order); err == nil {
						return seg[off:], p.Vaddr + uint64(off), nil
					}
				}
				off++
			}
		}
	}
	return nil, 0, ErrNoPclntab
}

// GTLSOffset returns where the current g is stored relative to the thread
// pointer (amd64 fs base, arm64 TPIDR_EL0). Go code keeps g in a register
// (r14, x28); this is for reading it from outside Go code. An internally
// linked binary has no PT_TLS and the runtime puts g at -8 on amd64; an
// externally linked one (cgo) places runtime.tlsg in the executable's TLS
// block, which sits below the thread pointer on amd64 (TLS variant II) and
// above the 16-byte thread control block on arm64 (variant I).
func (b *Binary) GTLSOffset() int64 {
	var tls *elf.Prog
	for _, p := range b.File.Progs {
		if p.Type == elf.PT_TLS {
			tls = p
		}
	}
	var sym int64
	if s, ok := b.Symbol("runtime.tlsg"); ok {
		sym = int64(s.Addr)
	} else if s, ok := b.Symbol("runtime.tls_g"); ok {
		sym = int64(s.Addr)
	}
	align := func(n, a uint64) int64 {
		if a == 0 {
			a = 1
		}
		return int64((n + a - 1) &^ (a - 1))
	}
	switch b.Arch {
	case "arm64":
		if tls == nil {
			return 16
		}
		return align(16, tls.Align) + sym
	default:
		if tls == nil {
			return -8
		}
		return -align(tls.Memsz, tls.Align) + sym
	}
}

// Layout is what runtimelayout reads the binary's runtime layout from.
func (b *Binary) Layout() runtimelayout.Source {
	return runtimelayout.Source{File: b.File, DWARF: b.dwarf, Lines: b.Lines, Contents: b, GoVersion: b.GoVersion, Arch: b.Arch}
}

// DWARF returns the reader of the binary's DWARF sections, which reads each
// section once for all its users.
func (b *Binary) DWARF() *dwarfload.Loader { return b.dwarf }

// RuntimeLayout returns the binary's runtime layout (runtimelayout.Load),
// from the cache (bincache.Default) when an earlier gi derived it.
func (b *Binary) RuntimeLayout() (*runtimelayout.RuntimeLayout, *runtimelayout.VersionLayout, error) {
	decodes.Add(decodes.Layout, 1)
	cache := bincache.Default()
	var e layoutEntry
	if cache.Get(b.layoutKey, &e) {
		return &e.Layout, e.Table, nil
	}
	l, table, err := runtimelayout.Load(b.Layout())
	if err != nil {
		return nil, nil, err
	}
	cache.Put(b.layoutKey, layoutEntry{Layout: *l, Table: table}) // a failure is a miss next time
	return l, table, nil
}

// layoutEntry is what the cache keeps of a runtime layout: the layout,
// and the table entry it came from for a binary without DWARF.
type layoutEntry struct {
	Layout runtimelayout.RuntimeLayout
	Table  *runtimelayout.VersionLayout
}

// Pclntab returns the bytes of the pc/line table and its link-time address.
func (b *Binary) Pclntab() (data []byte, addr uint64, err error) {
	return b.findPclntab()
}
