package core

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"golang.org/x/sys/unix"
)

// Note types of a Linux core file (uapi linux/elf.h).
const (
	ntPrstatus = 1
	ntPrpsinfo = 3
	ntAuxv     = 6
	ntSiginfo  = 0x53494749
	ntFile     = 0x46494c45
)

// gi's own notes in the cores it writes, named "GI": NT_GI_TAKEN, the
// process's CLOCK_MONOTONIC (8 bytes) at the stop; NT_GI_FDS, its epoll
// registrations and descriptors (fdNote, JSON). Their types are far from
// the kernel's: gdb reads a note by its type whatever its name.
const (
	noteNameGI = "GI"
	ntGITaken  = 0x47490001
	ntGIFDs    = 0x47490002
)

// Bounds on what a core file's notes say, which gi does not trust.
const (
	maxThreads  = 1 << 16
	maxMappings = 1 << 20
)

// ErrNotCore means a file is not an ELF core file.
var ErrNotCore = errors.New("not an ELF core file")

// Core is a core file opened as a process.
type Core struct {
	// Process is the process as the core holds it: its memory, executable
	// and load bias (Live false).
	Process *proc.Process
	// Threads are the process's threads with their registers when the core
	// was written, the thread that took the signal first.
	Threads []ptrace.Thread
	// Path is the core file's path; Command is the process's command name
	// (NT_PRPSINFO); Signal the signal that ended it, 0 if unknown.
	Path, Command string
	Signal        int
	// Mappings are the files the process had mapped (NT_FILE).
	Mappings []Mapping

	// taken is the process's CLOCK_MONOTONIC at the stop in which gi
	// wrote the core (its note NT_GI_TAKEN), 0 for another writer's.
	taken int64
	// fds is what gi recorded of the process's descriptors (NT_GI_FDS),
	// nil for another writer's core.
	fds *fdNote
}

// Mapping is one file mapping of the process (NT_FILE).
type Mapping struct {
	Start, End uint64 // addresses
	Offset     uint64 // of Start in the file
	Path       string
}

// IsCore reports whether the file at path is an ELF core file, itself or
// compressed as systemd-coredump stores cores (zstd, lz4, xz).
func IsCore(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h, err := coreHeader(f)
	return err == nil && isCoreHeader(h)
}

// Open opens the core file at path. exe is the executable of the process;
// "" takes the one the core's own file mappings name (the path it had on
// the machine that wrote the core). A compressed core (zstd, lz4, xz:
// systemd-coredump's) is decompressed into an unlinked temporary file
// first, which costs its uncompressed size of temporary disk
// (os.TempDir) while the core is open; Path stays path.
func Open(path, exe string) (*Core, error) {
	f, err := openELF(path)
	if err != nil {
		return nil, fmt.Errorf("core %s: %w", path, err)
	}
	if f.Type != elf.ET_CORE {
		f.Close()
		return nil, fmt.Errorf("core %s: %w (ELF type %v)", path, ErrNotCore, f.Type)
	}
	if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		f.Close()
		return nil, fmt.Errorf("core %s: machine %v: gi reads amd64 and arm64 cores", path, f.Machine)
	}
	c := &Core{Path: path}
	n, err := c.readNotes(f.File)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core %s: %w", path, err)
	}
	if exe == "" {
		if exe, err = c.executable(n.entry); err != nil {
			f.Close()
			return nil, fmt.Errorf("core %s: %w", path, err)
		}
	}
	bin, err := elfbin.Open(exe)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core %s: executable %s: %w: %v", path, exe, proc.ErrNotGo, err)
	}
	if bin.File.Machine != f.Machine {
		bin.Close()
		f.Close()
		return nil, fmt.Errorf("core %s: executable %s is for %v, the core for %v", path, exe, bin.File.Machine, f.Machine)
	}
	var bias uint64
	if bin.PIE {
		if n.entry == 0 {
			bin.Close()
			f.Close()
			return nil, fmt.Errorf("core %s: no entry point in its auxiliary vector: the load bias of %s is unknown", path, exe)
		}
		bias = n.entry - bin.File.Entry
	}
	mem, err := newMemory(f, path, bin, bias, c.executableMappings(n.entry))
	if err != nil {
		bin.Close()
		f.Close()
		return nil, fmt.Errorf("core %s: %w", path, err)
	}
	if err := checkBuildID(mem, bin, bias); err != nil {
		mem.Close()
		bin.Close()
		return nil, fmt.Errorf("core %s: %w", path, err)
	}
	if f.Machine == elf.EM_AARCH64 {
		c.arm64Syscalls(mem)
	}
	if c.fds != nil {
		c.recordedSyscalls()
	}
	c.Process = &proc.Process{PID: n.pid, NSPID: n.pid, Exe: bin, Bias: bias, Mem: mem}
	c.Process.Environ = func() ([]byte, error) { return environ(mem, n.auxv, n.execfn) }
	if c.fds != nil {
		c.Process.EpollRegistrations, c.Process.DescribeFD = c.fds.epoll, c.fds.describe
	}
	c.Process.ReadMappings = func() ([]proc.Mapping, error) {
		out := make([]proc.Mapping, len(c.Mappings))
		for i, m := range c.Mappings {
			out[i] = proc.Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path}
		}
		return out, nil
	}
	return c, nil
}

