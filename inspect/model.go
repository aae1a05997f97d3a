// Package inspect takes consistent snapshots of a live Go process's
// goroutines and decodes them the way the Go runtime's own traceback does.
//
// A snapshot stops the process only while raw bytes are copied (the g
// structures, the used part of each goroutine stack, thread registers);
// everything else (unwinding, symbolization) happens after the process has
// been resumed.
//
// Which code runs while the target is stopped: snapshot.go's Snapshot
// (the sequence), read.go (copying allgs, the g structs and the stacks
// that changed, and scanning the g's as they arrive), labels.go (the pprof
// labels), waits_stop.go (following what blocked goroutines wait on) and
// the part of condwait.go that reads Cond waiters' frames. Before the
// stop: precopy.go (parked goroutines' stacks) and the buffers the stop
// reads into (read.go). After it: decoding (snapshot.go, unwind.go,
// waits_decode.go, the rest of condwait.go), the model
// (model.go, waits.go) and what is derived from it (group.go,
// waits_objects.go, dump.go, pprof.go).
package inspect

import (
	"strings"
	"time"
)

// Snapshot is the decoded state of every goroutine of a process at one instant.
type Snapshot struct {
	PID int
	// Deadlocks are the cycles of goroutines each waiting for a lock the
	// next holds (by the holders' deferred unlocks): none can run again.
	Deadlocks []Deadlock
	// NSPid is the process's pid inside its own PID namespace (a
	// container's view); equal to PID outside containers.
	NSPid     int
	Exe       string // path of the executable as gi opened it
	GoVersion string
	// Pause is how long the target was stopped.
	Pause time.Duration
	// Frozen says the snapshot was read from a copy the process made of
	// itself in the stop (Target.Freeze; the Pause ends once the copy
	// exists), ReapPause how long the process was stopped again to reap
	// the copy; FreezeRefused why a Freeze asked for was not made (""
	// when it was, or not asked).
	Frozen        bool
	ReapPause     time.Duration
	FreezeRefused string
	// Origin says where a snapshot not taken by stopping a live process
	// came from ("core core.1234 (server, SIGABRT)"); "" for a stop.
	Origin string
	// Total is how long the whole snapshot took, decoding included.
	Total time.Duration
	// Taken is the wall-clock time of the stop.
	Taken time.Time
	// StacksBeforeStop counts the goroutines whose stack was copied before
	// the stop and kept because the goroutine had not run since: the rest
	// were copied while the process was stopped.
	StacksBeforeStop int
	// Phases are the snapshot's steps with their cost (wall and CPU
	// time, page faults, reads of the target), before, in and after the
	// stop; nil for a snapshot decoded from a memory image.
	Phases Phases
	// Goroutines lists every goroutine that is not dead, system ones
	// included (see Goroutine.System), in allgs order.
	Goroutines []*Goroutine
	// Sudogs are the addresses of the runtime.sudogs the stop read:
	// those of the blocked goroutines' waits (g.waiting, the semaphore
	// table), each naming a live goroutine.
	Sudogs []uint64
	// Warnings lists what could not be read: the listing is partial where
	// they apply.
	Warnings []string
	// Runtime21 reports whether the target's runtime formats tracebacks the
	// Go 1.21+ way (creator goroutine ids, "...N frames elided...").
	Runtime21 bool
	// TracebackLabels reports whether the target's tracebacks print pprof
	// labels (GODEBUG tracebacklabels=1: Go 1.26 on request, the default
	// of Go 1.27 modules); false where the binary does not say (stripped).
	TracebackLabels bool

	// releaseStacks frees the buffers the goroutines' Stack bytes are
	// in (KeepStacks of a live process).
	releaseStacks func()
}

// ReleaseStacks frees the stack copies a snapshot taken with KeepStacks
// holds: nothing may read a Goroutine's Stack afterwards, which is then
// nil. Without KeepStacks it does nothing.
func (s *Snapshot) ReleaseStacks() {
	for _, g := range s.Goroutines {
		g.Stack = nil
	}
	if s.releaseStacks != nil {
		s.releaseStacks()
		s.releaseStacks = nil
	}
}

