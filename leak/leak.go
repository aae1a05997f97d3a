// Package leak decides, from outside a Go process, which of its blocked
// goroutines can never be woken: by the rule of the runtime's own
// detector (Go 1.27's goroutineleak profile), a goroutine blocked on a
// channel (receive, send, select) or on a sync object (Mutex, RWMutex,
// WaitGroup, Cond, a semaphore) is leaked when that object is
// unreachable from the roots — globals, the stacks and registers of
// every goroutine that is not blocked on such an object, finalizers and
// cleanups — and from everything those goroutines could wake in turn
// (the fixpoint), never counting an edge that exists only through a
// blocked goroutine's own stack or the sudogs it waits with. A select
// with no cases and an operation on a nil channel block forever by
// definition (the main goroutine's select {} excepted, as the runtime
// excepts it).
//
// The walk reads an Image of the process taken at one instant (Capture,
// in the stop of a snapshot, or from a core file) beside that
// snapshot's goroutines, their stacks kept (inspect's KeepStacks). It
// scans conservatively: every aligned word that points into an
// allocated object of the heap counts as a pointer. That can only hide
// a leak (a word that merely looks like a pointer keeps its object),
// never report one that is not. Every loop over the image is bounded
// (Options); a bound hit, or memory the image lacks, leaves the
// reachability undecided and says why, and then only the goroutines
// leaked by definition are reported.
package leak

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
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

// maxSudogsPerG bounds a goroutine's g.waiting list (a select's cases).
const maxSudogsPerG = 1 << 16

// Mode names how the walk finds pointers.
const Mode = "stacks precise (the runtime's stack maps), heap and globals conservative (every aligned word that points into an allocated object counts)"

// Options bound the capture and the walk, and ask for its trace.
type Options struct {
	// Heap bounds the heap's index walk (heap.Limits).
	Heap heap.Limits
	// Bytes bounds the bytes of heap spans copied (0: 64 GiB).
	Bytes int64
	// Objects bounds the objects marked (0: 1<<30); Time the walk's
	// duration (0: 5 minutes).
	Objects int
	Time    time.Duration
	// InStop copies the heap and the globals in the stop, none before
	// (gi ps --core: the core holds what the stop read).
	InStop bool
	// Trace, if set, receives for each goroutine found able to run
	// again the path by which the walk reached what it waits on: why
	// it is not leaked.
	Trace io.Writer
}

func (l *Options) defaults() {
	if l.Bytes == 0 {
		l.Bytes = 64 << 30
	}
	if l.Objects == 0 {
		l.Objects = 1 << 30
	}
	if l.Time == 0 {
		l.Time = 5 * time.Minute
	}
}

// Memory is the process's memory as Capture reads it: a stopped live
// process's, or a core file's.
type Memory interface {
	ReadAt(p []byte, addr uint64) (int, error)
	ReadBatch(ranges []proc.Range, dst []byte) error
}

