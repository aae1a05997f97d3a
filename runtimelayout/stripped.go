package runtimelayout

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/gi-debug/gi/internal/dwarfload"
	"github.com/gi-debug/gi/pclntab"

	"golang.org/x/arch/x86/x86asm"
)

// Source is the binary a layout is read from: its ELF file (for DWARF), its
// pc/line table and contents (for the code of runtime.allgadd), and its Go
// release and architecture from the build info.
type Source struct {
	File *elf.File
	// DWARF reads File's DWARF sections, shared with the binary's other
	// readers; nil reads them for Load alone.
	DWARF     *dwarfload.Loader
	Lines     *pclntab.LineTable
	Contents  AddressReader
	GoVersion string
	Arch      string
}

// Load returns the runtime layout of a binary: from its DWARF, or, for a
// stripped binary, from the generated table for its Go release with the
// addresses of runtime.allgs and runtime.allglen found in its code. table
// is the table entry used (nil with DWARF): its string tables stand in for
// the binary's.
func Load(bin Source) (l *RuntimeLayout, table *VersionLayout, err error) {
	loader := bin.DWARF
	if loader == nil {
		loader = dwarfload.NewLoader(bin.File)
	}
	dbg, err := LoadDebugFrom(loader)
	if err == nil {
		if l, err = LayoutFromDWARF(dbg); err == nil {
			heapBitsOfBinary(&l.Heap.Bits, bin)
			kindsFromTable(&l.Heap.Bits, bin)
		}
		return l, nil, err
	}
	if !errors.Is(err, ErrNoDWARF) {
		return nil, nil, err
	}
	v, err := TableLayout(bin.GoVersion, bin.Arch)
	if err != nil {
		return nil, nil, err
	}
	cp := v.Layout
	cp.Status = make(map[string]uint32, len(v.Layout.Status))
	for k, s := range v.Layout.Status {
		cp.Status[k] = s
	}
	if cp.AllGs, cp.AllGLen, err = FindAllgs(bin); err != nil {
		return nil, nil, fmt.Errorf("stripped %s binary: %w", bin.GoVersion, err)
	}
	// Without it, sync waiters are said unknown: not fatal.
	cp.Wait.SemTable, _ = FindSemtable(bin)
	// Without them, the heap is not walked (gi ps --leaks says why).
	cp.Heap.MHeap, _ = FindMHeap(bin)
	cp.Heap.Queues.AllFin, _ = FindAllfin(bin)
	heapBitsOfBinary(&cp.Heap.Bits, bin)
	if q := &cp.Heap.Queues; q.CleanupQueueAll != Missing {
		var err error
		if q.GCCleanups, err = FindGCCleanups(bin, q.CleanupQueueAll); errors.Is(err, ErrNoCleanups) {
			q.CleanupQueueAll = Missing // no cleanup can wait: no queue to read
		}
	}
	return &cp, v, nil
}

// heapBitsOfBinary sets what the binary's experiments decide of its
// pointer maps, from function names its pclntab keeps stripped or not:
// the arena bitmap where runtime.heapBitsSetType writes it (Go 1.20,
// 1.21, 1.22 with noallocheaders), the Green Tea collector where it
// scans spans (runtime.scanSpan: 1.25 with greenteagc, 1.26+ but with
// nogreenteagc).
func heapBitsOfBinary(b *HeapBitsLayout, bin Source) {
	if bin.Lines == nil {
		return
	}
	b.ArenaFormat = bin.Lines.FuncByName("runtime.heapBitsSetType") != nil
	b.GreenTea = bin.Lines.FuncByName("runtime.scanSpan") != nil
}

// kindsFromTable fills the type kinds' and flags' constants of b from
// the generated table of the binary's release where its DWARF index
// lacks them (internal/abi's unit, which holds them, placed too far
// from the runtime's): they are the release's, not the binary's.
func kindsFromTable(b *HeapBitsLayout, bin Source) {
	if b.Reason != "" || b.KindArray != Missing {
		return
	}
	v, err := TableLayout(bin.GoVersion, bin.Arch)
	if err != nil {
		return
	}
	t := &v.Layout.Heap.Bits
	b.KindMask, b.KindArray, b.KindStruct, b.KindGCProg, b.TFlagGCMaskOnDemand = t.KindMask, t.KindArray, t.KindStruct, t.KindGCProg, t.TFlagGCMaskOnDemand
}

