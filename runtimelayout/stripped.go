package runtimelayout

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/gi-debug/gi/pclntab"

	"golang.org/x/arch/x86/x86asm"
)

// Source is the binary a layout is read from: its ELF file (for DWARF), its
// pc/line table and contents (for the code of runtime.allgadd), and its Go
// release and architecture from the build info.
type Source struct {
	File      *elf.File
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
	dbg, err := LoadDebug(bin.File)
	if err == nil {
		l, err = LayoutFromDWARF(dbg)
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
	return &cp, v, nil
}

// FindAllgs locates runtime.allgs and runtime.allglen in a binary without
// symbols through the code of runtime.allgadd, found by name in the
// pclntab. That function appends to the allgs slice (it reads and writes
// allgs, allgs+8 and allgs+16) and publishes the length with an atomic
// store: LEAQ runtime.allglen(SB), R; XCHGQ X, 0(R). The other atomic
// store (to allgptr) is told apart by the comparison allgadd makes with it.
func FindAllgs(b Source) (allgs, allglen uint64, err error) {
	if b.Arch != "amd64" {
		return 0, 0, fmt.Errorf("finding runtime.allgs without symbols is implemented for amd64 only, not %s", b.Arch)
	}
	f := b.Lines.FuncByName("runtime.allgadd")
	if f == nil {
		return 0, 0, errors.New("runtime.allgadd not in the pclntab")
	}
	code := make([]byte, f.End-f.Entry)
	if _, err := b.Contents.ReadAt(code, f.Entry); err != nil {
		return 0, 0, fmt.Errorf("read runtime.allgadd: %w", err)
	}
	refs := map[uint64]bool{}     // RIP-relative addresses referenced
	compared := map[uint64]bool{} // ... by a CMP
	var stored []uint64           // LEAQ targets used by the next XCHG
	var lea struct {
		reg  x86asm.Reg
		addr uint64
	}
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			break // padding or data: the prologue and body were read
		}
		next := f.Entry + uint64(off+inst.Len)
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

// FindSemtable locates runtime.semtable in a binary without symbols: the
// one static address both runtime.semacquire1 and runtime.semrelease1 take
// with a RIP-relative LEAQ (semroot, inlined in both, indexes the table).
func FindSemtable(b Source) (uint64, error) {
	if b.Arch != "amd64" {
		return 0, fmt.Errorf("finding runtime.semtable without symbols is implemented for amd64 only, not %s", b.Arch)
	}
	var common map[uint64]bool
	for _, name := range []string{"runtime.semacquire1", "runtime.semrelease1"} {
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
		return 0, fmt.Errorf("runtime.semacquire1 and runtime.semrelease1 share %d static addresses, want 1 (runtime.semtable)", len(common))
	}
	for a := range common {
		return a, nil
	}
	return 0, nil
}

// maxScannedFunc bounds the code decoded from one function.
const maxScannedFunc = 1 << 16

// leaTargets returns the static addresses a function loads with a
// RIP-relative LEAQ.
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