// Image is what the walk reads of the process, copied at one instant:
// the heap's spans and the contents of those that hold pointers, the
// executable's data and bss, and the threads' registers.
type Image struct {
	Heap     *heap.Heap
	Contents *heap.Contents
	// Globals are the executable's data and bss, as copied.
	Globals []Segment
	// Threads are the process's threads with their registers.
	Threads []ptrace.Thread
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
func Capture(mem Memory, exe *elfbin.Binary, layout *runtimelayout.HeapLayout, bias uint64, threads []ptrace.Thread, lim Options) (*Image, error) {
	return capture(mem, exe, layout, bias, threads, lim, nil)
}

// capture is Capture copying the heap into buf when it is large enough.
func capture(mem Memory, exe *elfbin.Binary, layout *runtimelayout.HeapLayout, bias uint64, threads []ptrace.Thread, lim Options, buf []byte) (*Image, error) {
	start := time.Now()
	lim.defaults()
	h, err := heap.Read(mem, layout, exe.Arch, bias, lim.Heap)
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
	im.Took = time.Since(start)
	return im, nil
}

// Result is what Find decided.
type Result struct {
	// Mode says how pointers were found (Mode).
	Mode string
	// Leaked maps each leaked goroutine's id to why: "no runnable
	// goroutine can reach chan 0xc000…", "select with no cases", "nil
	// channel", "marked leaked by the runtime".
	Leaked map[uint64]string
	// Unreachable are the objects leaked goroutines wait on, by
	// address: no goroutine that can run reaches them.
	Unreachable map[uint64]bool
	// Undecided, when set, says why reachability could not be decided
	// (a bound hit, memory the image lacks): only the goroutines leaked
	// by definition are in Leaked.
	Undecided string
	// Candidates counts the goroutines blocked on channels and sync
	// objects the walk decided about; Marked the heap objects found
	// reachable, Scanned the bytes scanned; Rounds the fixpoint's.
	Candidates, Marked, Rounds int
	Scanned                    int64
	// Frames counts the stack frames scanned, by their stack maps but
	// WholeFrames of them (interrupted, or with no usable map: every
	// word); WholeStacks the stacks scanned whole (not unwound to
	// their end).
	Frames, WholeFrames, WholeStacks int
	// Took is how long the walk took.
	Took time.Duration
}

// kind is how a wait reason is judged.
type kind int

const (
	notJudged kind = iota
	chanWait       // leaked when none of its channels is reachable
	syncWait       // leaked when its sync object is not reachable
	never          // blocks forever by definition
)

// kindOf returns how the runtime's leak detector judges a goroutine
// waiting with reason r (runtime.isMaybeRunnable): channel operations,
// sync objects, and the waits that can never end. A plain semaphore
// wait ("semacquire", internal/poll's) is not judged — except where the
// release has no reason of its own for sync.WaitGroup.Wait (before Go
// 1.24) and the goroutine waits on a WaitGroup (candidateOf).
func kindOf(r string) kind {
	switch r {
	case "chan receive", "chan send", "select":
		return chanWait
	case "sync.Mutex.Lock", "sync.RWMutex.RLock", "sync.RWMutex.Lock", "sync.Cond.Wait", "sync.WaitGroup.Wait", "semacquire":
		return syncWait
	case "select (no cases)", "chan receive (nil chan)", "chan send (nil chan)":
		return never
	}
	return notJudged
}

// candidate is a goroutine blocked on objects whose reachability decides
// whether it is leaked.
type candidate struct {
	g       *inspect.Goroutine
	objects []uint64
}

// Find decides which goroutines of snap are leaked. snap must have been
// taken of t with its stacks kept (inspect's KeepStacks) at the instant
// im was captured. It marks the leaked
// goroutines (Goroutine.Leaked) and the objects they wait on
// (WaitObject.Unreachable) in snap.
func Find(t *inspect.Target, snap *inspect.Snapshot, im *Image, lim Options) *Result {
	layout := t.Layout
	start := time.Now()
	lim.defaults()
	res := &Result{Mode: Mode, Leaked: map[uint64]string{}, Unreachable: map[uint64]bool{}}
	defer func() {
		res.Took = time.Since(start)
		for _, g := range snap.Goroutines {
			if why, ok := res.Leaked[g.ID]; ok {
				g.Leaked, g.LeakedWhy = true, why
				for i := range g.WaitingOn {
					if o := &g.WaitingOn[i]; res.Unreachable[o.Addr] {
						o.Unreachable = true
					}
				}
			}
		}
	}()
	waiting, _ := layout.StatusValue("_Gwaiting")
	leakedStatus, hasLeaked := layout.StatusValue("_Gleaked")
	// Before Go 1.24 sync.WaitGroup.Wait waited as "semacquire".
	oldWaitGroup := !slices.Contains(t.States(), "sync.WaitGroup.Wait")
	var cands []*candidate
	var roots []*inspect.Goroutine
	for _, g := range snap.Goroutines {
		if hasLeaked && g.StatusValue == leakedStatus {
			res.Leaked[g.ID] = "marked leaked by the runtime"
			continue
		}
		k := notJudged
		if g.StatusValue == waiting {
			k = kindOf(g.WaitReason)
		}
		switch k {
		case never:
			if g.ID == 1 && g.WaitReason == "select (no cases)" {
				// The runtime excepts the main goroutine from its
				// report; its stack is no root all the same.
				continue
			}
			if g.WaitReason == "select (no cases)" {
				res.Leaked[g.ID] = "select with no cases: blocks forever"
			} else {
				res.Leaked[g.ID] = "operation on a nil channel: blocks forever"
			}
			continue
		case chanWait, syncWait:
			if g.WaitReason == "semacquire" && !oldWaitGroup {
				break
			}
			if c := candidateOf(g, k, g.WaitReason == "semacquire"); c != nil {
				cands = append(cands, c)
				continue
			}
		}
		roots = append(roots, g)
	}
	res.Candidates = len(cands)
	if len(cands) == 0 {
		return res
	}
	if im == nil {
		res.Undecided = "the heap was not read"
		return res
	}
	if len(im.Contents.Unread) > 0 {
		res.Undecided = fmt.Sprintf("%d spans of the heap could not be read (the first at %#x)", len(im.Contents.Unread), im.Contents.Unread[0])
		return res
	}
	w := newWalker(im, snap, layout, lim)
	for _, s := range im.Globals {
		w.from = fmt.Sprintf("globals at %#x", s.Addr)
		w.scan(s.Bytes, s.Addr, 0)
	}
	// The registers of the threads running goroutines: a running
	// goroutine may hold a pointer nowhere else. (An idle thread's
	// registers are stale; the runtime never reads them.)
	running := map[int]bool{}
	for _, g := range snap.Goroutines {
		if g.Status == "running" {
			running[g.ThreadID] = true
			if g.HostThreadID != 0 {
				running[g.HostThreadID] = true
			}
		}
	}
	w.from = "registers"
	for _, th := range im.Threads {
		if !running[th.TID] {
			continue
		}
		r := th.Regs
		for _, v := range append([]uint64{r.PC, r.SP, r.BP, r.LR, r.G, r.Arg0}, r.All[:]...) {
			w.word(v)
		}
	}
	for _, g := range roots {
		if err := w.stack(g); err != nil {
			res.Undecided = err.Error()
			return res
		}
	}
	w.from = "finalizers"
	for i := range im.Heap.Spans {
		for _, root := range im.Heap.Spans[i].Roots {
			w.special(root)
		}
	}
	for changed := true; changed; {
		res.Rounds++
		if err := w.drain(); err != nil {
			res.Undecided = err.Error()
			return res
		}
		changed = false
		kept := cands[:0]
		for _, c := range cands {
			if !w.anyReachable(c.objects) {
				kept = append(kept, c)
				continue
			}
			changed = true
			if w.parent != nil {
				w.trace(c)
			}
			if err := w.stack(c.g); err != nil {
				res.Undecided = err.Error()
				return res
			}
		}
		cands = kept
	}
	res.Marked, res.Scanned = w.marked, w.scanned
	res.Frames, res.WholeFrames, res.WholeStacks = w.frames, w.wholeFrames, w.wholeStacks
	for _, c := range cands {
		o := c.g.WaitingOn[0]
		why := fmt.Sprintf("no goroutine that can run reaches %s %#x", o.Kind, o.Addr)
		if len(c.objects) > 1 {
			why = fmt.Sprintf("no goroutine that can run reaches any of its %d channels", len(c.objects))
		}
		res.Leaked[c.g.ID] = why
		for _, a := range c.objects {
			res.Unreachable[a] = true
		}
	}
	return res
}

// candidateOf returns the objects goroutine g waits on, nil if any of
// them is unknown (never guess a leak); waitGroupOnly admits only a
// WaitGroup (a "semacquire" wait of a release before Go 1.24).
func candidateOf(g *inspect.Goroutine, k kind, waitGroupOnly bool) *candidate {
	c := &candidate{g: g}
	for _, o := range g.WaitingOn {
		if o.Unknown != "" || o.Addr == 0 {
			return nil
		}
		switch {
		case waitGroupOnly:
			if o.Kind != "waitgroup" {
				return nil
			}
		case k == chanWait && o.Kind == "chan":
		case k == syncWait && (o.Kind == "mutex" || o.Kind == "rwmutex" || o.Kind == "waitgroup" || o.Kind == "cond" || o.Kind == "sema"):
		default:
			return nil
		}
		c.objects = append(c.objects, o.Addr)
	}
	if len(c.objects) == 0 {
		return nil
	}
	return c
}

// walker marks the heap objects reachable from what it is given to scan.
type walker struct {
	im      *Image
	h       *heap.Heap
	lo, hi  uint64 // the heap's bounds: no pointer outside them
	marks   [][]uint64
	work    []objRef
	marked  int
	scanned int64
	// frames counts the frames of the stacks scanned, wholeFrames those
	// scanned whole (no stack map applied), wholeStacks the stacks.
	frames, wholeFrames, wholeStacks int
	lim                              Options
	start                            time.Time
	// parent, when tracing (Options.Trace), maps each marked object's
	// start to where the word that marked it was found.
	parent map[uint64]string
	from   string
	// sudogs maps the start of each sudog's slot to the value the walk
	// does not follow there: c for a channel wait, elem (the semaphore,
	// the Cond's notifyList) for a sync wait — the runtime's
	// maybeTraceablePtrs, untraceable in its leak cycle.
	sudogs map[uint64]uint64
}

type objRef struct {
	span int
	slot int32
}

func newWalker(im *Image, snap *inspect.Snapshot, layout *runtimelayout.RuntimeLayout, lim Options) *walker {
	h := im.Heap
	w := &walker{im: im, h: h, marks: make([][]uint64, len(h.Spans)), lim: lim, start: time.Now(), sudogs: map[uint64]uint64{}}
	if lim.Trace != nil {
		w.parent = map[uint64]string{}
	}
	if n := len(h.Spans); n > 0 {
		w.lo, w.hi = h.Spans[0].Start, h.Spans[n-1].Start+h.Spans[n-1].Pages*h.PageSize
	}
	// The sudogs: those the snapshot read (g.waiting, the semaphore
	// table) and those of each goroutine's g.waiting list, followed here
	// (a Cond waiter's since Go 1.26, which the snapshot reads apart).
	S := layout.Wait.Sudog
	var b [8]byte
	word := func(addr uint64) uint64 {
		if !im.Contents.Read(b[:], addr) {
			return 0
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	addSudog := func(a uint64) bool {
		if _, seen := w.sudogs[a]; seen {
			return false
		}
		k, ok := h.Find(a)
		if !ok {
			return false
		}
		if _, start, ok := h.Spans[k].Object(a); !ok || start != a {
			return false
		}
		if c := word(a + uint64(S.C)); c != 0 {
			w.sudogs[a] = c
		} else {
			w.sudogs[a] = word(a + uint64(S.Elem))
		}
		return true
	}
	for _, a := range snap.Sudogs {
		addSudog(a)
	}
	if layout.Wait.Known {
		for _, g := range snap.Goroutines {
			sg := word(g.Addr + uint64(layout.Wait.GWaiting))
			for n := 0; sg != 0 && n < maxSudogsPerG && addSudog(sg); n++ {
				sg = word(sg + uint64(S.WaitLink))
			}
		}
	}
	return w
}

// word marks the object v points into, if any.
func (w *walker) word(v uint64) {
	if v < w.lo || v >= w.hi {
		return
	}
	k, ok := w.h.Find(v)
	if !ok {
		return
	}
	s := &w.h.Spans[k]
	slot, _, ok := s.Object(v)
	if !ok || !s.Allocated(slot) {
		return
	}
	m := w.marks[k]
	if m == nil {
		m = make([]uint64, (s.NElems+63)/64)
		w.marks[k] = m
	}
	if m[slot/64]&(1<<(slot%64)) != 0 {
		return
	}
	m[slot/64] |= 1 << (slot % 64)
	w.marked++
	if w.parent != nil {
		w.parent[s.Start+uint64(slot)*s.ElemSize] = w.from
	}
	w.work = append(w.work, objRef{k, int32(slot)})
}

// scan marks what the aligned words of b, copied from start, point to;
// a word equal to skip (not 0) is not followed (a sudog's c or elem).
func (w *walker) scan(b []byte, start, skip uint64) {
	w.scanned += int64(len(b))
	for i := int((8 - start%8) % 8); i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		if v < w.lo || v >= w.hi || (skip != 0 && v == skip) {
			continue
		}
		w.word(v)
	}
}

// drain scans the marked objects not yet scanned, until none is left.
func (w *walker) drain() error {
	for n := 0; len(w.work) > 0; n++ {
		if w.marked > w.lim.Objects {
			return fmt.Errorf("more than the bound of %d reachable objects", w.lim.Objects)
		}
		if n%4096 == 0 && time.Since(w.start) > w.lim.Time {
			return fmt.Errorf("the walk took longer than its bound of %v", w.lim.Time)
		}
		o := w.work[len(w.work)-1]
		w.work = w.work[:len(w.work)-1]
		s := &w.h.Spans[o.span]
		if s.Noscan {
			continue
		}
		b := w.im.Contents.Object(o.span, int(o.slot))
		if b == nil {
			return fmt.Errorf("heap object in span %#x not copied", s.Record)
		}
		start := s.Start + uint64(o.slot)*s.ElemSize
		if w.parent != nil {
			w.from = fmt.Sprintf("object %#x", start)
		}
		w.scan(b, start, w.sudogs[start])
	}
	return nil
}

// stack scans a goroutine's stack as a root.
func (w *walker) stack(g *inspect.Goroutine) error {
	if g.Stack == nil || !g.Stack.Complete {
		why := "not copied"
		if g.Problem != "" {
			why = g.Problem
		}
		return fmt.Errorf("the stack of goroutine %d, which can run, could not be read whole (%s)", g.ID, why)
	}
	if w.parent != nil {
		w.from = fmt.Sprintf("stack of goroutine %d", g.ID)
	}
	c := g.Stack
	if g.Truncated || c.Frames == 0 {
		// Not unwound to its end: every word, as a conservative
		// collector would.
		w.scan(c.Bytes, c.SP, 0)
		w.wholeStacks++
		return nil
	}
	for i := 0; 8*i+8 <= len(c.Bytes); i++ {
		if c.Scanned(i) {
			w.scanned += 8
			w.word(binary.LittleEndian.Uint64(c.Bytes[8*i:]))
		}
	}
	w.frames += c.Frames
	w.wholeFrames += c.WholeFrames
	return nil
}

// special scans an object with a finalizer or a cleanup as the garbage
// collector does: what it points to (not the object itself), and the
// special record (the function).
func (w *walker) special(r heap.Root) {
	if k, ok := w.h.Find(r.Object); ok {
		s := &w.h.Spans[k]
		if slot, _, ok := s.Object(r.Object); ok && !s.Noscan {
			if b := w.im.Contents.Object(k, slot); b != nil {
				w.scan(b, r.Object, 0)
			}
		}
	}
	// The record is outside the heap: its words are in no copy but the
	// heap's index read; the function value it points to is found by
	// the word scan of the record, read with the heap.
	for _, v := range r.Words {
		w.word(v)
	}
}

// anyReachable reports whether any of objs is reachable: marked, or
// outside the heap (a global, a stack: the runtime counts those as
// marked too).
func (w *walker) anyReachable(objs []uint64) bool {
	for _, a := range objs {
		k, ok := w.h.Find(a)
		if !ok {
			return true
		}
		s := &w.h.Spans[k]
		slot, _, ok := s.Object(a)
		if !ok || !s.Allocated(slot) {
			return true
		}
		if m := w.marks[k]; m != nil && m[slot/64]&(1<<(slot%64)) != 0 {
			return true
		}
	}
	return false
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
				if pre, err := Capture(tracked, t.Binary, &t.Layout.Heap, t.Bias, nil, opts); err == nil {
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
			im, capErr = capture(t.Mem, t.Binary, &t.Layout.Heap, t.Bias, threads, opts, buf)
			if im != nil {
				im.InStop, im.buffer, whole = why, whole, nil
			}
			return nil
		}
		start := time.Now()
		if capErr = tracked.Sync(); capErr != nil {
			return nil
		}
		if im, capErr = Capture(tracked, t.Binary, &t.Layout.Heap, t.Bias, threads, opts); im != nil {
			im.Took, im.PreCopy = time.Since(start), precopy
			im.Synced, im.Rewritten = tracked.Synced, tracked.Dirty
		}
		return nil
	}
	keep := t.KeepStacks
	t.Hooks, t.KeepStacks = hooks, true
	defer func() {
		t.Hooks, t.KeepStacks = prev, keep
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
	return snap, im, nil
}

// trace writes, when tracing, the path by which each object of a
// candidate found able to run was reached.
func (w *walker) trace(c *candidate) {
	for _, a := range c.objects {
		fmt.Fprintf(w.lim.Trace, "goroutine %d (%s) can run: %#x <-", c.g.ID, c.g.WaitReason, a)
		if k, ok := w.h.Find(a); ok {
			_, start, _ := w.h.Spans[k].Object(a)
			for n := 0; n < 64; n++ {
				p, ok := w.parent[start]
				if !ok {
					fmt.Fprint(w.lim.Trace, " (not in the heap)")
					break
				}
				fmt.Fprintf(w.lim.Trace, " %s", p)
				if _, err := fmt.Sscanf(p, "object %v", &start); err != nil {
					break
				}
			}
		} else {
			fmt.Fprint(w.lim.Trace, " (not in the heap: a global or a stack)")
		}
		fmt.Fprintln(w.lim.Trace)
	}
}
