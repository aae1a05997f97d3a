// Package pclntab decodes the Go runtime's pc/line table: the functions of
// a binary, their files and lines, frame sizes (pcsp) and inline trees, the
// way the runtime's own traceback reads them. It survives stripping: a
// binary without symbols or DWARF still has it.
package pclntab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// pcHeader magics (internal/abi.PCLnTabMagic).
const (
	go118Magic = 0xfffffff0 // Go 1.18 and 1.19
	go120Magic = 0xfffffff1 // Go 1.20 and later
)

// Magics are the first words of the pclntabs the decoder reads, newest
// first: a stripped binary's table is found by them.
var Magics = []uint32{go120Magic, go118Magic}

// Indexes of the pcdata and funcdata tables the decoder uses
// (internal/abi: PCDATA_InlTreeIndex, FUNCDATA_InlTree).
const (
	pcdataUnsafePoint  = 0
	pcdataInlTreeIndex = 2
	funcdataInlTree    = 3
)

// Values of the PCDATA_UnsafePoint table (internal/abi) that make the
// runtime's asynchronous preemption resume a goroutine before the
// preempted pc: at the start of a restartable instruction sequence
// (UnsafePointRestart1, UnsafePointRestart2; the arm64, loong64, mips,
// ppc64 and riscv64 assemblers emit them), or at the function's entry
// (UnsafePointRestartAtEntry).
const (
	unsafePointRestart1       = -3
	unsafePointRestart2       = -4
	unsafePointRestartAtEntry = -5
)

// maxInlineDepth bounds the walk up an inline tree: the compiler's inlining
// budget keeps real chains far shorter, a longer one means a corrupt table.
const maxInlineDepth = 1000

// LineTable decodes the Go pclntab: functions, lines, SP deltas and inline
// trees. It holds its own copy of the tables and is safe for concurrent use.
// All pcs are link-time addresses.
type LineTable struct {
	order     binary.ByteOrder
	magic     uint32
	quantum   uint64 // pc quantum: 1 on amd64, 4 on arm64
	textStart uint64 // moduledata.text: function entries are offsets from it

	funcnametab string // names, NUL-terminated
	filetab     string // file names, NUL-terminated
	cutab       []byte // uint32 per (CU, file index): offset into filetab
	pctab       []byte // pcvalue tables
	pclntable   []byte // functab followed by the _func records

	funcSize int // size of the fixed part of _func
	inlSize  int // size of an inlinedCall record

	funcs []Func
	ptrs  []*Func

	module uint64 // address of runtime.firstmoduledata, 0 if not found

	// go:func.* (moduledata.gofunc): funcdata offsets are relative to it.
	gofunc     uint64
	gofuncData []byte
	gofuncErr  error

	maxFuncID    uint8 // over physical functions
	switchFuncID uint8 // of runtime.systemstack_switch

	nameOnce sync.Once
	byName   map[string]*Func

	wrapOnce sync.Once
	wrapper  uint8
}

// Func is a physical function of the pc/line table.
type Func struct {
	// Name is the function's symbol name as the linker recorded it
	// ("main.(*T).M", "main.gen[go.shape.int]"): unlike runtime.Frame it is
	// not rewritten for printing.
	Name string
	// Entry and End bound the function's code: [Entry, End), link-time.
	Entry, End uint64
	// StartLine is the line of the func keyword (0 before Go 1.20).
	StartLine int
	// FuncID is the raw abi.FuncID byte. Its values differ across Go
	// releases: map by name, or compare with LineTable.WrapperFuncID.
	FuncID uint8
	// Flag is the raw abi.FuncFlag: TopFrame=1, SPWrite=2, Asm=4.
	Flag uint8
	// Args is the size of the arguments' area in the caller's frame
	// (_func.args), ArgsSizeUnknown when the function does not say.
	Args int32

	off       uint32 // offset of the _func record in pclntable
	pcsp      uint32
	pcfile    uint32
	pcln      uint32
	npcdata   uint32
	cuOffset  uint32
	nfuncdata uint8
}