// Now returns the process's CLOCK_MONOTONIC when the core was written,
// where the core can say it: a core gi wrote holds it (taken in its stop);
// another's file modification time is when it was written, which this
// machine's clocks turn into CLOCK_MONOTONIC if it was written since this
// machine booted (the same machine, and the same time namespace,
// assumed). False for such a core older than this boot.
func (c *Core) Now() (int64, bool) {
	if c.taken != 0 {
		return c.taken, true
	}
	st, err := os.Stat(c.Path)
	if err != nil {
		return 0, false
	}
	var mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return 0, false
	}
	boot := time.Now().Add(-time.Duration(mono.Nano()))
	if !st.ModTime().After(boot) {
		return 0, false
	}
	return int64(st.ModTime().Sub(boot)), true
}

// Close closes the core file and the executable.
func (c *Core) Close() error { return c.Process.Close() }

// notes is what the notes say beside the threads and mappings.
type notes struct {
	pid       int    // NT_PRPSINFO's
	threadPid int    // the first NT_PRSTATUS's
	entry     uint64 // AT_ENTRY
	execfn    uint64 // AT_EXECFN: the executable's name, atop the first stack
	auxv      []byte // the auxiliary vector, as the first stack holds it
}

// readNotes reads the PT_NOTE segments.
func (c *Core) readNotes(f *elf.File) (notes, error) {
	var n notes
	order := f.ByteOrder
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if p.Filesz > 64<<20 {
			return n, fmt.Errorf("a note segment of %d bytes", p.Filesz)
		}
		data := make([]byte, p.Filesz)
		if k, err := p.ReadAt(data, 0); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return n, fmt.Errorf("the core is truncated in its notes (%d of their %d bytes, from byte %d): it holds no thread to decode", k, p.Filesz, p.Off)
			}
			return n, fmt.Errorf("read notes: %w", err)
		}
		for len(data) >= 12 {
			namesz, descsz, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
			off := 12 + align4(uint64(namesz))
			if off+uint64(descsz) > uint64(len(data)) {
				return n, fmt.Errorf("a note runs past its segment")
			}
			// The last note's padding may be left out (Delve's writer).
			end := min(off+align4(uint64(descsz)), uint64(len(data)))
			name := strings.TrimRight(string(data[12:12+namesz]), "\x00")
			desc := data[off : off+uint64(descsz)]
			data = data[end:]
			if name == noteNameGI {
				switch {
				case typ == ntGITaken && len(desc) == 8:
					c.taken = int64(order.Uint64(desc))
				case typ == ntGIFDs:
					var fds fdNote
					if err := json.Unmarshal(desc, &fds); err != nil {
						return n, fmt.Errorf("gi's descriptor note: %w", err)
					}
					c.fds = &fds
				}
				continue
			}
			if name != "CORE" && name != "LINUX" {
				continue
			}
			switch typ {
			case ntPrstatus:
				th, sig, err := prstatus(f, desc)
				if err != nil {
					return n, err
				}
				if len(c.Threads) >= maxThreads {
					return n, fmt.Errorf("more than %d threads", maxThreads)
				}
				if len(c.Threads) == 0 {
					c.Signal = sig // the kernel writes the thread that took the signal first
					n.threadPid = th.TID
				}
				c.Threads = append(c.Threads, th)
			case ptrace.NotePRFPREG, ptrace.NoteX86XState, ptrace.NoteARMSVE:
				// The vector registers of the thread whose NT_PRSTATUS
				// came last: the XSAVE area where there is one, else
				// the FXSAVE area (arm64: user_fpsimd_state, or gdb's
				// NT_ARM_SVE alone on a CPU with SVE: a header, then
				// the same or the Z and P registers; every word is
				// scanned all the same).
				if k := len(c.Threads) - 1; k >= 0 && (c.Threads[k].Vector == nil || typ != ptrace.NotePRFPREG) {
					c.Threads[k].Vector, c.Threads[k].VectorNote = append([]byte(nil), desc...), uint32(typ)
				}
			case ntPrpsinfo:
				if len(desc) >= 56 && f.Class == elf.ELFCLASS64 {
					n.pid = int(order.Uint32(desc[24:]))
					c.Command = string(bytes.TrimRight(desc[40:56], "\x00"))
				}
			case ntAuxv:
				n.auxv = desc
				for i := 0; i+16 <= len(desc); i += 16 {
					switch order.Uint64(desc[i:]) {
					case atEntry:
						n.entry = order.Uint64(desc[i+8:])
					case atExecfn:
						n.execfn = order.Uint64(desc[i+8:])
					}
				}
			case ntFile:
				m, err := fileMappings(order, desc)
				if err != nil {
					return n, err
				}
				c.Mappings = m
			}
		}
	}
	if len(c.Threads) == 0 {
		return n, errors.New("no thread (NT_PRSTATUS) in its notes")
	}
	for i := range c.Threads {
		// A core gi wrote without them (a thread in a system call, or
		// an older gi): the leak walk says it could not read them.
		if c.Threads[i].Vector == nil {
			c.Threads[i].VectorErr = fmt.Errorf("thread %d: the core holds no vector registers of it", c.Threads[i].TID)
		}
	}
	if n.pid == 0 {
		n.pid = n.threadPid // no NT_PRPSINFO: the first thread's id
	}
	return n, nil
}