// Goroutine is one goroutine as decoded from the target's memory.
type Goroutine struct {
	ID uint64
	// Addr is the address of the runtime.g in the target.
	Addr uint64
	// Status is the runtime's status name: idle, runnable, running,
	// syscall, waiting, dead, copystack, preempted, ...
	Status string
	// StatusValue is the raw atomicstatus with the scan bit removed.
	StatusValue uint32
	// Scan is true when the GC scan bit was set.
	Scan bool
	// WaitReason is the runtime's text for g.waitreason ("chan receive"), "" if none.
	WaitReason string
	// State is what the runtime prints in brackets: the wait reason for a
	// waiting goroutine, else the status name.
	State string
	// Wait is how long the goroutine has been blocked (from g.waitsince);
	// WaitKnown is false when the runtime has not recorded it yet.
	Wait      time.Duration
	WaitKnown bool
	// WaitSince is g.waitsince, the target's runtime.nanotime when the
	// wait was first seen (0: not recorded): the same in two snapshots,
	// the same wait.
	WaitSince int64
	// SP is the stack pointer the goroutine's stack was unwound from
	// (its registers' when running, else g.sched's or g.syscallsp).
	SP uint64
	// Transitions is g.trackingSeq: a count, modulo 256, of the times
	// the goroutine stopped running. The same in two snapshots, with
	// the same SP and wait, it has not run in between.
	Transitions uint8
	// LockedToThread is true after runtime.LockOSThread.
	LockedToThread bool
	// ThreadID is the OS thread running the goroutine (running or syscall),
	// as the target's PID namespace numbers it (m.procid), 0 if none.
	ThreadID int
	// HostThreadID is the same thread as gi's PID namespace numbers it,
	// when that differs from ThreadID (a target in a container); else 0.
	HostThreadID int
	// System marks goroutines the runtime hides from its dumps.
	System bool
	// Labels are the pprof labels, nil if none.
	Labels map[string]string
	// StartFunction is the function the goroutine was started with.
	StartFunction string
	// CreatedBy is the go statement that created the goroutine (nil for
	// goroutine 1 and runtime-created ones the runtime does not show).
	CreatedBy *Frame
	// ParentID is the goroutine that created this one (Go 1.21+), 0 if unknown.
	ParentID uint64
	// Frames is the whole stack, innermost first, inlined frames expanded.
	// Frames the runtime's own dump would not show have Elided set.
	Frames []Frame
	// Truncated is set when the stack could not be fully unwound; Problem says why.
	Truncated bool
	Problem   string
	// WaitingOn lists what a blocked goroutine waits on (several for a
	// select), as read in the stop; nil when it waits on nothing gi knows.
	WaitingOn []WaitObject
	// Stack is the goroutine's stack as the stop copied it, kept only
	// when the Target's KeepStacks is set (the leak walk scans it); nil
	// otherwise.
	Stack *StackCopy
	// Leaked is set by the leak walk (gi ps --leaks) for a goroutine no
	// goroutine that can run will ever wake; LeakedWhy says why.
	Leaked    bool
	LeakedWhy string
	// unlocks are the deferred unlocks pending in its frames, which
	// findHolders matches with the locks others wait on.
	unlocks []pendingUnlock
	// lockCaller is the innermost physical frame outside the runtime and
	// package sync (the caller of the Lock a goroutine waits in), -1 if
	// none.
	lockCaller int
	// Deadlocked says the goroutine is in a cycle of goroutines each
	// waiting for a lock the next holds (Snapshot.Deadlocks).
	Deadlocked bool
}

// StackCopy is a copy of the used part of a goroutine's stack.
type StackCopy struct {
	// SP is the stack pointer the copy starts at, Lo and Hi the stack's
	// bounds (g.stack).
	SP, Lo, Hi uint64
	// Bytes are the bytes from SP up: Hi-SP of them when Complete.
	Bytes []byte
	// Complete is false when part of [SP, Hi) could not be copied
	// (Problem of the goroutine says why).
	Complete bool
	// Pointers marks the words of Bytes the garbage collector would
	// scan (bit i: Bytes[8i:8i+8]): the live pointers of each frame by
	// its stack maps, its stack objects, and frames with no usable map
	// whole (WholeFrames counts those, of Frames).
	Pointers            []uint64
	Frames, WholeFrames int
	// Unwound says the unwinding reached the stack's first frame
	// (runtime.goexit, or a top frame): every frame is in Frames. A
	// stack not unwound to its end, or copied Whole (from Lo: the
	// goroutine's stack pointer was unknown, running on a system
	// stack), is one whose every word a walk must scan.
	Unwound, Whole bool
}