// HasLines reports whether f has file and line tables (marker symbols and
// some assembly have none).
func (f *Func) HasLines() bool { return f.pcfile != 0 && f.pcln != 0 }

// Frame is a logical frame: a physical function or a call inlined into it.
type Frame struct {
	// Function is the raw symbol name of the (possibly inlined) function.
	Function string
	// File and Line locate the pc within Function: for an outer frame, the
	// call site of the next inner one.
	File string
	Line int
	// FuncID is the raw abi.FuncID of Function.
	FuncID uint8
	// StartLine is the line of Function's func keyword (0 before Go 1.20).
	StartLine int
	// Inlined is true for every frame but the last, the physical function.
	Inlined bool
	// PC is the link-time pc this frame was looked up by: the pc passed to
	// Frames for the innermost frame, entry+parentPc for the outer ones (the
	// runtime reports PC+1 in runtime.Callers and PC in runtime.Frame.PC).
	PC uint64
}

// The layout of runtime._func and runtime.inlinedCall from Go 1.20 on, as
// the decoder reads them from the pclntab and go:func.* (a stripped binary
// has no DWARF to describe them). Records publishes them, and
// runtimelayout's TestRecordsMatchDWARF checks every offset and size
// against the DWARF of each release in the generated table.
const (
	funcEntryOff  = 0  // _func.entryOff uint32
	funcNameOff   = 4  // _func.nameOff int32
	funcArgs      = 8  // _func.args int32
	funcPcsp      = 16 // _func.pcsp uint32
	funcPcfile    = 20 // _func.pcfile uint32
	funcPcln      = 24 // _func.pcln uint32
	funcNpcdata   = 28 // _func.npcdata uint32
	funcCuOffset  = 32 // _func.cuOffset uint32
	funcStartLine = 36 // _func.startLine int32
	funcFuncID    = 40 // _func.funcID abi.FuncID (uint8)
	funcFlag      = 41 // _func.flag abi.FuncFlag (uint8)
	funcNfuncdata = 43 // _func.nfuncdata uint8
	funcSize      = 44 // sizeof(_func), before its pcdata and funcdata arrays

	inlFuncID    = 0  // inlinedCall.funcID abi.FuncID (uint8)
	inlNameOff   = 4  // inlinedCall.nameOff int32
	inlParentPc  = 8  // inlinedCall.parentPc int32
	inlStartLine = 12 // inlinedCall.startLine int32
	inlSize      = 16 // sizeof(inlinedCall)
)

// Field is one field of a runtime record as the decoder reads it.
type Field struct {
	Name         string
	Offset, Size int64
}

// Record is a runtime struct the decoder reads without DWARF.
type Record struct {
	Type   string // DWARF name: "runtime._func"
	Size   int64
	Fields []Field
}

// Records are the layouts of runtime._func and runtime.inlinedCall the
// decoder assumes (Go 1.20 and later), for tests to check against DWARF.
var Records = []Record{
	{"runtime._func", funcSize, []Field{
		{"entryOff", funcEntryOff, 4}, {"nameOff", funcNameOff, 4}, {"args", funcArgs, 4}, {"pcsp", funcPcsp, 4}, {"pcfile", funcPcfile, 4},
		{"pcln", funcPcln, 4}, {"npcdata", funcNpcdata, 4}, {"cuOffset", funcCuOffset, 4}, {"startLine", funcStartLine, 4},
		{"funcID", funcFuncID, 1}, {"flag", funcFlag, 1}, {"nfuncdata", funcNfuncdata, 1},
	}},
	{"runtime.inlinedCall", inlSize, []Field{{"funcID", inlFuncID, 1}, {"nameOff", inlNameOff, 4}, {"parentPc", inlParentPc, 4}, {"startLine", inlStartLine, 4}}},
}

// Header is the decoded runtime.pcHeader.
type Header struct {
	magic     uint32
	quantum   uint8
	ptrSize   uint8
	nfunc     uint64
	nfiles    uint64
	textStart uint64 // 0 from Go 1.26 on
	// offsets from the header of funcnametab, cutab, filetab, pctab, pclntable
	offs [5]uint64
}

