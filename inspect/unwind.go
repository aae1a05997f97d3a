package inspect

import (
	"fmt"
	"strings"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
)

// Function flags from the runtime's abi.FuncFlag (stable since Go 1.17).
const (
	funcFlagTopFrame = 1 << 0
	funcFlagSPWrite  = 1 << 1
)

// symbolizer caches pclntab lookups by runtime pc: a process with 100k
// goroutines has only a few hundred distinct pcs on its stacks.
type symbolizer struct {
	lines     *pclntab.LineTable
	bias      uint64
	wrapperID uint8
	minor     int // Go minor version of the target (21 for go1.21.x), 0 if unknown
	funcs     map[uint64]*pclntab.Func
	spdelta   map[uint64]int64
	frames    map[uint64][]pclntab.Frame
	// defers are functions' open-coded defers, unlockKinds what deferred
	// closures release, by entry (holders.go).
	defers      map[uint64]pclntab.OpenDefers
	unlockKinds map[uint64]unlockKind
	// plain are functions' direct locks and unlocks of global mutexes,
	// by entry (suspects.go).
	plain  map[uint64][]plainSite
	textLo uint64
	textHi uint64
	// callerFrame walks a frame as the target's architecture lays it out.
	callerFrame callerFrameFunc
	// maps are the stack maps of frames, by pc (frameMaps).
	maps map[uint64]*frameMaps
}

func newSymbolizer(bin *elfbin.Binary, bias uint64) *symbolizer {
	lo, hi := bin.TextRange()
	return &symbolizer{
		lines:     bin.Lines,
		bias:      bias,
		wrapperID: bin.Lines.WrapperFuncID(),
		minor:     goMinor(bin.GoVersion),
		funcs:     make(map[uint64]*pclntab.Func),
		spdelta:   make(map[uint64]int64),
		frames:    make(map[uint64][]pclntab.Frame),
		textLo:    lo + bias,
		textHi:    hi + bias,

		callerFrame: callerFrameFor(bin.Arch),
	}
}

// goMinor returns 21 for "go1.21.13" and 0 when it cannot tell.
func goMinor(v string) int {
	n, _ := runtimelayout.GoMinor(v)
	return n
}

func (s *symbolizer) isGoCode(pc uint64) bool {
	return pc >= s.textLo && pc < s.textHi && s.funcFor(pc) != nil
}

func (s *symbolizer) funcFor(pc uint64) *pclntab.Func {
	if f, ok := s.funcs[pc]; ok {
		return f
	}
	f := s.lines.FuncForPC(pc - s.bias)
	s.funcs[pc] = f
	return f
}

func (s *symbolizer) spDelta(f *pclntab.Func, pc uint64) (int64, error) {
	if d, ok := s.spdelta[pc]; ok {
		return d, nil
	}
	d, err := s.lines.SPDelta(f, pc-s.bias)
	if err != nil {
		return 0, err
	}
	s.spdelta[pc] = d
	return d, nil
}

func (s *symbolizer) logical(f *pclntab.Func, symPC uint64) ([]pclntab.Frame, error) {
	if fr, ok := s.frames[symPC]; ok {
		return fr, nil
	}
	fr, err := s.lines.Frames(f, symPC-s.bias)
	if err != nil {
		return nil, err
	}
	s.frames[symPC] = fr
	return fr, nil
}

