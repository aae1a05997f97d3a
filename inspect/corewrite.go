package inspect

import (
	"debug/elf"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// CoreOptions say what a core file written from a snapshot's stop holds.
type CoreOptions struct {
	// All copies every readable mapping of the process in the stop, as
	// gcore does: a core of the whole process, and a stop as long as the
	// copy. Without it the core holds the pages gi read for the listing —
	// the bytes it read as it read them, the rest of their pages read
	// just after the stop — the top 16 KiB of each thread's stack, copied
	// in the stop, and, read just after the stop, the executable's data
	// and bss, the mapped files' writable data and first pages (as the
	// kernel's cores hold them: what gdb needs to find the executable and
	// the shared libraries).
	All bool
}

// CoreWritten says what a core file written from a snapshot holds.
type CoreWritten struct {
	Path string
	// Memory is the bytes of memory it holds, in Segments segments;
	// AfterStop of them were read after the stop (around what gi read in
	// it: the rest of the pages, the executable's data).
	Memory, AfterStop int64
	Segments          int
	// Write is how long writing the file took, after the snapshot.
	Write time.Duration
}

// SnapshotCore takes a snapshot as Snapshot does and, from the same stop,
// writes a core file of the process to path (mode 0600: a core holds the
// process's secrets), readable by gi (core.Open), gdb and Delve. The
// file's directory is tried before the stop: a file that cannot be
// written fails before the process is touched; it is written under a
// temporary name and renamed to path once whole (outfile).
func (t *Target) SnapshotCore(tr *ptrace.Tracer, path string, o CoreOptions) (*Snapshot, *CoreWritten, error) {
	if !t.live || t.process == nil {
		return nil, nil, errors.New("a core file is written of a live process")
	}
	if err := outfile.Probe(path); err != nil {
		return nil, nil, fmt.Errorf("core file: %w", err)
	}
	maps, err := t.process.ReadMappings()
	if err != nil {
		return nil, nil, err
	}
	var epoll map[uint64]int
	if t.process.EpollRegistrations != nil {
		epoll, _ = t.process.EpollRegistrations() // none known: IO waits' descriptors unknown in the core
	}
	rec := core.NewRecorder(t.Mem)
	defer rec.Close()
	mem := t.Mem
	t.Mem = rec
	defer func() { t.Mem = mem }()
	// The threads' vector registers go in the core too, as the kernel
	// writes them: gi ps --leaks of the core scans them.
	vec := t.VectorRegs
	t.VectorRegs = true
	defer func() { t.VectorRegs = vec }()
	var threads []ptrace.Thread
	var taken int64
	// The hooks a caller set (gi ps --leaks copies the heap in the
	// stop) run inside the core's: what they read is in the core.
	prev := t.Hooks
	if prev == nil {
		prev = &StopHooks{}
	}
	t.Hooks = &StopHooks{
		Stopping: func() {
			rec.Stopping()
			if prev.Stopping != nil {
				prev.Stopping()
			}
		},
		Stopped: func(ths []ptrace.Thread, now int64) error {
			threads = append([]ptrace.Thread(nil), ths...)
			taken = now
			if o.All {
				copyMappings(mem, maps, rec)
			} else {
				copyThreadStacks(mem, threads, rec)
			}
			if prev.Stopped != nil {
				return prev.Stopped(ths, now)
			}
			return nil
		},
		Resumed: func() {
			if prev.Resumed != nil {
				prev.Resumed()
			}
			rec.Resumed()
		},
	}
	defer func() { t.Hooks = prev }()
	snap, err := t.Snapshot(tr)
	if err != nil {
		return nil, nil, err
	}
	t.Mem = mem
	start := time.Now()
	ranges, after, err := rec.Layout(append(t.writableData(), fileData(maps)...))
	if err != nil {
		return nil, nil, err
	}
	img, err := t.coreImage(maps, threads, taken)
	if err != nil {
		return nil, nil, err
	}
	img.Memory, img.Fill, img.Order = ranges, rec.Fill, rec.ReadOrder(ranges)
	img.Epoll = epoll
	img.FDs = describedFDs(snap)
	if err := core.Write(path, img); err != nil {
		return nil, nil, err
	}
	w := &CoreWritten{Path: path, AfterStop: after, Segments: len(ranges), Write: time.Since(start)}
	for _, r := range ranges {
		w.Memory += int64(r.Len)
	}
	return snap, w, nil
}

// writableData returns the executable's writable segments (data, bss) in
// the process: the runtime's globals, whole.
func (t *Target) writableData() []proc.Range {
	var out []proc.Range
	for _, p := range t.Binary.File.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 && p.Memsz > 0 && p.Memsz < 1<<32 {
			out = append(out, proc.Range{Addr: p.Vaddr + t.Bias, Len: int(p.Memsz)})
		}
	}
	return out
}

