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
// finds pointers as the garbage collector does: in stacks by the
// runtime's stack maps, in globals by the module's pointer masks, in
// heap objects by the runtime's pointer maps (heap.Pointers: its heap
// bitmap, heap bits, malloc headers and types, by release). Where a
// map is unknown — a whole heap, a span, an object — it scans
// conservatively: every aligned word that points into an object of the
// heap counts as a pointer. That can only hide a leak (a word that
// merely looks like a pointer keeps its object), never report one that
// is not. Result.Mode says which ran. Every loop over the image is
// bounded (Options); a bound hit, or memory the image lacks, leaves the
// reachability undecided and says why, and then only the goroutines
// leaked by definition are reported.
package leak

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gi-debug/gi/heap"
	"github.com/gi-debug/gi/inspect"
)

// maxSudogsPerG bounds a goroutine's g.waiting list (a select's cases).
const maxSudogsPerG = 1 << 16

// mode says how the walk found pointers (Result.Mode): in stacks, heap
// objects (by the pointer maps of im, and, after a walk w, how many
// objects were scanned without and why) and globals.
func mode(im *Image, w *walker) string {
	heapMode := "heap not read"
	globals := "globals precise (the module's pointer masks)"
	if im != nil {
		for _, s := range im.Globals {
			if s.Mask == nil {
				globals = "globals conservative (their masks unknown)"
			}
		}
		switch p := im.Pointers; {
		case p == nil:
			heapMode = "heap conservative (every aligned word that points into an object counts)"
		case p.Unknown() != "":
			heapMode = "heap conservative (every aligned word that points into an object counts: " + p.Unknown() + ")"
		default:
			heapMode = "heap precise (" + p.Format() + ")"
			if w != nil && w.conservative > 0 {
				whys := make([]string, 0, len(w.whys))
				for why, n := range w.whys {
					whys = append(whys, fmt.Sprintf("%d %s", n, why))
				}
				slices.Sort(whys)
				heapMode = fmt.Sprintf("heap precise (%s) but for %d of the %d objects scanned, scanned conservatively (%s)", p.Format(), w.conservative, w.conservative+w.precise, strings.Join(whys, "; "))
			}
		}
	}
	return "stacks precise (the runtime's stack maps), " + heapMode + ", " + globals
}

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
	// Growth bounds the memory the process may fault in while its
	// frozen copy is read (Take): copies of the pages it writes while
	// it shares them with the copy, and fresh ones, counted by its
	// minor faults (a page each). Past it the copy is given up and the
	// walk is not made (0: 1 GiB; negative: no bound).
	Growth int64
	// NoFreeze reads a live process in the stop, or before it where the
	// kernel tracks written pages, not from a copy it makes of itself
	// (Take): the paths a process that cannot be frozen takes.
	NoFreeze bool
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