// decode turns raw copies into goroutines. now is CLOCK_MONOTONIC at the stop.
func (t *Target) decode(raw *rawSnapshot, now int64) []*Goroutine {
	L := t.Layout
	out := make([]*Goroutine, 0, len(raw.gs))
	// One allocation for all goroutines and a few for all frames: on
	// machines where page faults are slow, per-goroutine allocations and
	// growing slices dominate the decoding time.
	all := make([]Goroutine, len(raw.gs))
	arena := &frameArena{}
	creators := map[uint64]*Frame{}
	waiting, _ := L.StatusValue("_Gwaiting")
	syscall, _ := L.StatusValue("_Gsyscall")
	leaked, hasLeaked := L.StatusValue("_Gleaked")
	for i, rg := range raw.gs {
		status := rg.state &^ L.ScanBit
		g := &all[i]
		*g = Goroutine{
			ID:             rg.goid,
			Addr:           rg.addr,
			StatusValue:    status,
			Scan:           rg.state&L.ScanBit != 0,
			Status:         t.statusName(status),
			LockedToThread: rg.lockedM,
			SP:             rg.sp,
			Transitions:    rg.trackingSeq,
			ThreadID:       rg.tid,
			HostThreadID:   rg.hostTID,
			Labels:         rg.labels,
		}
		if L.G.ParentGoid != runtimelayout.Missing {
			g.ParentID = rg.parentGoid
		}
		reason := rg.reason
		if int(reason) < len(t.waitReasons) {
			g.WaitReason = t.waitReasons[reason]
		} else {
			g.WaitReason = "unknown wait reason"
		}
		g.State = g.Status
		if (status == waiting || (hasLeaked && status == leaked)) && reason != 0 {
			g.State = g.WaitReason
		} else if status != waiting {
			g.WaitReason = ""
		}
		if since := int64(rg.waitSince); since != 0 && (status == waiting || status == syscall) {
			g.WaitSince = since
			if now > since {
				g.Wait, g.WaitKnown = time.Duration(now-since), true
			}
		}
		if f := t.sym.funcFor(rg.startPC); f != nil {
			g.StartFunction = f.Name
			g.System = t.isSystem(f)
		}
		switch {
		case t.KeepStacks && rg.sp != 0 && rg.stack != nil:
			g.Stack = &StackCopy{SP: rg.sp, Lo: rg.stackLo, Hi: rg.stackHi, Bytes: rg.stack,
				Complete: rg.stackErr == "" && rg.sp+uint64(len(rg.stack)) == rg.stackHi}
		case t.KeepStacks && rg.wholeStack != nil:
			g.Stack = &StackCopy{SP: rg.stackLo, Lo: rg.stackLo, Hi: rg.stackHi, Bytes: rg.wholeStack, Complete: true, Whole: true}
		}
		t.unwind(g, rg)
		g.Frames = arena.keep(g.Frames)
		g.CreatedBy = t.createdBy(g, rg.goPC, creators)
		out = append(out, g)
	}
	return out
}

func (t *Target) statusName(v uint32) string {
	if int(v) < len(t.statusNames) && t.statusNames[v] != "" {
		return t.statusNames[v]
	}
	if n := t.Layout.StatusName(v); n != "" {
		return strings.ToLower(strings.TrimPrefix(n, "_G"))
	}
	return "???"
}

// isSystem mirrors runtime.isSystemGoroutine: goroutines started in package
// runtime, except runtime.main and a few that run user code.
func (t *Target) isSystem(start *pclntab.Func) bool {
	switch start.Name {
	case "runtime.main", "runtime.handleAsyncEvent", "runtime.corostart":
		return false
	}
	return strings.HasPrefix(start.Name, "runtime.")
}

