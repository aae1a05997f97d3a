package core

import (
	"debug/elf"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/proc"
)

// memory reads a process's memory from its core file: what a PT_LOAD
// segment holds, and from the executable what the core left out of a
// mapping of it (the kernel does not write file-backed pages nobody
// wrote: code, read-only data) — but not of memory the executable maps
// writable (data, bss, relocated read-only data), whose file contents
// may be stale: a core that leaves such a mapping out (coredump_filter)
// lacks it. What a read needs and the core lacks is recorded (Missing).
type memory struct {
	f    *coreELF
	path string
	segs []*elf.Prog
	exe  *elfbin.Binary
	bias uint64
	// exeMaps are the executable's mappings (NT_FILE), by address;
	// exeWritable its writable PT_LOAD segments' addresses (bias
	// applied).
	exeMaps     []Mapping
	exeWritable [][2]uint64

	// The mappings reads needed and the core lacks, by start address
	// (lack), and a truncated core's size, found once.
	mu       sync.Mutex
	missing  map[uint64]*MissingMemory
	sizeOnce sync.Once
	size     int64
}

func newMemory(f *coreELF, path string, exe *elfbin.Binary, bias uint64, exeMaps []Mapping) (*memory, error) {
	m := &memory{f: f, path: path, segs: sortedSegments(f.File), exe: exe, bias: bias, exeMaps: exeMaps}
	if len(m.segs) == 0 {
		return nil, fmt.Errorf("no memory (PT_LOAD) in it")
	}
	for _, p := range exe.File.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 || p.Type == elf.PT_GNU_RELRO {
			m.exeWritable = append(m.exeWritable, [2]uint64{p.Vaddr + bias, p.Vaddr + p.Memsz + bias})
		}
	}
	return m, nil
}

// ReadAt reads len(p) bytes at addr, piece by piece across segments.
func (m *memory) ReadAt(p []byte, addr uint64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := m.readSome(p[done:], addr+uint64(done))
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// segment returns the core's segment whose addresses hold addr, nil if
// none does.
func (m *memory) segment(addr uint64) *elf.Prog {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].Vaddr+m.segs[i].Memsz > addr })
	if i == len(m.segs) || m.segs[i].Vaddr > addr {
		return nil
	}
	return m.segs[i]
}

// readCore reads len(p) bytes at addr from the core's own segments only.
func (m *memory) readCore(p []byte, addr uint64) error {
	s := m.segment(addr)
	if s == nil || addr-s.Vaddr+uint64(len(p)) > s.Filesz {
		return fmt.Errorf("%#x not in the core", addr)
	}
	_, err := s.ReadAt(p, int64(addr-s.Vaddr))
	return err
}

// readSome reads from the one segment or executable mapping holding addr.
// A core that has a segment there but not its bytes (truncated, or left
// out) lacks them, unless the executable maps them read-only: they are
// its file's.
func (m *memory) readSome(p []byte, addr uint64) (int, error) {
	s := m.segment(addr)
	truncated := false
	if s != nil && addr-s.Vaddr < s.Filesz {
		off := addr - s.Vaddr
		n := min(uint64(len(p)), s.Filesz-off)
		k, err := s.ReadAt(p[:n], int64(off))
		if err != nil && err != io.EOF {
			return k, fmt.Errorf("read %#x from the core: %w", addr+uint64(k), err)
		}
		if k > 0 {
			return k, nil // the rest, if any, at the next call
		}
		truncated = true // the file ends before the segment's data
	}
	if s == nil || !m.writableInExe(addr) {
		for _, mp := range m.exeMaps {
			if addr >= mp.Start && addr < mp.End {
				n := min(uint64(len(p)), mp.End-addr)
				k, err := m.exe.ReadAt(p[:n], addr-m.bias)
				if err != nil {
					return k, fmt.Errorf("read %#x from the executable: %w", addr, err)
				}
				return k, nil
			}
		}
	}
	if s != nil && s.Flags&elf.PF_R == 0 && !truncated {
		// Reserved, not readable (PROT_NONE): the process could not
		// read it either.
		return 0, fmt.Errorf("read %#x: not readable in the process (a mapping without access)", addr)
	}
	if s != nil {
		return 0, m.lack(s, truncated)
	}
	return 0, fmt.Errorf("read %#x: not mapped in the core", addr)
}

// writableInExe reports whether the executable maps addr writable (or
// read-only after relocation): its file may not hold what the process
// did.
func (m *memory) writableInExe(addr uint64) bool {
	for _, r := range m.exeWritable {
		if addr >= r[0] && addr < r[1] {
			return true
		}
	}
	return false
}

// ReadBatch reads every range into dst, back to back.
func (m *memory) ReadBatch(ranges []proc.Range, dst []byte) error {
	var failed []int
	var first error
	off := 0
	for i, r := range ranges {
		if off+r.Len > len(dst) {
			return fmt.Errorf("read batch: %d bytes of room for %d", len(dst), off+r.Len)
		}
		if _, err := m.ReadAt(dst[off:off+r.Len], r.Addr); err != nil {
			failed = append(failed, i)
			if first == nil {
				first = err
			}
		}
		off += r.Len
	}
	if len(failed) > 0 {
		return &proc.BatchError{Failed: failed, First: first}
	}
	return nil
}

// Close closes the core file.
func (m *memory) Close() error { return m.f.Close() }
