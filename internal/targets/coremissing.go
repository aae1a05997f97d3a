package targets

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"sort"
	"strconv"
	"testing"
)

// SetCoredumpFilter sets the coredump_filter of process pid (a hex mask:
// bit 0 anonymous private memory, 1 anonymous shared, 2 file-backed
// private, 3 file-backed shared, 4 ELF headers; the kernel's default is
// 0x33): the mappings a core of it will hold.
func SetCoredumpFilter(tb testing.TB, pid int, filter string) {
	tb.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/coredump_filter", []byte(filter), 0); err != nil {
		tb.Fatalf("set the coredump_filter of %d: %v", pid, err)
	}
}

// CoreCuts are offsets at which truncating a core of a Go process (a
// non-PIE executable's) takes away some of the memory gi decodes.
type CoreCuts struct {
	// AllGs is where the core holds the runtime's allgs array: cut
	// there, no goroutine can be found.
	AllGs int64
	// InGs is where the core holds one of the g structures given (At),
	// past the allgs array and the runtime's variables, with some of
	// them before it and some after: cut there, the goroutines whose g
	// structure lies before it (Before) can still be found, the rest
	// not; of those, the ones whose stack's top lies past it
	// (StackPast) are cut short. Among the cuts at g structures in the
	// middle of those past the allgs array, InGs is one that leaves the
	// most stacks past it; if none leaves one, a cut at the bottom of a
	// stack that lies past its own g structure.
	InGs      int64
	At        uint64
	Before    map[uint64]bool
	StackPast map[uint64]bool
}

// FindCoreCuts finds the CoreCuts of the core at path of a process of the
// executable bin (not PIE: its symbols' addresses are the process's),
// given the addresses of its g structures. A g structure starts with
// its stack's bounds (runtime.g.stack: lo, hi), in every Go release.
func FindCoreCuts(tb testing.TB, path, bin string, gs []uint64) CoreCuts {
	tb.Helper()
	exe, err := elf.Open(bin)
	if err != nil {
		tb.Fatal(err)
	}
	defer exe.Close()
	syms, err := exe.Symbols()
	if err != nil {
		tb.Fatalf("%s: %v", bin, err)
	}
	var allgs uint64
	for _, s := range syms {
		if s.Name == "runtime.allgs" {
			allgs = s.Value
		}
	}
	if allgs == 0 {
		tb.Fatalf("%s: no symbol runtime.allgs", bin)
	}
	c, err := elf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	var hdr [16]byte // the slice's pointer and length
	if !coreRead(c, hdr[:], allgs) {
		tb.Fatalf("runtime.allgs at %#x is not in the core %s", allgs, path)
	}
	array, n := binary.LittleEndian.Uint64(hdr[:]), binary.LittleEndian.Uint64(hdr[8:])
	cuts := CoreCuts{AllGs: coreOffset(c, array)}
	last := coreOffset(c, array+8*n-1)
	if cuts.AllGs < 0 || last < 0 || n == 0 {
		tb.Fatalf("the allgs array at %#x (%d entries) is not in the core %s", array, n, path)
	}
	floor := max(last, coreOffset(c, allgs)) // the runtime's variables lie before the heap
	stackTop := map[uint64]int64{}           // where the core holds each g's stack's last byte
	stackLo := map[uint64]uint64{}           // and its first byte's address
	var past []uint64
	for _, g := range gs {
		var b [16]byte
		if coreRead(c, b[:], g) {
			stackLo[g] = binary.LittleEndian.Uint64(b[:])
			stackTop[g] = coreOffset(c, binary.LittleEndian.Uint64(b[8:])-1)
		}
		if coreOffset(c, g) > floor {
			past = append(past, g)
		}
	}
	if len(past) < 4 {
		tb.Fatalf("%d of %d g structures lie past the allgs array in the core %s: no cut among them", len(past), len(gs), path)
	}
	sort.Slice(past, func(i, j int) bool { return coreOffset(c, past[i]) < coreOffset(c, past[j]) })
	split := func(at uint64) (before, stackPast map[uint64]bool) {
		cut := coreOffset(c, at)
		before, stackPast = map[uint64]bool{}, map[uint64]bool{}
		for _, g := range gs {
			if off := coreOffset(c, g); off >= 0 && off < cut {
				before[g] = true
				if stackTop[g] >= cut {
					stackPast[g] = true
				}
			}
		}
		return before, stackPast
	}
	for _, at := range past[len(past)/4 : len(past)*3/4] {
		if before, stackPast := split(at); cuts.Before == nil || len(stackPast) > len(cuts.StackPast) {
			cuts.At, cuts.InGs, cuts.Before, cuts.StackPast = at, coreOffset(c, at), before, stackPast
		}
	}
	if len(cuts.StackPast) > 0 {
		return cuts
	}
	// Every stack lies before its g structure around the middle (the
	// heap's spans of stacks and of g structures fall either way): cut
	// instead at the bottom of a stack that lies past its own g, past
	// the allgs array, leaving goroutines after the cut (no other stack
	// straddles a stack's bottom).
	for _, g := range past {
		lo := stackLo[g]
		if lo == 0 || coreOffset(c, lo) <= coreOffset(c, g) {
			continue
		}
		if before, stackPast := split(lo); len(stackPast) > len(cuts.StackPast) && len(before) < len(gs) {
			cuts.At, cuts.InGs, cuts.Before, cuts.StackPast = lo, coreOffset(c, lo), before, stackPast
		}
	}
	return cuts
}

// coreOffset returns where the core's segments hold the byte at addr in
// its file, -1 if none does.
func coreOffset(c *elf.File, addr uint64) int64 {
	for _, p := range c.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return int64(p.Off + addr - p.Vaddr)
		}
	}
	return -1
}

// coreRead reads len(b) bytes at addr from one of the core's segments.
func coreRead(c *elf.File, b []byte, addr uint64) bool {
	for _, p := range c.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr+uint64(len(b)) <= p.Filesz {
			_, err := p.ReadAt(b, int64(addr-p.Vaddr))
			return err == nil
		}
	}
	return false
}