// Result is what Find decided.
type Result struct {
	// Mode says how pointers were found: in stacks, heap objects (by
	// the runtime's pointer maps, or conservatively, and for how many
	// objects each) and globals.
	Mode string
	// PreciseObjects counts the heap objects scanned by their pointer
	// maps, ConservativeObjects those scanned word by word (their maps
	// unknown).
	PreciseObjects, ConservativeObjects int
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
	res := &Result{Mode: mode(im, nil), Leaked: map[uint64]string{}, Unreachable: map[uint64]bool{}}
	defer func() {
		res.Took = time.Since(start)
		for _, g := range snap.Goroutines {
			if why, ok := res.Leaked[g.ID]; ok {
				g.Leaked, g.LeakedWhy = true, why
				for i := range g.WaitingOn {
					if o := &g.WaitingOn[i]; res.Unreachable[o.Addr] || (o.Sema != 0 && res.Unreachable[o.Sema]) {
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
			// Go 1.26 marks the main goroutine's select {} too (1.27
			// reverts it): not reported, as the rule says.
			if !(g.ID == 1 && g.WaitReason == "select (no cases)") {
				res.Leaked[g.ID] = "marked leaked by the runtime"
			}
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
	if im.QueuedUnknown != "" {
		res.Undecided = im.QueuedUnknown
		return res
	}
	if len(im.GoModules) > 0 {
		res.Undecided = fmt.Sprintf("Go code outside the executable (%s): its globals are not read", strings.Join(im.GoModules, ", "))
		return res
	}
	// A partial snapshot may lack a root or part of a wait: decide
	// nothing on it (pprof labels aside, which hold no object).
	for _, warning := range snap.Warnings {
		if !strings.HasPrefix(warning, "labels: ") {
			res.Undecided = "the snapshot is partial: " + warning
			return res
		}
	}
	for _, th := range im.Threads {
		if th.RegsErr != nil {
			res.Undecided = fmt.Sprintf("the registers of thread %d could not be read: %v", th.TID, th.RegsErr)
			return res
		}
		if th.VectorErr != nil && im.Busy[th.TID] {
			res.Undecided = fmt.Sprintf("the vector registers of thread %d, stopped at work, could not be read: %v", th.TID, th.VectorErr)
			return res
		}
	}
	if len(im.Contents.Unread) > 0 {
		res.Undecided = fmt.Sprintf("%d spans of the heap could not be read (the first at %#x)", len(im.Contents.Unread), im.Contents.Unread[0])
		return res
	}
	w := newWalker(im, snap, layout, lim)
	for _, s := range im.Globals {
		w.from = fmt.Sprintf("globals at %#x", s.Addr)
		w.scanSegment(s)
	}
	// The registers of the threads at work, and the stacks they are on
	// (a g0's, where the runtime may hold the only pointer to what it is
	// about to wake): a stale word there can only keep an object alive.
	w.from = "registers"
	for _, th := range im.Threads {
		if !im.Busy[th.TID] {
			continue
		}
		r := th.Regs
		for _, v := range append([]uint64{r.PC, r.SP, r.BP, r.LR, r.G, r.Arg0}, r.All[:]...) {
			w.word(v)
		}
		// Its vector registers, every word: a copy through them
		// (memmove) may hold the only pointer to an object. The
		// runtime's own collector never looks there (it stops
		// goroutines at safe points; an asynchronously preempted one's
		// saved vector state it assumes scalar), gi stops threads
		// anywhere.
		for i := 0; i+8 <= len(th.Vector); i += 8 {
			w.word(binary.LittleEndian.Uint64(th.Vector[i:]))
		}
	}
	for _, s := range im.ThreadStacks {
		w.from = fmt.Sprintf("thread stack at %#x", s.Addr)
		w.scan(s.Bytes, s.Addr, 0)
	}
	for _, g := range roots {
		if err := w.stack(g); err != nil {
			res.Undecided = err.Error()
			return res
		}
	}
	for _, s := range im.Queued {
		w.from = fmt.Sprintf("queued finalizers or cleanups at %#x", s.Addr)
		w.scan(s.Bytes, s.Addr, 0)
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
	res.PreciseObjects, res.ConservativeObjects, res.Mode = w.precise, w.conservative, mode(im, w)
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
			// A waiter off its channel's queue, or on a closed one, is
			// being woken (the waker dequeues under the channel's lock,
			// then readies it, holding no pointer to the channel).
			if !o.Queued || o.Chan == nil || o.Chan.Closed {
				return nil
			}
		case k == syncWait && (o.Kind == "mutex" || o.Kind == "rwmutex" || o.Kind == "waitgroup" || o.Kind == "cond" || o.Kind == "sema"):
		default:
			return nil
		}
		// A sync wait is judged on its semaphore, as the runtime judges
		// it (sudog.elem): a word inside the object, whose start gi
		// derives from the waiting frames.
		a := o.Addr
		if k == syncWait && o.Sema != 0 {
			a = o.Sema
		}
		c.objects = append(c.objects, a)
	}
	if len(c.objects) == 0 {
		return nil
	}
	return c
}