// fileData returns what a core of the listing holds of the files the
// process maps, as the kernel's cores do: the first page of every mapping
// of a file's start (ELF headers and build IDs, by which gdb matches a
// core to its executable and libraries), and every writable mapping of a
// file whole (the dynamic loader's and libraries' data, by which gdb
// finds the shared libraries).
func fileData(maps []proc.Mapping) []proc.Range {
	var out []proc.Range
	for _, m := range maps {
		switch {
		case !m.Read || m.Inode == 0:
		case m.Write && m.End-m.Start <= 64<<20:
			out = append(out, proc.Range{Addr: m.Start, Len: int(m.End - m.Start)})
		case m.Offset == 0:
			out = append(out, proc.Range{Addr: m.Start, Len: 4096})
		}
	}
	return out
}

// threadStackBytes is how much of each thread's stack, from its stack
// pointer up, a core of the listing holds: what gdb needs to show where
// each thread is (the listing reads goroutine stacks, not the threads'
// own system stacks).
const threadStackBytes = 16 << 10

// copyThreadStacks copies, in the stop, the top of each thread's stack.
func copyThreadStacks(mem Memory, threads []ptrace.Thread, rec *core.Recorder) {
	for _, th := range threads {
		if th.RegsErr != nil || th.Regs.SP == 0 {
			continue
		}
		lo := th.Regs.SP &^ 4095
		b := make([]byte, threadStackBytes)
		for len(b) > 0 {
			if k, _ := mem.ReadAt(b, lo); k > 0 {
				rec.Keep(lo, b[:k])
				break
			}
			b = b[:len(b)-4096] // the stack's top is nearer: read less
		}
	}
}

// copyMappings copies every readable mapping of the process (but the
// kernel's vvar and vsyscall pages) into rec, in the stop.
func copyMappings(mem Memory, maps []proc.Mapping, rec *core.Recorder) {
	buf := make([]byte, 16<<20)
	for _, m := range maps {
		if !m.Read || m.Path == "[vvar]" || m.Path == "[vvar_vclock]" || m.Path == "[vsyscall]" || m.End-m.Start > 1<<40 {
			continue
		}
		const chunk = 16 << 20
		for a := m.Start; a < m.End; a += chunk {
			b := buf[:min(chunk, m.End-a)]
			if k, _ := mem.ReadAt(b, a); k > 0 {
				rec.Keep(a, b[:k])
			}
		}
	}
}

// coreImage gathers what the core's notes say of the process.
func (t *Target) coreImage(maps []proc.Mapping, threads []ptrace.Thread, taken int64) (*core.Image, error) {
	img := &core.Image{Machine: t.Binary.File.Machine, PID: t.PID, Command: proc.Comm(t.PID), Args: proc.Cmdline(t.PID), Taken: taken}
	if p := t.process; p != nil && p.NSPID != 0 {
		img.PID = p.NSPID // as the kernel writes it: the process's own view
	}
	atoi := func(field string) int {
		v, _ := proc.StatusField(t.PID, 0, field)
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(f[0])
		return n
	}
	img.PPID, img.UID, img.GID = atoi("PPid"), atoi("Uid"), atoi("Gid")
	auxv, err := proc.Auxv(t.PID)
	if err != nil {
		return nil, err
	}
	img.Auxv = auxv
	for _, m := range maps {
		if m.Inode != 0 && strings.HasPrefix(m.Path, "/") {
			img.Files = append(img.Files, core.Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path})
		}
	}
	// Thread ids as the process's namespace numbers them, as the kernel
	// writes them (and as the runtime's m.procid holds them).
	ns, err := proc.NamespaceTIDs(t.PID, nil)
	if err != nil {
		return nil, err
	}
	host := make(map[int]int, len(ns))
	for n, h := range ns {
		host[h] = n
	}
	for _, th := range threads {
		if th.RegsErr != nil {
			continue
		}
		if n, ok := host[th.TID]; ok {
			th.TID = n
		}
		img.Threads = append(img.Threads, th)
	}
	if len(img.Threads) == 0 {
		return nil, fmt.Errorf("process %d: no thread's registers", t.PID)
	}
	return img, nil
}

// describedFDs returns the descriptors the snapshot's goroutines wait on,
// as gi described them.
func describedFDs(snap *Snapshot) []proc.FD {
	seen := map[int]bool{}
	var out []proc.FD
	for _, g := range snap.Goroutines {
		for _, o := range g.WaitingOn {
			if o.FD != nil && !seen[o.FD.FD] {
				seen[o.FD.FD] = true
				out = append(out, *o.FD)
			}
		}
	}
	return out
}