// Go118 reports whether the table has the layout of Go 1.18 and 1.19.
func (h *Header) Go118() bool { return h.magic == go118Magic }

// NFunc is the number of functions in the table.
func (h *Header) NFunc() uint64 { return h.nfunc }

// TextStart is the header's record of moduledata.text, 0 from Go 1.26 on.
func (h *Header) TextStart() uint64 { return h.textStart }

// TableOffset is the offset from the header of table i: 0 funcnametab,
// 1 cutab, 2 filetab, 3 pctab, 4 pclntable (the function table).
func (h *Header) TableOffset(i int) uint64 { return h.offs[i] }

// Module locates what a pclntab refers to outside itself, as the binary's
// moduledata (or its symbols) say.
type Module struct {
	// TextStart is moduledata.text: function entries are offsets from it.
	TextStart uint64
	// Addr is the address of runtime.firstmoduledata, 0 if unknown.
	Addr uint64
	// GoFunc is the address of go:func.* (funcdata offsets, inline trees
	// are relative to it) and GoFuncData its contents up to the end of its
	// section; GoFuncErr says why they are unavailable.
	GoFunc     uint64
	GoFuncData []byte
	GoFuncErr  error
}

// Decode decodes the pclntab in data, whose header h is, for a binary of
// byte order order laid out as m says. The LineTable refers to data
// instead of copying its tables (tens of MB in a big binary, usually a
// mapping of the executable): data must not change afterwards.
func Decode(data []byte, order binary.ByteOrder, h *Header, m Module) (*LineTable, error) {
	t := &LineTable{order: order, magic: h.magic, quantum: uint64(h.quantum), textStart: m.TextStart, module: m.Addr,
		gofunc: m.GoFunc, gofuncData: m.GoFuncData, gofuncErr: m.GoFuncErr}
	if err := t.parse(data, h); err != nil {
		return nil, err
	}
	return t, nil
}

// TextStart is the address function entries are offsets from.
func (t *LineTable) TextStart() uint64 { return t.textStart }

// GoFunc is the address of go:func.*, 0 if unknown.
func (t *LineTable) GoFunc() uint64 { return t.gofunc }

// GoFuncErr says why inline trees are unavailable, nil if they are.
func (t *LineTable) GoFuncErr() error { return t.gofuncErr }

// Module is the address of runtime.firstmoduledata, 0 if it was not found.
func (t *LineTable) Module() uint64 { return t.module }

// ParseHeader decodes the runtime.pcHeader at the start of a pclntab.
func ParseHeader(data []byte, order binary.ByteOrder) (*Header, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("pclntab of %d bytes is too short", len(data))
	}
	h := &Header{magic: order.Uint32(data), quantum: data[6], ptrSize: data[7]}
	if h.magic != go118Magic && h.magic != go120Magic {
		return nil, fmt.Errorf("unsupported pclntab magic %#x (Go 1.18 or later is needed)", h.magic)
	}
	if data[4] != 0 || data[5] != 0 || (h.quantum != 1 && h.quantum != 2 && h.quantum != 4) || h.ptrSize != 8 {
		return nil, fmt.Errorf("bad pclntab header: pad %d,%d, pc quantum %d, pointer size %d", data[4], data[5], h.quantum, h.ptrSize)
	}
	if len(data) < 8+8*8 {
		return nil, fmt.Errorf("pclntab of %d bytes is too short", len(data))
	}
	word := func(i int) uint64 { return order.Uint64(data[8+8*i:]) }
	h.nfunc, h.nfiles, h.textStart = word(0), word(1), word(2)
	for i := range h.offs {
		h.offs[i] = word(3 + i)
		if h.offs[i] > uint64(len(data)) {
			return nil, fmt.Errorf("bad pclntab header: table %d at offset %#x past the end (%#x)", i, h.offs[i], len(data))
		}
	}
	return h, nil
}

