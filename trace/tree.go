package trace

import (
	"slices"
	"sort"
)

// Bounds on the state kept per event stream, so that memory stays bounded
// whatever the target does.
const (
	maxOpenFrames      = 4096    // open traced calls per goroutine
	maxTreeNodes       = 10_000  // calls kept for printing per root call
	maxGoroutineStates = 1 << 20 // goroutines with open calls
)

// Call is one traced call: a node of a goroutine's call tree.
type Call struct {
	Func *Function
	// Start and End are CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns).
	Start, End uint64
	// Depth counts traced frames only: 0 for a root call.
	Depth int
	// CallerPC is the return address at entry (a runtime address).
	CallerPC uint64
	// ReturnSite is the link-time address of the RET that fired, 0 if unwound.
	ReturnSite uint64
	// Unwound marks a call left without a RET (panic, recover, Goexit).
	Unwound bool
	// Running marks a call still open when the trace ended (see
	// Builder.Flush): End is then the end of the trace, and Duration its
	// time so far.
	Running bool
	// Children are the traced calls made by this call, in order; at most
	// maxTreeNodes per root are kept, the rest only counted in Dropped.
	Children []*Call
	Dropped  int
	// Parent is the traced call this call was made in, nil for a root call.
	Parent *Call
	// Seq numbers the calls of a Builder in the order they entered,
	// from 1: it identifies a call within one trace (span ids).
	Seq uint64
	// Args and Results are the bytes the probes captured of the arguments
	// at entry and of the results at return (Func.Args and Func.Results
	// read them; nil when nothing was captured).
	Args, Results []byte
	// Time is where the call's time went (Builder.Why): nil unless asked.
	Time *TimeSplit
	// Missed estimates, for a call traced whole, the calls of sampled
	// functions nested in it that went unseen between the sampling
	// windows, one per function known to be nested in calls of its
	// function (Session.Run sets it; nil without sampling).
	Missed []MissedCalls

	// frameKey is the distance of the call's return-address slot from the
	// top of the goroutine's stack: it identifies the frame even after the
	// runtime copies the stack elsewhere to grow it.
	frameKey uint64
	root     *Call
	nodes    int // on roots: nodes kept in this tree
}

// Root returns the root call of the tree the call belongs to.
func (c *Call) Root() *Call {
	if c.root != nil {
		return c.root
	}
	r := c // a tree not made by a Builder: follow the parents
	for r.Parent != nil {
		r = r.Parent
	}
	return r
}

// Duration returns End-Start in nanoseconds.
func (c *Call) Duration() uint64 {
	if c.End < c.Start {
		return 0
	}
	return c.End - c.Start
}

// GoroutineKey identifies a goroutine across the processes a trace may cover.
type GoroutineKey struct {
	PID  uint32
	Goid uint64
}

type goroutineState struct {
	key   GoroutineKey
	g     uint64
	stack []*Call
	why   whyState // Builder.Why: its state since its last event
}

// Builder rebuilds per-goroutine call trees from entry and return events.
// Returns are matched to entries by frame, so frames that a panic, recover
// or runtime.Goexit left without returning are popped and marked unwound.
type Builder struct {
	gs map[GoroutineKey]*goroutineState
	// maxGoroutines bounds gs (maxGoroutineStates; lowered by tests).
	maxGoroutines int
	// seq is the Seq of the last call entered.
	seq uint64
	// OnCall is called for every completed call (returned or unwound),
	// innermost first.
	OnCall func(GoroutineKey, *Call)
	// OnRoot is called when a root call completes, with its whole tree.
	OnRoot func(GoroutineKey, uint64, *Call)
	// OnCut, if set, is called for every call Cut drops, never to
	// complete.
	OnCut func(*Call)
	// Why splits each call's time (Call.Time) by what its goroutine did,
	// from the scheduler events passed to Sched.
	Why bool
	// Describe, if set, names what a goroutine parking with ev waits on,
	// from its first sudog's channel, what it said it was about to wait
	// on (note) and its stack; without it only channels are named.
	Describe func(k GoroutineKey, ev SchedEvent, note Note) WaitObject

	// Unmatched counts returns with no matching entry (calls that began
	// before the probes were attached); Overflow counts entries dropped
	// because a goroutine had too many open calls.
	Unmatched, Overflow uint64
	// Unsplit counts the calls left without a split (WhyWindows): the
	// scheduler's probes were off for all their time.
	Unsplit uint64
	// UnwoundCut counts the calls of sampled functions (Function.Sampled)
	// dropped as Cut drops them when they would have been unwound: their
	// return may have come after their window's probes went.
	UnwoundCut uint64

	coverage whyCoverage
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{gs: make(map[GoroutineKey]*goroutineState), maxGoroutines: maxGoroutineStates}
}