// Auxiliary vector entries: the program's entry point, and the address of
// its file name on the first stack.
const (
	atEntry  = 9
	atExecfn = 31
)

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// prstatus decodes one NT_PRSTATUS: struct elf_prstatus, whose registers
// (pr_reg) start at byte 112 on 64-bit Linux: amd64's user_regs_struct,
// arm64's user_pt_regs.
func prstatus(f *elf.File, desc []byte) (ptrace.Thread, int, error) {
	order := f.ByteOrder
	const regsAt = 112
	words := 27 // amd64
	if f.Machine == elf.EM_AARCH64 {
		words = 34
	}
	if len(desc) < regsAt+8*words {
		return ptrace.Thread{}, 0, fmt.Errorf("NT_PRSTATUS of %d bytes, want at least %d", len(desc), regsAt+8*words)
	}
	sig := int(order.Uint16(desc[12:]))
	tid := int(order.Uint32(desc[32:]))
	reg := func(i int) uint64 { return order.Uint64(desc[regsAt+8*i:]) }
	th := ptrace.Thread{TID: tid}
	if f.Machine == elf.EM_X86_64 {
		// user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx
		// rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base ...
		th.Regs = ptrace.Regs{PC: reg(16), SP: reg(19), BP: reg(4), FSBase: reg(21), G: reg(1), Syscall: int64(reg(15)), Arg0: reg(14)}
	} else {
		// user_pt_regs: regs[31] sp pc pstate.
		th.Regs = ptrace.Regs{PC: reg(32), SP: reg(31), BP: reg(29), LR: reg(30), G: reg(28), Syscall: -1}
	}
	for i := 0; i < words; i++ {
		th.Regs.All[i] = reg(i)
	}
	return th, sig, nil
}

// svc0 is the encoding of SVC #0, the arm64 system call instruction.
const svc0 = 0xd4000001

// arm64Syscalls finds the system call each arm64 thread was blocked in,
// which no register of NT_PRSTATUS names: a thread stopped (or dumped)
// inside a call stands on its SVC instruction, rewound for the call to
// restart, with the call's number in x8 and its first argument back in x0
// (as ptrace finds it on a live thread).
func (c *Core) arm64Syscalls(mem *memory) {
	for i := range c.Threads {
		r := &c.Threads[i].Regs
		var insn [4]byte
		if _, err := mem.ReadAt(insn[:], r.PC); err == nil && binary.LittleEndian.Uint32(insn[:]) == svc0 {
			r.Syscall, r.Arg0 = int64(r.All[8]), r.All[0]
		}
	}
}