// table returns header table i, up to the next table or the end of data.
func (h *Header) table(data []byte, i int) []byte {
	start, end := h.offs[i], uint64(len(data))
	for _, o := range h.offs {
		if o > start && o < end {
			end = o
		}
	}
	return data[start:end]
}

// bytesString returns b as a string without copying it: b must not change
// afterwards (see Decode).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (t *LineTable) parse(data []byte, h *Header) error {
	t.funcnametab = bytesString(h.table(data, 0))
	t.cutab = h.table(data, 1)
	t.filetab = bytesString(h.table(data, 2))
	t.pctab = h.table(data, 3)
	t.pclntable = data[h.offs[4]:]
	t.funcSize, t.inlSize = funcSize, inlSize
	if h.magic == go118Magic {
		t.funcSize, t.inlSize = 40, 20 // no startLine; old inlinedCall
	}
	if h.nfunc > uint64(len(t.pclntable))/8 {
		return fmt.Errorf("functab of %d functions overflows the table (%d bytes)", h.nfunc, len(t.pclntable))
	}
	nfunc := int(h.nfunc)
	ft := t.pclntable
	if (2*nfunc+1)*4 > len(ft) {
		return fmt.Errorf("functab of %d functions overflows the table (%d bytes)", nfunc, len(ft))
	}
	t.funcs = make([]Func, nfunc)
	t.ptrs = make([]*Func, nfunc)
	u32 := t.order.Uint32
	for i := range t.funcs {
		entryOff, funcOff, endOff := u32(ft[8*i:]), u32(ft[8*i+4:]), u32(ft[8*i+8:])
		if endOff < entryOff {
			return fmt.Errorf("functab entry %d: entry %#x after the next one %#x", i, entryOff, endOff)
		}
		if uint64(funcOff)+uint64(t.funcSize) > uint64(len(ft)) {
			return fmt.Errorf("functab entry %d: _func at %#x past the end", i, funcOff)
		}
		r := ft[funcOff:]
		f := &t.funcs[i]
		*f = Func{
			Entry:     t.textStart + uint64(entryOff),
			End:       t.textStart + uint64(endOff),
			off:       funcOff,
			Args:      int32(u32(r[funcArgs:])),
			pcsp:      u32(r[funcPcsp:]),
			pcfile:    u32(r[funcPcfile:]),
			pcln:      u32(r[funcPcln:]),
			npcdata:   u32(r[funcNpcdata:]),
			cuOffset:  u32(r[funcCuOffset:]),
			FuncID:    r[t.funcSize-(funcSize-funcFuncID)],
			Flag:      r[t.funcSize-(funcSize-funcFlag)],
			nfuncdata: r[t.funcSize-(funcSize-funcNfuncdata)],
		}
		if t.funcSize == funcSize {
			f.StartLine = int(int32(u32(r[funcStartLine:])))
		}
		if u32(r[funcEntryOff:]) != entryOff {
			return fmt.Errorf("functab entry %d: _func at %#x has entry %#x, want %#x", i, funcOff, u32(r), entryOff)
		}
		if f.npcdata > 1<<16 || uint64(funcOff)+uint64(t.funcSize)+4*(uint64(f.npcdata)+uint64(f.nfuncdata)) > uint64(len(ft)) {
			return fmt.Errorf("functab entry %d: _func at %#x: %d pcdata and %d funcdata overflow the table", i, funcOff, f.npcdata, f.nfuncdata)
		}
		name, err := t.name(int32(u32(r[funcNameOff:])))
		if err != nil {
			return fmt.Errorf("functab entry %d: %w", i, err)
		}
		f.Name = name
		t.ptrs[i] = f
		if f.FuncID > t.maxFuncID {
			t.maxFuncID = f.FuncID
		}
		if f.Name == "runtime.systemstack_switch" {
			t.switchFuncID = f.FuncID
		}
	}
	return nil
}

