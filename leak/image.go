package leak

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/heap"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/hugemem"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/runtimelayout"
)

// Image is what the walk reads of the process, copied at one instant:
// the heap's spans and the contents of those that hold pointers, the
// executable's data and bss, and the threads' registers.
type Image struct {
	Heap     *heap.Heap
	Contents *heap.Contents
	// Pointers are the runtime's maps of which words of the heap's
	// objects hold pointers, read with the heap: the walk follows those
	// only, and scans conservatively what they do not cover.
	Pointers *heap.Pointers
	// Globals are the executable's data and bss, as copied.
	Globals []Segment
	// Threads are the process's threads with their registers, and
	// ThreadStacks the stacks they were on from their stack pointer up,
	// where that is the stack of the g their g register names (a
	// goroutine's, or a thread's g0 or signal stack, where the runtime
	// does work in flight: a timer firing, a goroutine being readied).
	Threads      []ptrace.Thread
	ThreadStacks []Segment
	// Busy are the threads (by id) stopped at work (busyThreads): the
	// walk scans their registers and stacks.
	Busy map[int]bool
	// GoModules are files the process maps, beside its executable,
	// that hold Go code (GoModules): their globals are not read, and
	// Find decides nothing.
	GoModules []string
	// Queued are the blocks queued finalizers and cleanups wait in to
	// run (off the heap: roots); QueuedUnknown says why they could not
	// be read, and Find then decides nothing.
	Queued        []Segment
	QueuedUnknown string
	// Runtime are the runtime's Ps and Ms, by address, with the masks
	// of their pointer words: the walk follows only those (their
	// buffers hold stale addresses as integers).
	Runtime map[uint64]*runtimelayout.PointerMask
	// Took is how long the capture took (Take: its part in the stop).
	Took time.Duration
	// PreCopy is how long Take copied the heap before the stop, Synced
	// and Rewritten the pages it checked and read again in the stop; 0
	// when it copied everything in the stop, InStop says why.
	PreCopy           time.Duration
	Synced, Rewritten int
	InStop            string
	// Frozen says the capture read a copy the process made of itself
	// in the stop (inspect.Target.Freeze): nothing of it was read in
	// the stop, which ended once the copy existed; Took is then all
	// after the stop.
	Frozen bool

	buffer []byte // the mapping the heap was copied into, Take's
}

// Segment is a copy of memory at Addr; Mask, when not nil, has bit i
// set for the words that hold pointers (the others are not followed).
type Segment struct {
	Addr  uint64
	Bytes []byte
	Mask  []byte
}

// Release frees the image's copies.
func (im *Image) Release() {
	if im == nil {
		return
	}
	if im.Contents != nil {
		im.Contents.Release()
	}
	if im.buffer != nil {
		unix.Munmap(im.buffer)
		im.buffer = nil
	}
}

// Capture copies what the walk reads from mem: the heap's index and
// spans (heap.Read), the spans that may hold pointers (heap.Copy), and
// the executable's data and bss (the globals, load bias applied). Call
// it while the process is stopped, or on a core file.
func Capture(mem heap.Reader, exe *elfbin.Binary, layout *runtimelayout.RuntimeLayout, bias uint64, threads []ptrace.Thread, lim Options) (*Image, error) {
	return capture(mem, exe, layout, bias, threads, lim, nil, nil)
}