// unwind walks the goroutine's copied stack the way the runtime's unwinder
// does (amd64: frame size from pcsp, return address just below the caller's
// SP) and expands inlined frames.
func (t *Target) unwind(g *Goroutine, rg *rawG) {
	s := t.sym
	g.lockCaller = -1
	g.Frames = t.scratch[:0]
	defer func() { t.scratch = g.Frames[:0] }()
	if rg.stackErr != "" {
		g.Truncated, g.Problem = true, rg.stackErr
	}
	if rg.stack == nil {
		if !g.Truncated {
			g.Truncated, g.Problem = true, "no stack to unwind"
		}
		return
	}
	pc, sp, trap := rg.pc, rg.sp, rg.trap
	base := rg.sp // address of rg.stack[0]
	var live *liveWords
	if g.Stack != nil && !g.Stack.Whole {
		live = newLiveWords(s, g.Stack, t.Binary.Arch)
		defer func() { g.Stack.Frames, g.Stack.WholeFrames = live.frames, live.whole }()
	}
	wholeNext := false // the caller of an injected call: scanned whole
	visible := 0
	callee := ""
	for n := 0; ; n++ {
		if n == maxFrames {
			g.Truncated, g.Problem = true, fmt.Sprintf("more than %d frames", maxFrames)
			break
		}
		f := s.funcFor(pc)
		if f == nil {
			g.Truncated, g.Problem = true, fmt.Sprintf("pc %#x is not in a Go function", pc)
			break
		}
		symPC := pc
		if !trap && pc > f.Entry+s.bias {
			symPC = pc - 1
		}
		logical, err := s.logical(f, symPC)
		if err != nil {
			g.Truncated, g.Problem = true, fmt.Sprintf("symbolize %s at %#x: %v", f.Name, pc, err)
			break
		}
		for i, lf := range logical {
			fr := Frame{Function: lf.Function, File: lf.File, Line: lf.Line, PC: pc, Inlined: i < len(logical)-1}
			if !fr.Inlined && pc > f.Entry+s.bias {
				fr.Offset = pc - (f.Entry + s.bias)
			}
			fr.Elided = !s.showFrame(lf, visible == 0, callee)
			if !fr.Elided {
				visible++
			}
			callee = lf.Function
			g.Frames = append(g.Frames, fr)
		}
		if g.lockCaller < 0 && !isLockPlumbing(f.Name) {
			g.lockCaller = n
		}
		if f.Flag&funcFlagTopFrame != 0 || f.Name == "runtime.goexit" {
			if live != nil {
				g.Stack.Unwound = true
			}
			break
		}
		if n > 0 && f.Flag&funcFlagSPWrite != 0 {
			break // the runtime cannot unwind through a frame that wrote SP either
		}
		delta, err := s.spDelta(f, pc)
		if err != nil {
			g.Truncated, g.Problem = true, fmt.Sprintf("frame size of %s at %#x: %v", f.Name, pc, err)
			break
		}
		lr, fp, ok := s.callerFrame(rg.stack, base, sp, delta, n == 0, rg.lr)
		if !ok {
			g.Truncated, g.Problem = true, fmt.Sprintf("frame of %s leaves the copied stack (sp %#x, size %d)", f.Name, sp, delta)
			break
		}
		if live != nil {
			live.frame(f, pc, sp, fp, trap || wholeNext)
		}
		if n > 0 && !trap {
			// Parked at a call: the frame's defer bits are its own.
			t.openDefers(g, rg, f, sp, fp, n)
		}
		if lr == 0 {
			break
		}
		switch f.Name {
		case "runtime.sigpanic", "runtime.asyncPreempt", "runtime.debugCallV2":
			trap = true // an injected call: the caller's pc is exact
		default:
			trap = false
		}
		wholeNext = f.Name == "runtime.asyncPreempt" || f.Name == "runtime.debugCallV2"
		pc, sp = lr, fp
	}
	if visible == 0 {
		// Like the runtime: a stack with nothing to show is shown whole.
		for i := range g.Frames {
			g.Frames[i].Elided = false
		}
	}
}

// showFrame mirrors runtime.showfuncinfo at GOTRACEBACK=single/all.
func (s *symbolizer) showFrame(f pclntab.Frame, firstFrame bool, callee string) bool {
	if f.FuncID == s.wrapperID && s.wrapperID != 0 && elideWrapperCalling(callee) {
		return false
	}
	name := f.Function
	if name == "runtime.runFinalizers" || name == "runtime.runCleanups" {
		return true
	}
	if name == "runtime.gopanic" && !firstFrame {
		return true
	}
	if !strings.Contains(name, ".") {
		return false
	}
	return !strings.HasPrefix(name, "runtime.") || s.isExportedRuntime(name)
}

func elideWrapperCalling(callee string) bool {
	switch callee {
	case "runtime.gopanic", "runtime.sigpanic", "runtime.panicwrap":
		return false
	}
	return true
}