// FindAllfin locates runtime.allfin, the chain of the blocks queued
// finalizers wait in, in a binary without symbols: the one static
// address both runtime.queuefinalizer (which links a new block in) and
// runtime.markroot (which scans the chain) read or write, but
// runtime.allgadd does not (the write barrier's flag, which all three
// test), that markroot reads as a value (not finptrmask, the blocks'
// pointer mask, whose address it passes on) and that neither loads as a
// byte (arm64's CPU feature flags).
func FindAllfin(b Source) (uint64, error) {
	if err := codeArch(b, "runtime.allfin"); err != nil {
		return 0, err
	}
	common, err := staticRefs(b, "runtime.queuefinalizer")
	if err != nil {
		return 0, err
	}
	markroot, err := staticRefs(b, "runtime.markroot")
	if err != nil {
		return 0, err
	}
	allgadd, err := staticRefs(b, "runtime.allgadd")
	if err != nil {
		return 0, err
	}
	// What markroot reads as a value (a pointer to follow), not the
	// address of (a mask to pass on); not a CPU feature flag.
	code, entry, err := funcCode(b, "runtime.markroot")
	if err != nil {
		return 0, err
	}
	loadedByMarkroot := map[uint64]bool{}
	flags := map[uint64]bool{}
	if b.Arch == "arm64" {
		r := staticRefsARM64(code, entry)
		loadedByMarkroot = r.loads
		for _, name := range []string{"runtime.queuefinalizer", "runtime.markroot"} {
			code, entry, err := funcCode(b, name)
			if err != nil {
				return 0, err
			}
			for a := range staticRefsARM64(code, entry).flags {
				flags[a] = true
			}
		}
	} else {
		taken, err := leaTargets(b, "runtime.markroot")
		if err != nil {
			return 0, err
		}
		for a := range markroot {
			if !taken[a] {
				loadedByMarkroot[a] = true
			}
		}
	}
	for a := range common {
		if !loadedByMarkroot[a] || allgadd[a] || flags[a] {
			delete(common, a)
		}
	}
	if len(common) != 1 {
		return 0, fmt.Errorf("runtime.queuefinalizer and runtime.markroot share %d static addresses, want 1 (runtime.allfin)", len(common))
	}
	for a := range common {
		return a, nil
	}
	return 0, nil
}

// ErrNoCleanups means a binary has no code that runs cleanups
// (runtime.runCleanups was left out by the linker: the program never
// adds one), so none can wait in runtime.gcCleanups.
var ErrNoCleanups = errors.New("the program runs no cleanups")