// capture is Capture copying the heap into buf when it is large enough,
// calling check (if set) as it copies the heap and once done.
func capture(mem heap.Reader, exe *elfbin.Binary, layout *runtimelayout.RuntimeLayout, bias uint64, threads []ptrace.Thread, lim Options, buf []byte, check func() error) (*Image, error) {
	start := time.Now()
	lim.defaults()
	h, err := heap.Read(mem, &layout.Heap, exe.Arch, bias, lim.Heap)
	if err != nil {
		return nil, fmt.Errorf("read the heap: %w", err)
	}
	c, err := heap.CopyChecked(mem, h, lim.Bytes, buf, check)
	if err != nil {
		return nil, err
	}
	im := &Image{Heap: h, Contents: c, Threads: threads}
	lo, hi := exeBounds(exe)
	im.Pointers = heap.ReadPointers(mem, c, &layout.Heap, heap.PointerOptions{Bias: bias, ExeLo: lo + bias, ExeHi: hi + bias})
	if im.Globals, err = globals(mem, exe, &layout.Module, bias); err != nil {
		c.Release()
		return nil, err
	}
	im.Busy = busyThreads(exe, bias, threads)
	im.ThreadStacks = threadStacks(mem, layout, threads, im.Busy)
	im.Queued, im.QueuedUnknown = queued(mem, &layout.Heap.Queues, bias)
	im.Runtime = runtimeObjects(mem, &layout.Heap.Objects, bias)
	im.Took = time.Since(start)
	if check != nil {
		if err := check(); err != nil {
			im.Release()
			return nil, err
		}
	}
	return im, nil
}

// growthCheck returns a check that process pid has faulted in no more
// than bound bytes since its count of minor faults was base (read before
// the stop: a page each; a fresh huge page counts one, a page of a file
// read ahead one too: an estimate, exact for what the copy costs, pages
// the process writes while it shares them), nil for no bound (negative).
func growthCheck(pid int, base uint64, bound int64) func() error {
	if bound == 0 {
		bound = defaultGrowth
	}
	if bound < 0 {
		return nil
	}
	page := int64(os.Getpagesize())
	return func() error {
		n, err := proc.MinorFaults(pid)
		if err != nil || int64(n-base)*page <= bound {
			return nil
		}
		return fmt.Errorf("%w: the process faulted in %d MiB or more while its frozen copy was read, past the bound of %d MiB (gi ps --leaks-max-growth): the copy was given up, no walk made",
			ErrGrowth, int64(n-base)*page>>20, bound>>20)
	}
}

// defaultGrowth is Options.Growth's default.
const defaultGrowth = 1 << 30

// ErrGrowth is the error of a capture given up as the process grew past
// Options.Growth while its frozen copy was read.
var ErrGrowth = errors.New("memory bound hit")

// exeBounds returns the link-time bounds of the executable's loaded
// segments.
func exeBounds(exe *elfbin.Binary) (lo, hi uint64) {
	lo = ^uint64(0)
	for _, p := range exe.File.Progs {
		if p.Type == elf.PT_LOAD {
			lo, hi = min(lo, p.Vaddr), max(hi, p.Vaddr+p.Memsz)
		}
	}
	if hi == 0 {
		return 0, 0
	}
	return lo, hi
}

// maxQueueBlocks bounds the blocks of finalizers or cleanups read.
const maxQueueBlocks = 1 << 20

// queued copies the blocks queued finalizers (runtime.allfin's chain)
// and cleanups (Go 1.25+, runtime.gcCleanups.all's) wait in, or says why
// it cannot.
func queued(mem heap.Reader, q *runtimelayout.QueueLayout, bias uint64) ([]Segment, string) {
	if q.AllFin == 0 {
		return nil, "where queued finalizers wait (runtime.allfin) is unknown"
	}
	var out []Segment
	chain := func(head uint64, link, size int64, what string) string {
		var b [8]byte
		if _, err := mem.ReadAt(b[:], head); err != nil {
			return fmt.Sprintf("%s: %v", what, err)
		}
		for p, n := binary.LittleEndian.Uint64(b[:]), 0; p != 0; n++ {
			if n == maxQueueBlocks {
				return fmt.Sprintf("%s: more than %d blocks", what, maxQueueBlocks)
			}
			block := make([]byte, size)
			if _, err := mem.ReadAt(block, p); err != nil {
				return fmt.Sprintf("%s: block %#x: %v", what, p, err)
			}
			out = append(out, Segment{Addr: p, Bytes: block})
			p = binary.LittleEndian.Uint64(block[link:])
		}
		return ""
	}
	if why := chain(q.AllFin+bias, q.FinBlockAllLink, q.FinBlockSize, "queued finalizers"); why != "" {
		return nil, why
	}
	if q.CleanupQueueAll != runtimelayout.Missing {
		if q.GCCleanups == 0 {
			return nil, "where queued cleanups wait (runtime.gcCleanups) is unknown"
		}
		if why := chain(q.GCCleanups+bias+uint64(q.CleanupQueueAll), q.CleanupBlockAllLink, q.CleanupBlockSize, "queued cleanups"); why != "" {
			return nil, why
		}
	}
	return out, ""
}