// Open returns the number of goroutines with open calls.
func (b *Builder) Open() int { return len(b.gs) }

func (b *Builder) state(k GoroutineKey, g uint64) *goroutineState {
	st := b.gs[k]
	if st == nil {
		if len(b.gs) >= b.maxGoroutines {
			return nil
		}
		st = &goroutineState{key: k, g: g}
		b.gs[k] = st
	}
	return st
}

// Entry records a call of fn entering at time now, and returns it (nil if
// it is not kept: too many goroutines or open calls).
func (b *Builder) Entry(k GoroutineKey, g uint64, fn *Function, now, frameKey, callerPC uint64) *Call {
	st := b.state(k, g)
	if st == nil {
		b.Overflow++
		return nil
	}
	if b.Why {
		if len(st.stack) == 0 {
			st.why = b.startState(now)
		} else {
			b.running(st, now)
		}
	}
	// A new call at the same or a shallower frame than an open one means the
	// open one is gone without returning.
	for len(st.stack) > 0 && st.stack[len(st.stack)-1].frameKey >= frameKey {
		b.unwindTop(st, now)
		if len(st.stack) == 0 {
			// Unwinding the root freed the goroutine's state: the new
			// call starts a fresh one.
			if st = b.state(k, g); st == nil {
				b.Overflow++
				return nil
			}
			st.why = b.startState(now)
		}
	}
	if len(st.stack) >= maxOpenFrames {
		b.Overflow++
		return nil
	}
	b.seq++
	c := &Call{Func: fn, Start: now, Depth: len(st.stack), CallerPC: callerPC, frameKey: frameKey, Seq: b.seq}
	if b.Why {
		c.Time = &TimeSplit{}
	}
	if len(st.stack) == 0 {
		c.root = c
		c.nodes = 1
	} else {
		parent := st.stack[len(st.stack)-1]
		c.Parent = parent
		c.root = parent.root
		if c.root.nodes < maxTreeNodes {
			parent.Children = append(parent.Children, c)
			c.root.nodes++
		} else {
			parent.Dropped++
		}
	}
	st.stack = append(st.stack, c)
	return c
}

// Return records fn returning through the RET at retSite at time now.
func (b *Builder) Return(k GoroutineKey, fn *Function, now, frameKey, retSite uint64) {
	b.ReturnWith(k, fn, now, frameKey, retSite, nil)
}

// ReturnWith is Return with the bytes the return probe captured of the
// results, kept (copied) in the call's Results.
func (b *Builder) ReturnWith(k GoroutineKey, fn *Function, now, frameKey, retSite uint64, results []byte) {
	st := b.gs[k]
	if st == nil {
		b.Unmatched++
		return
	}
	// Find the frame: any deeper open frame was unwound.
	i := len(st.stack) - 1
	for i >= 0 && !(st.stack[i].frameKey == frameKey && st.stack[i].Func == fn) {
		if st.stack[i].frameKey > frameKey {
			i--
			continue
		}
		i = -1 // shallower than this return: no entry for it
	}
	if i < 0 {
		b.Unmatched++
		return
	}
	if b.Why {
		b.running(st, now)
	}
	for len(st.stack)-1 > i {
		b.unwindTop(st, now)
	}
	c := st.stack[i]
	c.End, c.ReturnSite = now, retSite
	if results != nil {
		c.Results = append([]byte(nil), results...)
	}
	b.pop(st)
}

// GoroutineExit unwinds every open call of a goroutine and frees its state.
func (b *Builder) GoroutineExit(k GoroutineKey, now uint64) {
	st := b.gs[k]
	if st == nil {
		return
	}
	if b.Why {
		b.running(st, now)
	}
	for len(st.stack) > 0 {
		b.unwindTop(st, now)
	}
	delete(b.gs, k)
}

// RunningStack is what one goroutine was in when a trace ended.
type RunningStack struct {
	Goroutine GoroutineKey
	// Calls are the goroutine's open calls, outermost first: Calls[0] is a
	// root call, whose tree holds the others (unless the tree was full).
	Calls []*Call
}