// FindGCCleanups locates runtime.gcCleanups (Go 1.25+), the queue of
// cleanups, in a binary without symbols: the static address
// runtime.runCleanups takes (to call the queue's methods) whose field
// all, at offset allOff, runtime.markroot reads (to scan every block).
func FindGCCleanups(b Source, allOff int64) (uint64, error) {
	if err := codeArch(b, "runtime.gcCleanups"); err != nil {
		return 0, err
	}
	if b.Lines.FuncByName("runtime.runCleanups") == nil {
		return 0, ErrNoCleanups
	}
	taken, err := leaTargets(b, "runtime.runCleanups")
	if err != nil {
		return 0, err
	}
	markroot, err := staticRefs(b, "runtime.markroot")
	if err != nil {
		return 0, err
	}
	var found []uint64
	for a := range taken {
		if markroot[a+uint64(allOff)] {
			found = append(found, a)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d static addresses runtime.runCleanups takes have a field runtime.markroot reads at +%d, want 1 (runtime.gcCleanups)", len(found), allOff)
	}
	return found[0], nil
}

// staticRefs returns every static address a function's code reads,
// writes or takes: RIP-relative operands (amd64), ADRP-built addresses
// and their loads and stores (arm64).
func staticRefs(b Source, name string) (map[uint64]bool, error) {
	code, entry, err := funcCode(b, name)
	if err != nil {
		return nil, err
	}
	if b.Arch == "arm64" {
		return staticRefsARM64(code, entry).refs, nil
	}
	refs, _, _ := allgaddRefsAMD64(code, entry)
	return refs, nil
}

// funcCode returns the code of the function named name and its entry.
func funcCode(b Source, name string) ([]byte, uint64, error) {
	f := b.Lines.FuncByName(name)
	if f == nil {
		return nil, 0, fmt.Errorf("%s not in the pclntab", name)
	}
	if f.End <= f.Entry || f.End-f.Entry > maxScannedFunc {
		return nil, 0, fmt.Errorf("%s has an implausible size", name)
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := b.Contents.ReadAt(code, f.Entry); err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", name, err)
	}
	return code, f.Entry, nil
}

// FindMHeap locates runtime.mheap_ in a binary without symbols: the one
// static address runtime.(*mcentral).grow, runtime.(*mcache).allocLarge
// and runtime.mallocinit all take (each calls a method of the heap on
// it: mheap_.alloc, mheap_.init).
func FindMHeap(b Source) (uint64, error) {
	if err := codeArch(b, "runtime.mheap_"); err != nil {
		return 0, err
	}
	return commonStatic(b, "runtime.mheap_", "runtime.(*mcentral).grow", "runtime.(*mcache).allocLarge", "runtime.mallocinit")
}

// FindAllgs locates runtime.allgs and runtime.allglen in a binary without
// symbols through the code of runtime.allgadd, found by name in the
// pclntab. That function appends to the allgs slice (it reads and writes
// allgs, allgs+8 and allgs+16) and publishes the length with an atomic
// store: LEAQ runtime.allglen(SB), R; XCHGQ X, 0(R). The other atomic
// store (to allgptr) is told apart by the comparison allgadd makes with it.
//
// On arm64 the same facts read differently: addresses are built with ADRP
// (and ADD, or a load's offset), allgadd compares a loaded allgptr, and the
// atomic stores are STLR to an address built with ADRP and ADD.
func FindAllgs(b Source) (allgs, allglen uint64, err error) {
	if err := codeArch(b, "runtime.allgs"); err != nil {
		return 0, 0, err
	}
	f := b.Lines.FuncByName("runtime.allgadd")
	if f == nil {
		return 0, 0, errors.New("runtime.allgadd not in the pclntab")
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := b.Contents.ReadAt(code, f.Entry); err != nil {
		return 0, 0, fmt.Errorf("read runtime.allgadd: %w", err)
	}
	var refs, compared map[uint64]bool
	var stored []uint64
	if b.Arch == "arm64" {
		r := staticRefsARM64(code, f.Entry)
		refs, compared, stored = r.refs, r.compared, r.stored
	} else {
		refs, compared, stored = allgaddRefsAMD64(code, f.Entry)
	}
	for a := range refs {
		if refs[a+8] && refs[a+16] {
			if allgs != 0 && allgs != a {
				return 0, 0, errors.New("runtime.allgadd references two slices")
			}
			allgs = a
		}
	}
	for _, a := range stored {
		if !compared[a] && a != allgs {
			allglen = a
		}
	}
	if allgs == 0 || allglen == 0 {
		return 0, 0, fmt.Errorf("runtime.allgs (%#x) or runtime.allglen (%#x) not found in runtime.allgadd", allgs, allglen)
	}
	return allgs, allglen, nil
}

// allgaddRefsAMD64 returns the static addresses amd64 code references
// (RIP-relative), those a CMP reads, and the LEAQ targets an XCHG (an
// atomic store) writes through.
func allgaddRefsAMD64(code []byte, entry uint64) (refs, compared map[uint64]bool, stored []uint64) {
	refs = map[uint64]bool{}     // RIP-relative addresses referenced
	compared = map[uint64]bool{} // ... by a CMP
	var lea struct {
		reg  x86asm.Reg
		addr uint64
	}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			break // padding or data: the prologue and body were read
		}
		next := entry + uint64(off+inst.Len)
		off += inst.Len
		for _, a := range inst.Args {
			m, ok := a.(x86asm.Mem)
			if !ok || m.Base != x86asm.RIP {
				continue
			}
			addr := uint64(int64(next) + m.Disp)
			refs[addr] = true
			if inst.Op == x86asm.CMP {
				compared[addr] = true
			}
			if inst.Op == x86asm.LEA {
				if r, ok := inst.Args[0].(x86asm.Reg); ok {
					lea.reg, lea.addr = r, addr
				}
			}
		}
		if inst.Op == x86asm.XCHG && lea.addr != 0 {
			for _, a := range inst.Args {
				if m, ok := a.(x86asm.Mem); ok && m.Base == lea.reg && m.Disp == 0 {
					stored = append(stored, lea.addr)
				}
			}
		}
	}
	return refs, compared, stored
}