// maxGlobals bounds the bytes of globals copied.
const maxGlobals = 1 << 30

// globals copies the executable's globals that may hold pointers: the
// data and bss its moduledata bounds, with the masks the runtime built
// of which words do (precise); where those are unknown, the .data and
// .bss sections, every word of which the walk then follows.
func globals(mem heap.Reader, exe *elfbin.Binary, l *runtimelayout.ModuleLayout, bias uint64) ([]Segment, error) {
	if md := exe.Lines.Module(); md != 0 && l.GCBSSMask > 0 {
		out, err := maskedGlobals(mem, md+bias, l)
		if err == nil {
			return out, nil
		}
	}
	var ranges []proc.Range
	total := 0
	for _, name := range []string{".data", ".bss"} {
		s := exe.File.Section(name)
		if s == nil || s.Size == 0 || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		ranges = append(ranges, proc.Range{Addr: s.Addr + bias, Len: int(s.Size)})
		total += int(s.Size)
	}
	if len(ranges) == 0 || total > maxGlobals {
		return nil, errors.New("the executable's globals are unknown: no .data or .bss section")
	}
	buf := make([]byte, total)
	if err := mem.ReadBatch(ranges, buf); err != nil {
		return nil, fmt.Errorf("copy the globals: %w", err)
	}
	var out []Segment
	off := 0
	for _, r := range ranges {
		out = append(out, Segment{Addr: r.Addr, Bytes: buf[off : off+r.Len]})
		off += r.Len
	}
	return out, nil
}

// maskedGlobals copies the module's data and bss from the bounds its
// moduledata at md holds, with their pointer masks.
func maskedGlobals(mem heap.Reader, md uint64, l *runtimelayout.ModuleLayout) ([]Segment, error) {
	word := func(off int64) (uint64, error) {
		var b [8]byte
		_, err := mem.ReadAt(b[:], md+uint64(off))
		return binary.LittleEndian.Uint64(b[:]), err
	}
	var out []Segment
	for _, part := range []struct{ lo, hi, mask int64 }{{l.Data, l.EData, l.GCDataMask}, {l.BSS, l.EBSS, l.GCBSSMask}} {
		lo, err := word(part.lo)
		if err != nil {
			return nil, err
		}
		hi, err := word(part.hi)
		if err != nil {
			return nil, err
		}
		n, err := word(part.mask) // bitvector.n, an int32, then padding
		if err != nil {
			return nil, err
		}
		bits, err := word(part.mask + 8)
		if err != nil {
			return nil, err
		}
		nbits := uint64(uint32(n))
		if hi < lo || hi-lo > maxGlobals || nbits != (hi-lo)/8 {
			return nil, fmt.Errorf("moduledata: globals [%#x, %#x) with a mask of %d bits", lo, hi, nbits)
		}
		seg := Segment{Addr: lo, Bytes: make([]byte, hi-lo), Mask: make([]byte, (nbits+7)/8)}
		if _, err := mem.ReadAt(seg.Bytes, lo); err != nil {
			return nil, err
		}
		if len(seg.Mask) > 0 {
			if _, err := mem.ReadAt(seg.Mask, bits); err != nil {
				return nil, err
			}
		}
		out = append(out, seg)
	}
	return out, nil
}