// name returns the NUL-terminated string at off in funcnametab, without
// copying. (Offset 0 is the name of the first function written, not "".)
func (t *LineTable) name(off int32) (string, error) {
	if off < 0 || int(off) >= len(t.funcnametab) {
		return "", fmt.Errorf("function name offset %#x out of range", off)
	}
	s := t.funcnametab[off:]
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i], nil
	}
	return "", fmt.Errorf("function name at %#x not terminated", off)
}

// Funcs returns all functions sorted by Entry. The slice is shared: do
// not modify it.
func (t *LineTable) Funcs() []*Func {
	return t.ptrs
}

// FuncForPC returns the function whose code holds the link-time pc, or nil.
// It does not allocate.
func (t *LineTable) FuncForPC(pc uint64) *Func {
	fs := t.funcs
	if len(fs) == 0 || pc < fs[0].Entry || pc >= fs[len(fs)-1].End {
		return nil
	}
	// Largest i with fs[i].Entry <= pc; fs[0] qualifies.
	lo, hi := 0, len(fs)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if fs[m].Entry <= pc {
			lo = m
		} else {
			hi = m
		}
	}
	if pc >= fs[lo].End {
		return nil
	}
	return &fs[lo]
}

// FuncByName returns the function with the given symbol name, or nil. The
// index is built on first use. A name can belong to two functions: an
// assembly function and its ABIInternal wrapper, or a Go function and its
// ABI0 wrapper (.abi0 in the symbol table); FuncByName then returns the one
// that is not a wrapper (FuncID != WrapperFuncID), else the lowest.
func (t *LineTable) FuncByName(name string) *Func {
	t.nameOnce.Do(func() {
		w := t.WrapperFuncID()
		t.byName = make(map[string]*Func, len(t.funcs))
		for i := range t.funcs {
			f := &t.funcs[i]
			if g, dup := t.byName[f.Name]; !dup || g.FuncID == w && f.FuncID != w {
				t.byName[f.Name] = f
			}
		}
	})
	return t.byName[name]
}

// checkPC validates the arguments of the pc lookups.
func (t *LineTable) checkPC(f *Func, pc uint64) error {
	if f == nil {
		return errors.New("nil function")
	}
	if pc < f.Entry || pc >= f.End {
		return fmt.Errorf("pc %#x outside %s [%#x, %#x)", pc, f.Name, f.Entry, f.End)
	}
	return nil
}

// pcvalue decodes the pcvalue table at off in pctab up to pc, as the
// runtime's pcvalue does: zigzag varint value deltas and pc deltas scaled by
// the pc quantum, starting from value -1 at the entry. Each step consumes at
// least two bytes, so a corrupt table ends in an error, not a loop.
func (t *LineTable) pcvalue(f *Func, off uint32, pc uint64) (int32, error) {
	v, _, _, err := t.pcvalueRun(f, off, pc)
	return v, err
}

// pcvalueRun is pcvalue that also returns the run of pcs [start, end)
// around pc over which the table keeps the value.
func (t *LineTable) pcvalueRun(f *Func, off uint32, pc uint64) (val int32, start, end uint64, err error) {
	if off == 0 {
		return -1, 0, 0, errNoTable
	}
	if uint64(off) >= uint64(len(t.pctab)) {
		return -1, 0, 0, fmt.Errorf("pcvalue table offset %#x out of range", off)
	}
	p := t.pctab[off:]
	val = int32(-1)
	cur := f.Entry
	for {
		if len(p) == 0 {
			return -1, 0, 0, fmt.Errorf("pcvalue table at %#x: truncated", off)
		}
		if p[0] == 0 && cur != f.Entry {
			return -1, 0, 0, fmt.Errorf("pcvalue table at %#x: pc %#x not covered (ends at %#x)", off, pc, cur)
		}
		uv, n := uvarint(p)
		if n <= 0 {
			return -1, 0, 0, fmt.Errorf("pcvalue table at %#x: bad varint", off)
		}
		p = p[n:]
		val += int32(-(uv & 1) ^ (uv >> 1))
		pcDelta, n := uvarint(p)
		if n <= 0 {
			return -1, 0, 0, fmt.Errorf("pcvalue table at %#x: bad varint", off)
		}
		p = p[n:]
		start, cur = cur, cur+uint64(pcDelta)*t.quantum
		if pc < cur {
			return val, start, cur, nil
		}
	}
}