// isExportedRuntime mirrors the runtime's rule, which learned about method
// receivers in Go 1.23.
func (s *symbolizer) isExportedRuntime(name string) bool {
	name, ok := strings.CutPrefix(name, "runtime.")
	if !ok || name == "" {
		return false
	}
	if s.minor != 0 && s.minor < 23 {
		return 'A' <= name[0] && name[0] <= 'Z'
	}
	rcvr := ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		rcvr, name = name[:i], name[i+1:]
		if len(rcvr) >= 3 && rcvr[0] == '(' && rcvr[1] == '*' && rcvr[len(rcvr)-1] == ')' {
			rcvr = rcvr[2 : len(rcvr)-1]
		}
	}
	return len(name) > 0 && 'A' <= name[0] && name[0] <= 'Z' && (rcvr == "" || 'A' <= rcvr[0] && rcvr[0] <= 'Z')
}

// createdBy mirrors runtime.printcreatedby: the function holding the go
// statement, shown only where the runtime would show it. Goroutines
// created at one go statement share the Frame (never written after).
func (t *Target) createdBy(g *Goroutine, gopc uint64, creators map[uint64]*Frame) *Frame {
	if g.ID == 1 || gopc == 0 {
		return nil
	}
	if fr, ok := creators[gopc]; ok {
		return fr
	}
	fr := t.creatorFrame(gopc)
	creators[gopc] = fr
	return fr
}

// creatorFrame is createdBy for the go statement at gopc.
func (t *Target) creatorFrame(gopc uint64) *Frame {
	s := t.sym
	f := s.funcFor(gopc)
	if f == nil {
		return nil
	}
	if !s.showFrame(pclntab.Frame{Function: f.Name, FuncID: f.FuncID}, false, "") {
		return nil
	}
	tracepc := gopc
	fr := &Frame{Function: f.Name, PC: gopc}
	if gopc > f.Entry+s.bias {
		tracepc--
		fr.Offset = gopc - (f.Entry + s.bias)
	}
	file, line, err := s.lines.FileLine(f, tracepc-s.bias)
	if err == nil {
		fr.File, fr.Line = file, line
	}
	return fr
}

// frameArena hands out frame slices carved from large chunks. Goroutines
// with the very same frames share one slice: goroutines park by the
// thousand at the same place (100k goroutines' frames took 36 MB).
// Frames are never written after keep.
type frameArena struct {
	chunk []Frame
	seen  sharedLists[Frame] // by framesHash
}

const frameChunk = 1 << 14

// framesHash hashes what tells frames apart: each frame's pc, line and
// flags (the pc decides the function and file).
func framesHash(frames []Frame) listHash {
	h := newListHash()
	for i := range frames {
		f := &frames[i]
		h.word(f.PC)
		h.word(uint64(f.Line))
		h.word(f.Offset)
		var flags uint64
		if f.Inlined {
			flags |= 1
		}
		if f.Elided {
			flags |= 2
		}
		h.word(flags | uint64(len(f.Function))<<2)
	}
	return h
}

// keep returns frames as kept for good: a slice already kept with equal
// frames, else a copy in the arena.
func (a *frameArena) keep(frames []Frame) []Frame {
	if len(frames) == 0 {
		return nil
	}
	h := framesHash(frames)
	if same, ok := a.seen.find(h, frames); ok {
		return same
	}
	if a.seen == nil {
		a.seen = sharedLists[Frame]{}
	}
	out := a.copy(frames)
	a.seen.add(h, out)
	return out
}

// copy copies frames into the arena.
func (a *frameArena) copy(frames []Frame) []Frame {
	n := len(frames)
	if n > frameChunk/4 {
		return append([]Frame(nil), frames...)
	}
	if len(a.chunk) < n {
		a.chunk = make([]Frame, frameChunk)
	}
	out := a.chunk[:n:n]
	a.chunk = a.chunk[n:]
	copy(out, frames)
	return out
}