// maxRuntimeObjects bounds the Ps and the Ms read.
const maxRuntimeObjects = 1 << 16

// runtimeObjects returns the runtime's Ps (runtime.allp) and Ms
// (runtime.allm's chain) with their masks; none where their addresses or
// masks are unknown (a stripped binary): the walk then scans them whole.
func runtimeObjects(mem heap.Reader, o *runtimelayout.ObjectsLayout, bias uint64) map[uint64]*runtimelayout.PointerMask {
	out := map[uint64]*runtimelayout.PointerMask{}
	var b [16]byte
	if o.AllP != 0 && o.P.Known() {
		if _, err := mem.ReadAt(b[:], o.AllP+bias); err == nil {
			ptr, n := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
			if n <= maxRuntimeObjects {
				ps := make([]byte, 8*n)
				if _, err := mem.ReadAt(ps, ptr); err == nil {
					for i := uint64(0); i < n; i++ {
						if p := binary.LittleEndian.Uint64(ps[8*i:]); p != 0 {
							out[p] = &o.P
						}
					}
				}
			}
		}
	}
	if o.AllM != 0 && o.M.Known() {
		if _, err := mem.ReadAt(b[:8], o.AllM+bias); err == nil {
			for m, n := binary.LittleEndian.Uint64(b[:8]), 0; m != 0 && n < maxRuntimeObjects; n++ {
				out[m] = &o.M
				if _, err := mem.ReadAt(b[:8], m+uint64(o.MAllLink)); err != nil {
					break
				}
				m = binary.LittleEndian.Uint64(b[:8])
			}
		}
	}
	return out
}

// maxThreadStack bounds the bytes of a thread's stack copied.
const maxThreadStack = 8 << 20

// threadStacks copies, for each thread at work (busy), the stack its
// stack pointer is on, from there up, when its g register (r14, x28)
// names a g whose stack holds the stack pointer. A thread in C code,
// whose g register is anything, is left out.
func threadStacks(mem heap.Reader, l *runtimelayout.RuntimeLayout, threads []ptrace.Thread, busy map[int]bool) []Segment {
	var out []Segment
	for _, th := range threads {
		r := th.Regs
		if !busy[th.TID] || r.G == 0 || r.SP == 0 {
			continue
		}
		var b [16]byte
		if _, err := mem.ReadAt(b[:8], r.G+uint64(l.G.StackLo)); err != nil {
			continue
		}
		if _, err := mem.ReadAt(b[8:], r.G+uint64(l.G.StackHi)); err != nil {
			continue
		}
		lo, hi := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
		if r.SP < lo || r.SP >= hi || hi-r.SP > maxThreadStack {
			continue
		}
		buf := make([]byte, hi-r.SP)
		if _, err := mem.ReadAt(buf, r.SP); err != nil {
			continue
		}
		out = append(out, Segment{Addr: r.SP, Bytes: buf})
	}
	return out
}