// Scanned reports whether word i of Bytes is one the garbage collector
// would scan.
func (c *StackCopy) Scanned(i int) bool {
	return i >= 0 && i/64 < len(c.Pointers) && c.Pointers[i/64]&(1<<(i%64)) != 0
}

// Frame is one logical frame of a goroutine's stack.
type Frame struct {
	Function string
	File     string
	Line     int
	// PC is the runtime address in the target (load bias applied).
	PC uint64
	// Offset is PC minus the function's entry (what the runtime prints as +0x..),
	// 0 for inlined frames.
	Offset uint64
	// Inlined marks a frame the compiler inlined into its caller.
	Inlined bool
	// Elided marks a frame the runtime's own traceback hides.
	Elided bool
}

// VisibleFrames returns the frames the runtime's own dump shows.
func (g *Goroutine) VisibleFrames() []Frame {
	out := make([]Frame, 0, len(g.Frames))
	for _, f := range g.Frames {
		if !f.Elided {
			out = append(out, f)
		}
	}
	return out
}

// Location returns the frame that best says where the goroutine is: the
// innermost visible frame of user code (package main or a package whose
// import path starts with a domain), else the innermost visible frame outside
// the runtime's plumbing (runtime, internal/*, sync and linknamed runtime_*
// functions), else the innermost visible frame, else the innermost frame.
// ok is false for a goroutine with no frames.
func (g *Goroutine) Location() (Frame, bool) {
	var first, library *Frame
	for i := range g.Frames {
		f := &g.Frames[i]
		if f.Elided {
			continue
		}
		if first == nil {
			first = f
		}
		if isUserFunction(f.Function) {
			return *f, true
		}
		if library == nil && !isRuntimePlumbing(f.Function) {
			library = f
		}
	}
	if library != nil {
		return *library, true
	}
	if first != nil {
		return *first, true
	}
	if len(g.Frames) > 0 {
		return g.Frames[0], true
	}
	return Frame{}, false
}

// CodeFrames returns the frames of code the goroutine is running, innermost
// first: visible, not inlined (an inlined frame has no code of its own: its
// caller's frame follows) and not the runtime's plumbing (scheduling,
// blocking, sync internals). These are the functions a tracer can probe.
func (g *Goroutine) CodeFrames() []Frame {
	var out []Frame
	for _, f := range g.Frames {
		if f.Elided || f.Inlined || isRuntimePlumbing(f.Function) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// isUserFunction reports whether a qualified function name belongs to
// package main or to a module outside the standard library.
func isUserFunction(name string) bool {
	pkg := PackageOf(name)
	if pkg == "main" {
		return true
	}
	first := pkg
	for i := 0; i < len(pkg); i++ {
		if pkg[i] == '/' {
			first = pkg[:i]
			break
		}
	}
	for i := 0; i < len(first); i++ {
		if first[i] == '.' {
			return true
		}
	}
	return false
}

// isRuntimePlumbing reports whether a function is part of how the runtime
// blocks or schedules rather than of what the goroutine is doing.
func isRuntimePlumbing(name string) bool {
	pkg := PackageOf(name)
	switch {
	case pkg == "runtime", pkg == "sync", pkg == "sync/atomic", pkg == "time" && strings.HasSuffix(name, ".Sleep"):
		return true
	case strings.HasPrefix(pkg, "runtime/"), strings.HasPrefix(pkg, "internal/"):
		return true
	}
	return strings.Contains(name[len(pkg):], "runtime_")
}

// PackageOf returns the import path part of a qualified function name
// ("net/http.(*conn).serve" → "net/http").
func PackageOf(name string) string {
	slash := 0
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			slash = i
			break
		}
	}
	for i := slash; i < len(name); i++ {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return name
}