// Flush ends the trace at time now: every open call gets End = now and
// Running set, without completing (no OnCall, no OnRoot), and the open
// calls are returned per goroutine, ordered by goroutine. The state stays:
// OpenCalls still lists them.
func (b *Builder) Flush(now uint64) []RunningStack {
	out := make([]RunningStack, 0, len(b.gs))
	for k, st := range b.gs {
		if len(st.stack) == 0 {
			continue
		}
		if b.Why {
			b.flushState(st, now)
		}
		for _, c := range st.stack {
			c.End, c.Running = now, true
			b.dropUnseen(c)
		}
		out = append(out, RunningStack{Goroutine: k, Calls: append([]*Call(nil), st.stack...)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Goroutine, out[j].Goroutine
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.Goid < b.Goid
	})
	return out
}

// dropUnseen leaves a call without a split (counted in Unsplit) when the
// scheduler's probes, attached in windows, saw none of its time.
func (b *Builder) dropUnseen(c *Call) {
	if t := c.Time; t != nil && b.coverage.windowed && c.Duration() > 0 && t.Unknown >= c.Duration() {
		c.Time = nil
		b.Unsplit++
	}
}

// unwindTop completes the goroutine's innermost open call as unwound: it
// ended without its return seen. A call of a sampled function is reported
// whole or not at all, and its return may have been lost with its
// window's probes (a goroutine that exits, or calls again, before the
// window's end cuts it): it is dropped instead, as Cut drops it (calls
// traced whole open inside it were unwound first, and reported so: their
// probes never went).
func (b *Builder) unwindTop(st *goroutineState, now uint64) {
	c := st.stack[len(st.stack)-1]
	if c.Func.Sampled {
		b.UnwoundCut++
		b.dropTop(st)
		return
	}
	c.End, c.Unwound = now, true
	b.pop(st)
}

// dropTop removes the goroutine's innermost open call as though it had
// never been entered (see Cut), freeing the goroutine's state when none
// is left open.
func (b *Builder) dropTop(st *goroutineState) {
	c := st.stack[len(st.stack)-1]
	if p := c.Parent; p != nil {
		if i := slices.Index(p.Children, c); i >= 0 {
			p.Children = slices.Delete(p.Children, i, i+1)
		}
	}
	if b.OnCut != nil {
		b.OnCut(c)
	}
	st.stack[len(st.stack)-1] = nil
	st.stack = st.stack[:len(st.stack)-1]
	if len(st.stack) == 0 {
		delete(b.gs, st.key)
	}
}

func (b *Builder) pop(st *goroutineState) {
	c := st.stack[len(st.stack)-1]
	st.stack[len(st.stack)-1] = nil
	st.stack = st.stack[:len(st.stack)-1]
	b.dropUnseen(c)
	if b.OnCall != nil {
		b.OnCall(st.key, c)
	}
	if len(st.stack) == 0 {
		if b.OnRoot != nil {
			b.OnRoot(st.key, st.g, c)
		}
		delete(b.gs, st.key)
	}
}

// Cut removes the open calls cut reports true for, with the open calls
// made inside them, as though they had never been entered: no OnCall,
// and gone from their parents' trees. gi reports a call of a function
// traced in sampling windows whole or not at all, and cuts one still open
// when its window's probes are gone. Completed calls made inside a cut
// one were already passed to OnCall. It returns how many calls it cut.
func (b *Builder) Cut(cut func(*Call) bool) int {
	n := 0
	for k, st := range b.gs {
		for i, c := range st.stack {
			if !cut(c) {
				continue
			}
			if p := c.Parent; p != nil {
				for j, ch := range p.Children {
					if ch == c {
						p.Children = append(p.Children[:j], p.Children[j+1:]...)
						break
					}
				}
			}
			n += len(st.stack) - i
			if b.OnCut != nil {
				for _, dropped := range st.stack[i:] {
					b.OnCut(dropped)
				}
			}
			clear(st.stack[i:])
			st.stack = st.stack[:i]
			break
		}
		if len(st.stack) == 0 {
			delete(b.gs, k)
		}
	}
	return n
}

// OpenCalls lists every call still open, per goroutine outermost first.
func (b *Builder) OpenCalls() []OpenCall {
	var out []OpenCall
	for k, st := range b.gs {
		for _, c := range st.stack {
			out = append(out, OpenCall{Goroutine: k, Func: c.Func, Start: c.Start, Depth: c.Depth})
		}
	}
	return out
}