// Take takes a snapshot of the live process t with snapshot
// (t.Snapshot, or t.SnapshotCore to write a core of the same stop, which
// then holds what the walk read: set Options.InStop), its stacks kept,
// and captures the image the walk reads (Capture) as the process was
// when the goroutines were copied. A live process makes a copy of
// itself in the stop (inspect.Target.Freeze), which everything is read
// from once it runs again. Where it cannot (ptrace.FreezeBlocked) and
// the kernel tracks the pages a process writes (proc.Track), the heap
// and the globals are copied before the stop, while the process runs,
// and in the stop only the pages it wrote since are read again;
// elsewhere, on a refused freeze, and with InStop, they are copied in
// the stop. The pages the process writes while its copy lives are
// charged to its memory cgroups: it is not frozen where half the room
// left below their tightest limit (gi's own buffers counted where gi is
// under that limit too) is less than the heap, and the copy is given up
// past that half (polled: guard) and the heap copied in a second stop
// instead; where a limit gi shares leaves no room for gi's copy, nothing
// is copied. The hooks the Target already has still run. A failed
// capture returns the snapshot with the error; a process, or a copy,
// that died meanwhile (ErrDied) returns no snapshot.
func Take(t *inspect.Target, snapshot func() (*inspect.Snapshot, error), opts Options) (*inspect.Snapshot, *Image, error) {
	var tracked *proc.Tracked
	var precopy time.Duration
	why := "asked to (a core of the stop holds what it copies)"
	var liveMem *proc.Memory
	live := false
	if p := t.Process(); p != nil {
		liveMem, live = p.LiveMemory()
	}
	// The heap as it is now sizes gi's buffer and the room a copy of
	// the process needs in its memory cgroups (and gi's in its own).
	var scan int64
	if h, err := heap.Read(t.Mem, &t.Layout.Heap, t.Binary.Arch, t.Bias, opts.Heap); err == nil {
		scan = h.ScanBytes()
	}
	plan := &memoryPlan{budget: proc.NoMemoryLimit}
	if live {
		plan = planMemory(t.PID, scan)
	}
	freeze := false
	if !opts.InStop && plan.noRoom == nil {
		why = "the process's memory is not a live process's"
		if live {
			if opts.NoFreeze {
				why = "asked not to freeze the process"
			} else if err := ptrace.FreezeBlocked(t.PID); err != nil {
				why = err.Error()
			} else if plan.noFreeze != "" {
				why = plan.noFreeze
			} else {
				freeze = true
			}
		}
		if live && !freeze {
			start := time.Now()
			var err error
			if tracked, err = proc.Track(t.PID, liveMem); err == nil {
				// What is read now is kept, and what the process
				// writes before the stop read again in it. A capture
				// of a running process may fail (a span being made):
				// the stop's capture reads what this one did not.
				if pre, err := Capture(tracked, t.Binary, t.Layout, t.Bias, nil, opts); err == nil {
					pre.Release()
				}
				precopy = time.Since(start)
			} else {
				why += "; " + err.Error()
			}
		}
	}
	// Copied in the stop or from the frozen copy: the buffer is made
	// before the stop, sized from the heap as it is now, with room to
	// grow. Copied in the stop, its pages are faulted in first (a heap
	// of a gigabyte is a quarter of a million pages); read from the
	// frozen copy after the stop, they fault in as the copy is read,
	// which costs no pause and no time for the room left unused (1.7 s
	// less for a 1 GiB heap on a Firecracker guest: hugemem.Lazy). A
	// freeze refused in the stop copies into it there, faulting.
	var buf, whole []byte
	if n := scan; tracked == nil && plan.noRoom == nil && n >= 4<<20 {
		if freeze {
			buf, whole, _ = hugemem.Lazy(int(2*n + 64<<20))
		} else {
			buf, whole, _ = hugemem.Populated(int(n + n/4 + 16<<20))
		}
	}
	var modules []string
	if p := t.Process(); p != nil && p.ReadMappings != nil {
		maps, err := p.ReadMappings()
		if err != nil {
			maps = nil
		}
		var paths []string
		for _, m := range maps {
			if m.Exec {
				paths = append(paths, m.Path)
			}
		}
		modules = GoModules("/proc/"+strconv.Itoa(t.PID)+"/root", paths, t.Binary)
	}
	var im *Image
	var capErr error
	prev := t.Hooks
	hooks := &inspect.StopHooks{}
	if prev != nil {
		*hooks = *prev
	}
	// The process's faults are counted from before the stop: the copy
	// is read from the stop on (the goroutines' stacks first).
	// The copy's cost in the process's memory cgroups is polled from
	// before the stop until the copy is gone (guard).
	var faults uint64
	faultsErr := errors.New("not counted")
	var grd *guard
	copyDied := false
	hooks.Stopping = func() {
		if prev != nil && prev.Stopping != nil {
			prev.Stopping()
		}
		faults, faultsErr = proc.MinorFaults(t.PID)
		if freeze && plan.limited() && grd == nil {
			grd = startGuard(t.PID, plan)
		}
	}
	hooks.Stopped = func(threads []ptrace.Thread, now int64) error {
		if prev != nil && prev.Stopped != nil {
			if err := prev.Stopped(threads, now); err != nil {
				return err
			}
		}
		threads = append([]ptrace.Thread(nil), threads...)
		if plan.noRoom != nil {
			capErr = plan.noRoom
			return nil
		}
		if frozen := t.FrozenCopy() != 0; frozen || tracked == nil {
			// t.Mem is the frozen copy, the process running, or the
			// stopped process.
			if freeze && !frozen {
				why = "the process could not be frozen: " + t.FreezeRefused()
			}
			var check func() error
			if frozen {
				// The process runs on, sharing its memory with the
				// copy: each page it writes is copied.
				var growth func() error
				if faultsErr == nil {
					growth = growthCheck(t.PID, faults, opts.Growth)
				}
				check = func() error {
					if err := grd.tripped(); err != nil {
						return err
					}
					if growth != nil {
						return growth()
					}
					return nil
				}
			}
			im, capErr = capture(t.Mem, t.Binary, t.Layout, t.Bias, threads, opts, buf, check)
			if frozen {
				// Dead (a zombie until gi collects it), and not
				// by the guard: its memory cgroup's OOM killer,
				// or anyone's kill.
				alive := proc.Alive(t.FrozenCopy())
				if err := grd.tripped(); err != nil {
					if im == nil {
						capErr = err
					}
				} else if !alive {
					copyDied = true
				}
			}
			if im != nil {
				im.buffer, whole = whole, nil
				im.Frozen = frozen
				if !frozen {
					im.InStop = why
				}
			}
			return nil
		}
		start := time.Now()
		if capErr = tracked.Sync(); capErr != nil {
			return nil
		}
		if im, capErr = Capture(tracked, t.Binary, t.Layout, t.Bias, threads, opts); im != nil {
			im.Took, im.PreCopy = time.Since(start), precopy
			im.Synced, im.Rewritten = tracked.Synced, tracked.Dirty
		}
		return nil
	}
	// Every stack copied in the stop: a copy made before it is kept when
	// the goroutine's stamp is the same in the stop, and a goroutine
	// that ran a multiple of 256 times (g.trackingSeq) and parked again
	// in the same place has the same stamp and other values on its
	// stack — a pointer the walk would miss.
	keep, inStop, frz, vec := t.KeepStacks, t.StacksInStop, t.Freeze, t.VectorRegs
	t.Hooks, t.KeepStacks, t.StacksInStop, t.Freeze, t.VectorRegs = hooks, true, true, freeze, true
	defer func() {
		t.Hooks, t.KeepStacks, t.StacksInStop, t.Freeze, t.VectorRegs = prev, keep, inStop, frz, vec
		if whole != nil { // not handed to an image
			unix.Munmap(whole)
		}
	}()
	if freeze {
		// The copy is made by a thread parked in runtime.futex's wait
		// (ptrace.Gadget): a busy process may have none at an
		// instant, so gi waits a little for one before it stops it.
		waitParked(t.PID)
	}
	snap, err := snapshot()
	tripped := grd.end()
	grd = nil
	if died := plan.died(t.PID, freeze, copyDied || err != nil && freeze && tripped == nil && plan.oomKills() != ""); died != nil {
		im.Release()
		return nil, nil, died
	}
	if tripped != nil && (err != nil || capErr != nil) {
		// The copy given up: copied in the stop of a second snapshot
		// instead, which costs the process nothing in its cgroups.
		im.Release()
		im, capErr, why = nil, nil, tripped.Error()+"; copied in a second stop instead"
		freeze, t.Freeze = false, false
		if whole != nil {
			unix.Munmap(whole)
			buf, whole = nil, nil
		}
		if n := scan; n >= 4<<20 {
			buf, whole, _ = hugemem.Populated(int(n + n/4 + 16<<20))
		}
		snap, err = snapshot()
		if died := plan.died(t.PID, false, false); died != nil {
			im.Release()
			return nil, nil, died
		}
	}
	if err != nil {
		im.Release()
		return nil, nil, err
	}
	if capErr != nil {
		return snap, nil, capErr
	}
	im.GoModules = modules
	return snap, im, nil
}