// RestartSequence reports whether the runtime's asynchronous preemption,
// when it stops a goroutine anywhere in [pc, end), resumes it at or before
// pc instead of where it stopped: pc lies in a restartable instruction
// sequence that ends at end. A probe at such a pc fires twice for one
// call when a preemption signal lands right after it (SIGURG is held back
// until the probed instruction's single-step is over, so it tends to land
// exactly there). Functions without the table, and pcs outside such
// sequences, give false.
func (t *LineTable) RestartSequence(f *Func, pc uint64) (end uint64, ok bool, err error) {
	if err := t.checkPC(f, pc); err != nil {
		return 0, false, err
	}
	if pcdataUnsafePoint >= f.npcdata {
		return 0, false, nil
	}
	off := t.order.Uint32(t.pclntable[uint64(f.off)+uint64(t.funcSize)+4*pcdataUnsafePoint:])
	if off == 0 {
		return 0, false, nil
	}
	v, _, end, err := t.pcvalueRun(f, off, pc)
	if err != nil {
		return 0, false, fmt.Errorf("%s: pc %#x: unsafe points: %w", f.Name, pc, err)
	}
	switch v {
	case unsafePointRestart1, unsafePointRestart2, unsafePointRestartAtEntry:
		return end, true, nil
	}
	return 0, false, nil
}

var errNoTable = errors.New("no table")

// uvarint decodes a uint32 varint; n <= 0 on error.
func uvarint(p []byte) (v uint32, n int) {
	var shift uint
	for i, c := range p {
		if i == 5 {
			return 0, -1
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, i + 1
		}
		shift += 7
	}
	return 0, 0
}

// FileLine returns the file and line of the instruction at the link-time pc
// in f (the pcfile and pcln tables): for a pc in inlined code, the position
// within the innermost inlined function.
func (t *LineTable) FileLine(f *Func, pc uint64) (file string, line int, err error) {
	if err := t.checkPC(f, pc); err != nil {
		return "", 0, err
	}
	fileno, err := t.pcvalue(f, f.pcfile, pc)
	if err != nil {
		return "", 0, fmt.Errorf("%s: pc %#x: pcfile: %w", f.Name, pc, err)
	}
	ln, err := t.pcvalue(f, f.pcln, pc)
	if err != nil {
		return "", 0, fmt.Errorf("%s: pc %#x: pcln: %w", f.Name, pc, err)
	}
	file, err = t.file(f.cuOffset, fileno)
	if err != nil {
		return "", 0, fmt.Errorf("%s: pc %#x: %w", f.Name, pc, err)
	}
	return file, int(ln), nil
}

// file returns the name of file fileno of the compilation unit at cuOffset.
func (t *LineTable) file(cuOffset uint32, fileno int32) (string, error) {
	if fileno < 0 {
		return "", fmt.Errorf("bad file index %d", fileno)
	}
	i := uint64(cuOffset) + uint64(fileno)
	if i >= uint64(len(t.cutab))/4 {
		return "", fmt.Errorf("file index %d of CU %d out of range", fileno, cuOffset)
	}
	off := t.order.Uint32(t.cutab[4*i:])
	if off == ^uint32(0) || uint64(off) >= uint64(len(t.filetab)) {
		return "", fmt.Errorf("file index %d of CU %d: bad filetab offset %#x", fileno, cuOffset, off)
	}
	s := t.filetab[off:]
	if j := strings.IndexByte(s, 0); j >= 0 {
		return s[:j], nil
	}
	return "", fmt.Errorf("file name at %#x not terminated", off)
}

