package core

import (
	"debug/elf"
	"fmt"
	"sort"
	"strings"
)

// MissingMemory is a mapping of the process that the core does not hold
// (wholly, or past some byte) and that gi had to read: a core the kernel
// cut short (RLIMIT_CORE, a full disk), or a mapping its writer left out
// (the process's /proc/<pid>/coredump_filter, which the kernel and gcore
// honour: without bit 0, anonymous private memory, the Go heap, goroutine
// stacks and the runtime's variables are left out). What gi decodes from
// such a core is what it holds: goroutines whose g structure is missing
// are not listed, those whose stack is missing are cut short.
type MissingMemory struct {
	// Start and End are the mapping's addresses.
	Start, End uint64
	// Truncated says the core was cut short before the mapping's memory:
	// the file ends at byte CoreSize. Otherwise the core left the mapping
	// out (coredump_filter).
	Truncated bool
	CoreSize  int64
	// Reads counts gi's reads that needed it.
	Reads int
}

// String says which mapping is missing and why: its addresses, size and
// Reason.
func (m MissingMemory) String() string {
	return fmt.Sprintf("%#x-%#x (%s), %s", m.Start, m.End, sizeText(m.End-m.Start), m.Reason())
}

// Reason says why the core lacks the mapping.
func (m MissingMemory) Reason() string {
	if m.Truncated {
		return fmt.Sprintf("cut off: the core is truncated at byte %d (RLIMIT_CORE, a full disk?)", m.CoreSize)
	}
	return "left out of the core (coredump_filter)"
}

// DescribeMissing names the missing mappings in one line, a few per
// reason.
func DescribeMissing(missing []MissingMemory) string {
	const shown = 4
	var reasons []string
	byReason := map[string][]string{}
	for _, m := range missing {
		r := m.Reason()
		if _, ok := byReason[r]; !ok {
			reasons = append(reasons, r)
		}
		byReason[r] = append(byReason[r], strings.TrimSuffix(m.String(), ", "+r))
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		ranges := byReason[r]
		if len(ranges) > shown {
			ranges = append(ranges[:shown:shown], fmt.Sprintf("%d more", len(ranges)-shown))
		}
		what := "mapping "
		if len(byReason[r]) > 1 {
			what = "mappings "
		}
		parts[i] = what + strings.Join(ranges, ", ") + ", " + r
	}
	return strings.Join(parts, "; ")
}

// sizeText is n bytes in a round unit.
func sizeText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Missing returns the mappings gi has needed so far and the core lacks,
// by address: empty when every read found its memory. Decoding goes on
// past them (proc.BatchError, per goroutine); the caller says what is
// missing.
func (c *Core) Missing() []MissingMemory {
	m, ok := c.Process.Mem.(*memory)
	if !ok {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]MissingMemory, 0, len(m.missing))
	for _, mm := range m.missing {
		out = append(out, *mm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// missingError is a read of memory the core lacks.
type missingError struct{ mm MissingMemory }

func (e *missingError) Error() string { return "not in the core: mapping " + e.mm.String() }

// lack records that a read needs segment s's memory, which the core does
// not hold (it is truncated, or left the mapping out), and returns the
// read's error.
func (m *memory) lack(s *elf.Prog, truncated bool) error {
	var size int64
	if truncated {
		m.sizeOnce.Do(func() { m.size = m.coreSize() })
		size = m.size
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mm := m.missing[s.Vaddr]
	if mm == nil {
		if m.missing == nil {
			m.missing = map[uint64]*MissingMemory{}
		}
		mm = &MissingMemory{Start: s.Vaddr, End: s.Vaddr + s.Memsz, Truncated: truncated, CoreSize: size}
		m.missing[s.Vaddr] = mm
	}
	mm.Reads++
	return &missingError{*mm}
}

// coreSize returns where a truncated core's segments' data ends: the
// first byte of it the file does not hold (a truncation keeps a prefix
// of the file), which is the file's size when it was cut inside a
// segment's data.
func (m *memory) coreSize() int64 {
	segs := make([]*elf.Prog, 0, len(m.segs))
	for _, s := range m.segs {
		if s.Filesz > 0 {
			segs = append(segs, s)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Off < segs[j].Off })
	has := func(s *elf.Prog, off uint64) bool {
		var b [1]byte
		n, _ := s.ReadAt(b[:], int64(off))
		return n == 1
	}
	for _, s := range segs {
		if has(s, s.Filesz-1) {
			continue
		}
		// The segment's first byte it lacks: [0, lo) held, hi lacking.
		lo := sort.Search(int(s.Filesz), func(off int) bool { return !has(s, uint64(off)) })
		return int64(s.Off) + int64(lo)
	}
	return 0 // not truncated after all
}