// idleWaits are the runtime's functions an idle thread waits in, in a
// system call: where the stop finds it when the kernel does not say it
// is in one (arm64's threads, whose system call is not always known).
var idleWaits = []string{"runtime.futex", "runtime.epollwait", "runtime.usleep", "runtime.nanosleep",
	"internal/runtime/syscall/linux.Syscall6", "internal/runtime/syscall.Syscall6", "runtime/internal/syscall.Syscall6",
	"syscall.Syscall6", "syscall.RawSyscall6", "syscall.rawSyscallNoError", "syscall.RawSyscall", "syscall.Syscall"}

// busyThreads returns which threads were stopped at work: not waiting in
// a system call (the kernel says so, or the thread's pc is in one of
// the runtime's idle waits). An idle thread's registers and g0 stack
// hold what is left over from work done, which the runtime never reads;
// a busy one may be in the middle of work that holds the only pointer to
// an object (a timer firing, a goroutine being readied). A thread whose
// registers are unknown is not busy (the walk is then undecided).
func busyThreads(exe *elfbin.Binary, bias uint64, threads []ptrace.Thread) map[int]bool {
	out := map[int]bool{}
	for _, th := range threads {
		if th.RegsErr != nil || th.Regs.Syscall >= 0 {
			continue
		}
		idle := false
		if f := exe.Lines.FuncForPC(th.Regs.PC - bias); f != nil {
			for _, w := range idleWaits {
				if f.Name == w || strings.HasPrefix(f.Name, w+".") {
					idle = true
				}
			}
		}
		if !idle {
			out[th.TID] = true
		}
	}
	return out
}