// SPDelta returns the pcsp table value at the link-time pc in f: how far
// SP is below its value at the function's entry (what runtime.funcspdelta
// returns). The runtime's unwinder looks it up at the frame's pc itself (a
// return address for caller frames, not minus 1) and computes the frame's
// top as SP+SPDelta+8 on amd64 (past the return address), SP+SPDelta on
// arm64.
func (t *LineTable) SPDelta(f *Func, pc uint64) (int64, error) {
	if err := t.checkPC(f, pc); err != nil {
		return 0, err
	}
	v, err := t.pcvalue(f, f.pcsp, pc)
	if err != nil {
		return 0, fmt.Errorf("%s: pc %#x: pcsp: %w", f.Name, pc, err)
	}
	return int64(v), nil
}

// pcdata returns the value of pcdata table idx at pc, -1 if f has no such
// table.
func (t *LineTable) pcdata(f *Func, idx uint32, pc uint64) (int32, error) {
	if idx >= f.npcdata {
		return -1, nil
	}
	off := t.order.Uint32(t.pclntable[uint64(f.off)+uint64(t.funcSize)+4*uint64(idx):])
	if off == 0 {
		return -1, nil
	}
	return t.pcvalue(f, off, pc)
}

// funcdata returns the offset from go:func.* of funcdata idx of f, false if
// f has none.
func (t *LineTable) funcdata(f *Func, idx uint8) (uint32, bool) {
	if idx >= f.nfuncdata {
		return 0, false
	}
	off := t.order.Uint32(t.pclntable[uint64(f.off)+uint64(t.funcSize)+4*uint64(f.npcdata)+4*uint64(idx):])
	return off, off != ^uint32(0)
}

// inlinedCall is a decoded runtime.inlinedCall.
type inlinedCall struct {
	funcID    uint8
	nameOff   int32
	parentPc  int32
	startLine int32
}

// inlinedCall reads entry ix of the inline tree at offset tree from go:func.*.
func (t *LineTable) inlinedCall(tree uint32, ix int32) (inlinedCall, error) {
	if t.gofuncErr != nil {
		return inlinedCall{}, t.gofuncErr
	}
	if ix < 0 {
		return inlinedCall{}, fmt.Errorf("bad inline tree index %d", ix)
	}
	at := uint64(tree) + uint64(ix)*uint64(t.inlSize)
	if at+uint64(t.inlSize) > uint64(len(t.gofuncData)) {
		return inlinedCall{}, fmt.Errorf("inline tree entry %d at go:func.*+%#x out of range", ix, at)
	}
	r := t.gofuncData[at:]
	i32 := func(o int) int32 { return int32(t.order.Uint32(r[o:])) }
	if t.magic == go118Magic {
		// parent int16, funcID, _ byte, file, line, func_, parentPc int32
		return inlinedCall{funcID: r[2], nameOff: i32(12), parentPc: i32(16)}, nil
	}
	return inlinedCall{funcID: r[inlFuncID], nameOff: i32(inlNameOff), parentPc: i32(inlParentPc), startLine: i32(inlStartLine)}, nil
}

// Frames returns the logical frames at the link-time pc in f, innermost
// first: one per inlined call, then f itself. It walks the inline tree as
// the runtime's inlineUnwinder does (runtime/symtabinl.go): the innermost
// frame is looked up at pc, each outer one at f.Entry plus the parentPc of
// the inlined call. Wrapper frames are not elided: compare FuncID with
// WrapperFuncID to do what the runtime's tracebacks do. pc should be a
// "call pc": for a return address, pass the address minus 1.
func (t *LineTable) Frames(f *Func, pc uint64) ([]Frame, error) {
	if err := t.checkPC(f, pc); err != nil {
		return nil, err
	}
	tree, hasTree := t.funcdata(f, funcdataInlTree)
	frames := make([]Frame, 0, 4)
	for depth := 0; ; depth++ {
		file, line, err := t.FileLine(f, pc)
		if err != nil {
			return nil, err
		}
		ix := int32(-1)
		if hasTree {
			if ix, err = t.pcdata(f, pcdataInlTreeIndex, pc); err != nil {
				return nil, fmt.Errorf("%s: pc %#x: inline tree index: %w", f.Name, pc, err)
			}
		}
		if ix < 0 {
			return append(frames, Frame{
				Function:  f.Name,
				File:      file,
				Line:      line,
				FuncID:    f.FuncID,
				StartLine: f.StartLine,
				PC:        pc,
			}), nil
		}
		if depth == maxInlineDepth {
			return nil, fmt.Errorf("%s: pc %#x: inline tree deeper than %d: corrupt", f.Name, pc, maxInlineDepth)
		}
		call, err := t.inlinedCall(tree, ix)
		if err != nil {
			return nil, fmt.Errorf("%s: pc %#x: %w", f.Name, pc, err)
		}
		name, err := t.name(call.nameOff)
		if err != nil {
			return nil, fmt.Errorf("%s: pc %#x: inline tree entry %d: %w", f.Name, pc, ix, err)
		}
		frames = append(frames, Frame{
			Function:  name,
			File:      file,
			Line:      line,
			FuncID:    call.funcID,
			StartLine: int(call.startLine),
			Inlined:   true,
			PC:        pc,
		})
		if call.parentPc < 0 || f.Entry+uint64(call.parentPc) >= f.End {
			return nil, fmt.Errorf("%s: pc %#x: inline tree entry %d: parent pc %#x outside the function", f.Name, pc, ix, call.parentPc)
		}
		pc = f.Entry + uint64(call.parentPc)
	}
}