// arm64Refs is what staticRefsARM64 finds.
type arm64Refs struct {
	refs     map[uint64]bool // every static address referenced
	compared map[uint64]bool // read by a CMP, through a register loaded from them
	stored   []uint64        // written by an STLR (an atomic store)
	taken    map[uint64]bool // built whole with ADRP and ADD: the arm64 form of a LEAQ
	flags    map[uint64]bool // read as one byte (LDRB): a bool, such as runtime.arm64HasATOMICS
	loads    map[uint64]bool // read (LDR of any size)
}

// staticRefsARM64 follows the static addresses arm64 code builds (ADRP gives
// a page, ADD an offset into it) into the loads and stores that use them; a
// register written any other way is forgotten. Only the instruction classes
// the runtime functions read here use are decoded, from their encodings.
func staticRefsARM64(code []byte, entry uint64) arm64Refs {
	r := arm64Refs{refs: map[uint64]bool{}, compared: map[uint64]bool{}, taken: map[uint64]bool{}, flags: map[uint64]bool{}, loads: map[uint64]bool{}}
	refs, compared, taken := r.refs, r.compared, r.taken
	addr := map[uint32]uint64{}   // register -> the static address it holds
	loaded := map[uint32]uint64{} // register -> the static address it was loaded from
	for off := 0; off+4 <= len(code); off += 4 {
		w := binary.LittleEndian.Uint32(code[off:])
		pc := entry + uint64(off)
		rd, rn := w&31, (w>>5)&31
		switch {
		case w&0x9f000000 == 0x90000000: // ADRP Xd, page
			imm := int64((w>>5)&0x7ffff)<<2 | int64((w>>29)&3)
			imm = imm << 43 >> 43 // sign-extend 21 bits
			addr[rd] = pc&^0xfff + uint64(imm<<12)
			delete(loaded, rd)
		case w&0xff800000 == 0x91000000: // ADD Xd, Xn, #imm{, LSL #12}
			imm := uint64((w >> 10) & 0xfff)
			if w&(1<<22) != 0 {
				imm <<= 12
			}
			base, ok := addr[rn]
			delete(loaded, rd)
			if !ok {
				delete(addr, rd)
				break
			}
			addr[rd] = base + imm
			refs[base+imm] = true
			taken[base+imm] = true
		case w&0x3f000000 == 0x39000000: // LDR/STR (unsigned immediate), any size
			size := w >> 30
			a, ok := addr[rn]
			load := (w>>22)&3 != 0
			if load {
				delete(addr, rd)
				delete(loaded, rd)
			}
			if !ok {
				break
			}
			a += uint64((w>>10)&0xfff) << size
			refs[a] = true
			if load {
				loaded[rd] = a
				r.loads[a] = true
				if size == 0 {
					r.flags[a] = true
				}
			}
		case w&0x7f800000 == 0x29000000 || w&0x7f800000 == 0x29400000: // STP/LDP (signed offset)
			scale := uint(2 + w>>31)
			a, ok := addr[rn]
			if w&(1<<22) != 0 { // LDP: Rt and Rt2 are written
				for _, r := range []uint32{rd, (w >> 10) & 31} {
					delete(addr, r)
					delete(loaded, r)
				}
			}
			if !ok {
				break
			}
			imm := int64((w>>15)&0x7f) << 57 >> 57 << scale
			a += uint64(imm)
			refs[a], refs[a+1<<scale] = true, true
		case w&0xbffffc00 == 0x889ffc00: // STLR Wt|Xt, [Xn]
			if a, ok := addr[rn]; ok {
				r.stored = append(r.stored, a)
			}
		case w&0xff20001f == 0xeb00001f: // CMP Xn, Xm (SUBS XZR, Xn, Xm)
			for _, r := range []uint32{rn, (w >> 16) & 31} {
				if a, ok := loaded[r]; ok {
					compared[a] = true
				}
			}
		case w&0xfc000000 == 0x94000000: // BL: the callee clobbers the registers
			clear(addr)
			clear(loaded)
		default:
			// Any other instruction that writes Rd: forget it. Stores,
			// compares and branches that do not write Rd name their
			// source there; forgetting it is only conservative.
			delete(addr, rd)
			delete(loaded, rd)
		}
	}
	return r
}