// GoModules returns the files of paths (the files a process maps, each
// opened under root: /proc/<pid>/root for a live one) that hold Go code
// other than its executable exe (whose build info they do not share):
// plugins, -linkshared libraries. Their globals are roots the walk does
// not read (it reads the executable's), so Find decides nothing beside
// them. A file gi cannot open is taken for what it usually is, a C
// library.
func GoModules(root string, paths []string, exe *elfbin.Binary) []string {
	var exeInfo []byte
	if s := exe.File.Section(".go.buildinfo"); s != nil {
		exeInfo, _ = s.Data()
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if p == "" || seen[p] || strings.HasPrefix(p, "[") {
			continue
		}
		seen[p] = true
		f, err := elf.Open(filepath.Join(root, p))
		if err != nil {
			continue
		}
		info := f.Section(".go.buildinfo")
		switch {
		case info != nil:
			if b, err := info.Data(); err != nil || !bytes.Equal(b, exeInfo) {
				out = append(out, p)
			}
		case f.Section(".gopclntab") != nil:
			out = append(out, p)
		}
		f.Close()
	}
	return out
}

// futexNr is the futex system call's number, as /proc/<tid>/syscall
// shows it.
var futexNr = map[string]string{"amd64": "202", "arm64": "98"}[runtime.GOARCH]

// waitParked waits, up to 250 ms, until a thread of process pid is
// blocked in a futex wait.
func waitParked(pid int) {
	for deadline := time.Now().Add(250 * time.Millisecond); time.Now().Before(deadline); {
		if proc.ThreadInFutexWait(pid, futexNr) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