// recordedSyscalls takes each thread's system call from gi's note, where
// gi recorded it as ptrace found it live.
func (c *Core) recordedSyscalls() {
	for _, sc := range c.fds.Syscalls {
		for i := range c.Threads {
			if r := &c.Threads[i].Regs; int64(c.Threads[i].TID) == sc[0] {
				r.Syscall, r.Arg0 = sc[1], uint64(sc[2])
			}
		}
	}
}

// fileMappings decodes NT_FILE: a count, the page size, count (start,
// end, page offset) triples, then as many NUL-terminated paths.
func fileMappings(order binary.ByteOrder, desc []byte) ([]Mapping, error) {
	if len(desc) < 16 {
		return nil, errors.New("NT_FILE too short")
	}
	count, page := order.Uint64(desc), order.Uint64(desc[8:])
	if count > maxMappings || 16+24*count > uint64(len(desc)) {
		return nil, fmt.Errorf("NT_FILE: %d mappings in %d bytes", count, len(desc))
	}
	names := bytes.Split(desc[16+24*count:], []byte{0})
	if uint64(len(names)) < count {
		return nil, fmt.Errorf("NT_FILE: %d mappings, %d paths", count, len(names))
	}
	out := make([]Mapping, count)
	for i := range out {
		e := desc[16+24*i:]
		out[i] = Mapping{Start: order.Uint64(e), End: order.Uint64(e[8:]), Offset: order.Uint64(e[16:]) * page, Path: string(names[i])}
	}
	return out, nil
}

// executable returns the path of the mapped file that holds the entry
// point: the process's executable.
func (c *Core) executable(entry uint64) (string, error) {
	for _, m := range c.Mappings {
		if entry >= m.Start && entry < m.End {
			if _, err := os.Stat(m.Path); err != nil {
				return "", fmt.Errorf("its executable %s: %w: %w", m.Path, ErrNoExecutable, err)
			}
			return m.Path, nil
		}
	}
	return "", fmt.Errorf("%w: no file mapping (NT_FILE) holds the entry point", ErrNoExecutable)
}

// ErrNoExecutable means the executable a core names cannot be found here:
// the caller must give it.
var ErrNoExecutable = errors.New("the process's executable is not where the core says")

// ErrWrongBinary means the executable given for a core is not the one the
// process ran: their build IDs differ.
var ErrWrongBinary = errors.New("not the executable the core's process ran")

// checkBuildID compares the build ID notes of exe (Go's, GNU's) with the
// bytes the core holds at their addresses (the kernel writes the first
// page of an executable's mappings, which holds them). Notes the core
// does not hold are not compared.
func checkBuildID(mem *memory, exe *elfbin.Binary, bias uint64) error {
	for _, name := range []string{".note.go.buildid", ".note.gnu.build-id"} {
		s := exe.File.Section(name)
		if s == nil || s.Addr == 0 || s.Size == 0 || s.Size > 4096 {
			continue
		}
		want, err := s.Data()
		if err != nil {
			continue
		}
		got := make([]byte, len(want))
		if mem.readCore(got, s.Addr+bias) != nil {
			continue
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: %w (%s differs)", exe.Path, ErrWrongBinary, name)
		}
	}
	return nil
}

// executableMappings returns the mappings of the file that holds the
// entry point, as the core names it.
func (c *Core) executableMappings(entry uint64) []Mapping {
	name := ""
	for _, m := range c.Mappings {
		if entry >= m.Start && entry < m.End {
			name = m.Path
		}
	}
	var out []Mapping
	for _, m := range c.Mappings {
		if name != "" && m.Path == name {
			out = append(out, m)
		}
	}
	return out
}

// sortedSegments returns the core's PT_LOAD segments by address.
func sortedSegments(f *elf.File) []*elf.Prog {
	var segs []*elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			segs = append(segs, p)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Vaddr < segs[j].Vaddr })
	return segs
}

// epoll returns the epoll registrations gi recorded.
func (n *fdNote) epoll() (map[uint64]int, error) {
	out := make(map[uint64]int, len(n.Epoll))
	for _, e := range n.Epoll {
		out[e[0]] = int(e[1])
	}
	return out, nil
}

// describe returns what gi recorded of descriptor fd.
func (n *fdNote) describe(fd int) (proc.FD, error) {
	for _, d := range n.FDs {
		if d.FD == fd {
			return d, nil
		}
	}
	return proc.FD{FD: fd}, fmt.Errorf("fd %d: not recorded in the core", fd)
}