// FindSemtable locates runtime.semtable in a binary without symbols: the
// one static address both runtime.semacquire1 and runtime.semrelease1 take
// with a RIP-relative LEAQ (semroot, inlined in both, indexes the table).
func FindSemtable(b Source) (uint64, error) {
	if err := codeArch(b, "runtime.semtable"); err != nil {
		return 0, err
	}
	return commonStatic(b, "runtime.semtable", "runtime.semacquire1", "runtime.semrelease1")
}

// commonStatic returns the one static address that every function of
// funcs takes (leaTargets): the variable what.
func commonStatic(b Source, what string, funcs ...string) (uint64, error) {
	var common map[uint64]bool
	for _, name := range funcs {
		leas, err := leaTargets(b, name)
		if err != nil {
			return 0, err
		}
		if common == nil {
			common = leas
			continue
		}
		for a := range common {
			if !leas[a] {
				delete(common, a)
			}
		}
	}
	if len(common) != 1 {
		return 0, fmt.Errorf("%s share %d static addresses, want 1 (%s)", strings.Join(funcs, ", "), len(common), what)
	}
	for a := range common {
		return a, nil
	}
	return 0, nil
}

// maxScannedFunc bounds the code decoded from one function.
const maxScannedFunc = 1 << 16

// leaTargets returns the static addresses a function takes: with a
// RIP-relative LEAQ (amd64), with ADRP and ADD (arm64).
func leaTargets(b Source, name string) (map[uint64]bool, error) {
	f := b.Lines.FuncByName(name)
	if f == nil {
		return nil, fmt.Errorf("%s not in the pclntab", name)
	}
	if f.End <= f.Entry || f.End-f.Entry > maxScannedFunc {
		return nil, fmt.Errorf("%s has an implausible size", name)
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := b.Contents.ReadAt(code, f.Entry); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if b.Arch == "arm64" {
		r := staticRefsARM64(code, f.Entry)
		for a := range r.flags {
			delete(r.taken, a) // CPU feature flags (arm64HasATOMICS), not tables
		}
		return r.taken, nil
	}
	out := map[uint64]bool{}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			off++ // padding or data: resynchronise
			continue
		}
		next := f.Entry + uint64(off+inst.Len)
		off += inst.Len
		if inst.Op != x86asm.LEA {
			continue
		}
		if m, ok := inst.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP {
			out[uint64(int64(next)+m.Disp)] = true
		}
	}
	return out, nil
}

// codeArch checks that gi can find variable name in b's code: it reads
// amd64 and arm64 code only.
func codeArch(b Source, name string) error {
	if b.Arch != "amd64" && b.Arch != "arm64" {
		return fmt.Errorf("finding %s without symbols is implemented for amd64 and arm64, not %s", name, b.Arch)
	}
	return nil
}
