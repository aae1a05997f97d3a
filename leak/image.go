package leak

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
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
	// Globals are the executable's data and bss, as copied.
	Globals []Segment
	// Threads are the process's threads with their registers, and
	// ThreadStacks the stacks they were on from their stack pointer up,
	// where that is the stack of the g their g register names (a
	// goroutine's, or a thread's g0 or signal stack, where the runtime
	// does work in flight: a timer firing, a goroutine being readied).
	Threads      []ptrace.Thread
	ThreadStacks []Segment
	// GoModules are files the process maps, beside its executable,
	// that hold Go code (GoModules): their globals are not read, and
	// Find decides nothing.
	GoModules []string
	// Took is how long the capture took (Take: its part in the stop).
	Took time.Duration
	// PreCopy is how long Take copied the heap before the stop, Synced
	// and Rewritten the pages it checked and read again in the stop; 0
	// when it copied everything in the stop, InStop says why.
	PreCopy           time.Duration
	Synced, Rewritten int
	InStop            string

	buffer []byte // the mapping the heap was copied into, Take's
}

// Segment is a copy of memory at Addr.
type Segment struct {
	Addr  uint64
	Bytes []byte
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
	return capture(mem, exe, layout, bias, threads, lim, nil)
}

// capture is Capture copying the heap into buf when it is large enough.
func capture(mem heap.Reader, exe *elfbin.Binary, layout *runtimelayout.RuntimeLayout, bias uint64, threads []ptrace.Thread, lim Options, buf []byte) (*Image, error) {
	start := time.Now()
	lim.defaults()
	h, err := heap.Read(mem, &layout.Heap, exe.Arch, bias, lim.Heap)
	if err != nil {
		return nil, fmt.Errorf("read the heap: %w", err)
	}
	c, err := heap.CopyInto(mem, h, lim.Bytes, buf)
	if err != nil {
		return nil, err
	}
	im := &Image{Heap: h, Contents: c, Threads: threads}
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
	if len(ranges) == 0 {
		c.Release()
		return nil, errors.New("the executable has no .data or .bss section: its globals are unknown")
	}
	globals := make([]byte, total)
	if err := mem.ReadBatch(ranges, globals); err != nil {
		c.Release()
		return nil, fmt.Errorf("copy the globals: %w", err)
	}
	off := 0
	for _, r := range ranges {
		im.Globals = append(im.Globals, Segment{Addr: r.Addr, Bytes: globals[off : off+r.Len]})
		off += r.Len
	}
	im.ThreadStacks = threadStacks(mem, layout, threads)
	im.Took = time.Since(start)
	return im, nil
}

// maxThreadStack bounds the bytes of a thread's stack copied.
const maxThreadStack = 8 << 20

// threadStacks copies, for each thread at work (busy), the stack its
// stack pointer is on, from there up, when its g register (r14, x28)
// names a g whose stack holds the stack pointer. A thread in C code,
// whose g register is anything, is left out.
func threadStacks(mem heap.Reader, l *runtimelayout.RuntimeLayout, threads []ptrace.Thread) []Segment {
	var out []Segment
	for _, th := range threads {
		r := th.Regs
		if !busy(th) || r.G == 0 || r.SP == 0 {
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
// when the goroutines were copied. Where the kernel tracks the pages a
// process writes (proc.Track), the heap and the globals are copied
// before the stop, while the process runs, and in the stop only the
// pages it wrote since are read again; elsewhere, and with InStop, they
// are copied in the stop. The hooks the Target already has still run. A
// failed capture returns the snapshot with the error.
func Take(t *inspect.Target, snapshot func() (*inspect.Snapshot, error), opts Options) (*inspect.Snapshot, *Image, error) {
	var tracked *proc.Tracked
	var precopy time.Duration
	why := "asked to (a core of the stop holds what it copies)"
	if !opts.InStop {
		why = "the process's memory is not a live process's"
		if live, ok := t.Mem.(*proc.Memory); ok {
			start := time.Now()
			var err error
			if tracked, err = proc.Track(t.PID, live); err == nil {
				// What is read now is kept, and what the process
				// writes before the stop read again in it. A capture
				// of a running process may fail (a span being made):
				// the stop's capture reads what this one did not.
				if pre, err := Capture(tracked, t.Binary, t.Layout, t.Bias, nil, opts); err == nil {
					pre.Release()
				}
				precopy = time.Since(start)
			} else {
				why = err.Error()
			}
		}
	}
	// Copied in the stop: the copy's buffer is made before it, its pages
	// faulted in (a heap of a gigabyte is a quarter of a million pages),
	// sized from the heap as it is now, with room to grow.
	var buf, whole []byte
	if tracked == nil {
		if h, err := heap.Read(t.Mem, &t.Layout.Heap, t.Binary.Arch, t.Bias, opts.Heap); err == nil {
			if n := h.ScanBytes(); n >= 4<<20 {
				buf, whole, _ = hugemem.Populated(int(n + n/4 + 16<<20))
			}
		}
	}
	var modules []string
	if maps, err := proc.Mappings(t.PID); err == nil {
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
	hooks.Stopped = func(threads []ptrace.Thread, now int64) error {
		if prev != nil && prev.Stopped != nil {
			if err := prev.Stopped(threads, now); err != nil {
				return err
			}
		}
		threads = append([]ptrace.Thread(nil), threads...)
		if tracked == nil {
			im, capErr = capture(t.Mem, t.Binary, t.Layout, t.Bias, threads, opts, buf)
			if im != nil {
				im.InStop, im.buffer, whole = why, whole, nil
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
	keep, inStop := t.KeepStacks, t.StacksInStop
	t.Hooks, t.KeepStacks, t.StacksInStop = hooks, true, true
	defer func() {
		t.Hooks, t.KeepStacks, t.StacksInStop = prev, keep, inStop
		if whole != nil { // not handed to an image
			unix.Munmap(whole)
		}
	}()
	snap, err := snapshot()
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

// busy reports whether a thread was stopped at work, not in a system
// call: an idle thread waits in one (futex, epoll_pwait, nanosleep), and
// what its registers and its g0 stack hold is left over from work done,
// which the runtime never reads; a busy one may be in the middle of work
// that holds the only pointer to an object (a timer firing, a goroutine
// being readied). (A thread whose registers are unknown leaves the walk
// undecided.)
func busy(th ptrace.Thread) bool {
	return th.RegsErr == nil && th.Regs.Syscall < 0
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