// WrapperFuncID returns this binary's abi.FuncIDWrapper, the FuncID of
// compiler-generated wrappers: pointer-receiver and interface method
// wrappers, method values (-fm), go/defer statement wrappers (gowrap,
// deferwrap) and ABI wrappers. (Despite the abi comment, type:.eq.* and
// type:.hash.* functions are FuncIDNormal.) It is the last FuncID value in
// every Go release from 1.18 to 1.26 but its number changes (21 up to Go
// 1.21, 22 up to 1.24, 23 since 1.25), so it is derived from the binary:
// the largest FuncID over all functions and inline tree entries, and at
// least one more than runtime.systemstack_switch's, which precedes it in
// every release. Computed on first use.
func (t *LineTable) WrapperFuncID() uint8 {
	t.wrapOnce.Do(func() {
		w := t.maxFuncID
		if t.switchFuncID != 0 && t.switchFuncID+1 > w {
			w = t.switchFuncID + 1
		}
		if id := t.maxInlinedFuncID(); id > w {
			w = id
		}
		t.wrapper = w
	})
	return t.wrapper
}

// maxInlinedFuncID returns the largest FuncID over all inline tree entries
// reachable through the functions' inline tree index tables.
func (t *LineTable) maxInlinedFuncID() uint8 {
	var max uint8
	for i := range t.funcs {
		f := &t.funcs[i]
		tree, ok := t.funcdata(f, funcdataInlTree)
		if !ok || pcdataInlTreeIndex >= f.npcdata || t.gofuncErr != nil {
			continue
		}
		top := t.maxPCData(f, pcdataInlTreeIndex)
		for ix := int32(0); ix <= top; ix++ {
			call, err := t.inlinedCall(tree, ix)
			if err != nil {
				break
			}
			if call.funcID > max {
				max = call.funcID
			}
		}
	}
	return max
}

// maxPCData returns the largest value of pcdata table idx of f, -1 if none.
func (t *LineTable) maxPCData(f *Func, idx uint32) int32 {
	off := t.order.Uint32(t.pclntable[uint64(f.off)+uint64(t.funcSize)+4*uint64(idx):])
	if off == 0 || uint64(off) >= uint64(len(t.pctab)) {
		return -1
	}
	p := t.pctab[off:]
	val, max := int32(-1), int32(-1)
	cur := f.Entry
	for len(p) > 0 && !(p[0] == 0 && cur != f.Entry) && cur < f.End {
		uv, n := uvarint(p)
		if n <= 0 {
			break
		}
		p = p[n:]
		val += int32(-(uv & 1) ^ (uv >> 1))
		if val > max {
			max = val
		}
		d, n := uvarint(p)
		if n <= 0 {
			break
		}
		p = p[n:]
		cur += uint64(d) * t.quantum
	}
	return max
}
