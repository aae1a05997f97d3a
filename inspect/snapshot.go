package inspect

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/runtimelayout"
)

// Limits that bound every walk over target memory, so that corrupt or racing
// memory yields an error or a flagged partial result, never a hang.
const (
	maxGoroutines   = 50_000_000
	maxStackCopy    = 64 << 20 // bytes of one goroutine stack copied at most
	maxFrames       = 1 << 20  // physical frames unwound per goroutine at most
	maxStringLen    = 1 << 16  // wait reason, status and label strings
	maxLabels       = 4096
	maxMapBuckets   = 1 << 16
	gReadSlack      = 64 // bytes read past the highest field needed
	stackReadMinLen = 256
)

// Memory is the target's address space as a snapshot reads it: a live
// process (*proc.Memory) or, in tests, a captured image of one. Its
// ReadAt is the address-reader seam a binary's contents share
// (elfbin.Binary satisfies runtimelayout.AddressReader too).
type Memory interface {
	runtimelayout.AddressReader
	// ReadBatch reads every range into dst, back to back; a
	// *proc.BatchError lists the ranges that could not be read.
	ReadBatch(ranges []proc.Range, dst []byte) error
}

// ErrNotGo is returned for processes whose executable is not a Go binary
// (proc.ErrNotGo).
var ErrNotGo = proc.ErrNotGo

// Target is an opened Go process: its binary, the runtime layout derived from
// it, and its memory. Open once, take as many snapshots as needed.
type Target struct {
	PID    int
	Binary *elfbin.Binary
	Layout *runtimelayout.RuntimeLayout
	// Bias is the load bias: runtime address minus link-time address (PIE).
	Bias uint64
	Mem  Memory

	// clockOffset is the target's CLOCK_MONOTONIC minus gi's (time
	// namespaces): g.waitsince is in the target's clock.
	clockOffset time.Duration

	// SkipWaits leaves out what blocked goroutines wait on (WaitingOn):
	// the snapshot as gi took it before it read them, the baseline of the
	// pause benchmark.
	SkipWaits bool
	// StacksInStop copies every stack in the stop, none before it: the
	// snapshot as gi took it before it copied stacks early, the baseline
	// of the pause benchmark.
	StacksInStop bool
	// KeepStacks keeps a copy of each goroutine's stack in its
	// Goroutine.Stack (gi ps --leaks scans them).
	KeepStacks bool
	// Freeze has the process make a copy of itself in the stop
	// (ptrace.Freeze) and resumes it at once: the snapshot and the
	// Hooks' Stopped read the copy, as the process was in the stop,
	// while the process runs. A process that cannot be frozen is read
	// in the stop, and Snapshot.FreezeRefused says why.
	Freeze bool
	// VectorRegs has the stop read every thread's vector registers too
	// (ptrace.Stopped.ReadVector), for the Hooks' Stopped: a thread
	// stopped in the middle of a copy may hold a pointer there only.
	VectorRegs bool

	// frozen is the copy being read, while a snapshot reads one;
	// freezeRefused why the last Freeze asked for was refused.
	frozen        *ptrace.Frozen
	freezeRefused string

	waitReasons []string
	statusNames []string
	status      statusValues
	sym         *symbolizer
	scratch     []Frame // reused while unwinding
	live        bool    // a running process (Open), not a memory image (NewTarget)
	// process is the live process (Open, New); owned says Close closes it.
	process *proc.Process
	owned   bool
	// Hooks, when set, run at the edges of Snapshot's stop.
	Hooks *StopHooks
	// Decoded, when set, is called with every snapshot Snapshot takes,
	// once it is decoded (gi's GI_PHASES=1 prints its Phases).
	Decoded func(*Snapshot)

	// beforeStop, set by tests, runs between the copy made before the
	// stop (given the number of stacks it holds) and the stop.
	beforeStop func(stacksCopied int)
}

// StopHooks let a caller that reads the target beside a snapshot (a core
// file written in the same stop) act at the edges of Snapshot's stop.
// Each may be nil.
type StopHooks struct {
	// Stopping runs when gi has copied what it copies before the stop,
	// just before the process is stopped.
	Stopping func()
	// Stopped runs while the process is stopped, after gi's copy, with
	// its threads and their registers, and the process's CLOCK_MONOTONIC
	// the snapshot measures waits to; its error fails the snapshot (the
	// process is resumed all the same).
	Stopped func(threads []ptrace.Thread, now int64) error
	// Resumed runs as soon as the process is resumed, before decoding:
	// the buffers gi read into in the stop still hold what it read.
	Resumed func()
}

// Open opens process pid for inspection (proc.Open, then New); Close
// closes the process too.
func Open(pid int) (*Target, error) {
	p, err := proc.Open(pid)
	if err != nil {
		return nil, err
	}
	t, err := New(p)
	if err != nil {
		p.Close()
		return nil, err
	}
	t.owned = true
	return t, nil
}

// New makes the Target of a process the caller opened, and closes: its
// executable, layout, bias, memory and clock are the process's, read once
// for every user of it (inspect, trace, measure).
func New(p *proc.Process) (*Target, error) {
	t := &Target{PID: p.PID, Binary: p.Exe, Bias: p.Bias, Mem: p.Mem, clockOffset: p.ClockOffset, process: p, live: p.Live}
	layout, table, err := p.RuntimeLayout()
	if err != nil {
		return nil, err
	}
	t.Layout = layout
	if err := t.loadStrings(table); err != nil {
		return nil, err
	}
	return t, nil
}

// Process returns the live process the Target reads, nil for a memory
// image (NewTarget).
func (t *Target) Process() *proc.Process { return t.process }

// NewTarget makes a Target whose memory is mem instead of a live process's:
// pid is the process the memory came from, bin its executable, bias its load
// bias. Snapshots of it come from Decode; tests use it to decode a captured
// image of a process with no process and no privileges.
func NewTarget(pid int, bin *elfbin.Binary, mem Memory, bias uint64) (*Target, error) {
	t := &Target{PID: pid, Binary: bin, Mem: mem, Bias: bias}
	layout, table, err := bin.RuntimeLayout()
	if err != nil {
		return nil, fmt.Errorf("process %d: runtime layout: %w", pid, err)
	}
	t.Layout = layout
	if err := t.loadStrings(table); err != nil {
		return nil, err
	}
	return t, nil
}

// Decode copies and decodes a snapshot from the target's memory without
// stopping anything: for a Target made by NewTarget, whose memory does not
// change. threads are the process's threads with their registers as they
// were; now is the target's CLOCK_MONOTONIC at that instant, 0 if unknown
// (waits and wake-ups are then unknown).
func (t *Target) Decode(threads []ptrace.Thread, now int64) (*Snapshot, error) {
	raw, err := t.copyRaw(threads, &buffers{polls: t.pollDescs()}, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.PID, err)
	}
	t.gsAfterStop(raw)
	snap := t.newSnapshot(raw, now)
	snap.TracebackLabels = t.tracebackLabels()
	return snap, nil
}

// loadStrings takes the runtime's wait-reason and status strings (the
// process's, read once for every user of it; for a memory image, read
// here) and makes the symbolizer.
func (t *Target) loadStrings(table *runtimelayout.VersionLayout) error {
	var rs *runtimelayout.RuntimeStrings
	var err error
	if t.process != nil {
		rs, err = t.process.RuntimeStrings()
	} else if rs, err = runtimelayout.ReadRuntimeStrings(t.Mem, t.Layout, table, t.Bias); err != nil {
		err = fmt.Errorf("process %d: %w", t.PID, err)
	}
	if err != nil {
		return err
	}
	t.status = statusValuesOf(t.Layout)
	t.waitReasons, t.statusNames = rs.WaitReasons, rs.Statuses
	t.status.setPreempted(t.waitReasons)
	t.sym = newSymbolizer(t.Binary, t.Bias)
	return nil
}

// States returns what a goroutine's State or Status can be in this
// process: the runtime's status names (runnable, running, waiting, ...) and
// its wait reasons (chan receive, sync.Mutex.Lock, ...), as the binary
// spells them, each once, statuses first.
func (t *Target) States() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, n := range t.statusNames {
		add(n)
	}
	if len(t.statusNames) == 0 { // no runtime.gStatusStrings: the constants' names
		names := make([]string, 0, len(t.Layout.Status))
		for n := range t.Layout.Status {
			if !strings.HasSuffix(n, "_unused") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			add(t.statusName(t.Layout.Status[n]))
		}
	}
	for _, r := range t.waitReasons {
		add(r)
	}
	return out
}

// Close releases what the Target opened: the process, if Open opened it
// (a process given to New is its caller's to close), or a memory image's
// memory and executable. The process itself is not touched.
func (t *Target) Close() error {
	if t.process != nil {
		if t.owned {
			return t.process.Close()
		}
		return nil
	}
	if c, ok := t.Mem.(io.Closer); ok {
		c.Close()
	}
	return t.Binary.Close()
}

// Snapshot stops the process, copies what it needs, resumes it and decodes.
// The process is resumed on every path, errors and panics included.
func (t *Target) Snapshot(tr *ptrace.Tracer) (*Snapshot, error) {
	start := time.Now()
	meter := newPhaseMeter(t.Mem)
	bufs := &buffers{}
	keptStacks := false
	defer func() {
		if !keptStacks {
			bufs.release()
		}
	}()
	// Thread ids as the target's namespace numbers them (m.procid) to gi's,
	// mapped before the stop: only for a target in another PID namespace.
	nsTIDs, err := proc.NamespaceTIDs(t.PID, nil)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.PID, err)
	}
	meter.mark("tids", false)
	bufs.polls = t.pollDescs()
	meter.mark("polls", false)
	var pre *preCopy
	// Without g.trackingSeq (before Go 1.17) nothing tells a goroutine
	// that ran and parked again at the same place from one that never ran.
	// A frozen copy is read whole after the process resumed.
	if !t.StacksInStop && !t.Freeze && t.Layout.G.TrackingSeq != runtimelayout.Missing {
		pre = t.preCopyStacks(bufs)
	}
	meter.mark("precopy", false)
	t.prepareBuffers(bufs, pre)
	if t.beforeStop != nil && pre != nil {
		t.beforeStop(pre.kept)
	}
	meter.mark("buffers", false)
	if t.Hooks != nil && t.Hooks.Stopping != nil {
		t.Hooks.Stopping()
	}
	stopped, err := tr.Stop(t.PID)
	if err != nil {
		return nil, fmt.Errorf("stop process %d: %w", t.PID, err)
	}
	for _, mk := range stopped.Marks {
		if mk.Name == "begin" {
			// From here to the stop: the request reaching gi's ptrace
			// thread, gi's garbage collector turned off.
			meter.markAt("handoff", false, mk.Usage)
			continue
		}
		meter.markAt(mk.Name, true, mk.Usage)
	}
	if t.VectorRegs {
		stopped.ReadVector()
		meter.mark("vector", true)
	}
	now := monotonicNow() + int64(t.clockOffset) // the target's clock
	taken := time.Now()
	var resumeErr error
	var reapPause time.Duration
	releaseCopy := func() {}
	freezeRefused := ""
	if t.Freeze {
		var copyMem *proc.Memory
		copyMem, freezeRefused = t.freeze(stopped)
		t.freezeRefused = freezeRefused
		meter.mark("freeze", true)
		if copyMem != nil {
			// Everything is read from the copy, with the process
			// running: no stack is copied before.
			resumeErr = stopped.Resume()
			meter.mark("resume", true)
			liveMem := t.Mem
			t.Mem = copyMem
			release := func() {
				if t.frozen == nil {
					return
				}
				t.Mem = liveMem
				copyMem.Close()
				t.frozen.Release()
				reapPause = t.frozen.ReapPause
				t.frozen = nil
			}
			defer release()
			releaseCopy = release
		}
	}
	raw, copyErr := func() (raw *rawSnapshot, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic while copying target memory: %v", r)
			}
		}()
		raw, err = t.copyRaw(stopped.Threads, bufs, nsTIDs, pre, meter)
		if err == nil && t.Hooks != nil && t.Hooks.Stopped != nil {
			err = t.Hooks.Stopped(stopped.Threads, now)
		}
		return raw, err
	}()
	frozen := t.frozen != nil
	if frozen {
		releaseCopy()
		meter.mark("release", false)
	} else {
		resumeErr = stopped.Resume()
		meter.mark("resume", true)
	}
	if t.Hooks != nil && t.Hooks.Resumed != nil {
		t.Hooks.Resumed()
	}
	pause := stopped.Pause()
	if pre != nil {
		pre.stamps = nil // needed only in the stop: the memory goes back while decoding
	}
	if raw != nil {
		// The g structs are read out into rawGs, and their copy (48 MB
		// at 100k goroutines) released before decoding.
		gbuf := raw.gbuf
		t.gsAfterStop(raw)
		bufs.unmap(gbuf)
	}
	meter.mark("gs", false)
	if copyErr != nil {
		if !proc.Alive(t.PID) {
			return nil, fmt.Errorf("process %d: %w", t.PID, proc.ErrProcessExited)
		}
		return nil, fmt.Errorf("process %d: %w", t.PID, copyErr)
	}
	if resumeErr != nil {
		return nil, fmt.Errorf("resume process %d: %w", t.PID, resumeErr)
	}
	snap := t.newSnapshot(raw, now)
	if t.KeepStacks {
		// The goroutines' Stack bytes are the stop's buffers: kept
		// until ReleaseStacks, not copied.
		keptStacks = true
		snap.releaseStacks = bufs.release
	}
	snap.NSPid = t.process.NSPID
	snap.Pause, snap.Taken = pause, taken
	snap.FreezeRefused = freezeRefused
	if frozen {
		snap.Frozen = true
		snap.ReapPause = reapPause
	}
	snap.StacksBeforeStop = raw.stacksBeforeStop
	snap.TracebackLabels = t.tracebackLabels()
	meter.mark("decode", false)
	snap.Phases = meter.phases
	snap.Total = time.Since(start)
	if t.Decoded != nil {
		t.Decoded(snap)
	}
	return snap, nil
}

// freeze has the stopped process make a Frozen copy of itself and
// opens the copy's memory; on a refusal, it returns why.
func (t *Target) freeze(stopped *ptrace.Stopped) (*proc.Memory, string) {
	if !t.live {
		return nil, "not a live process"
	}
	g, err := t.gadget()
	if err != nil {
		return nil, err.Error()
	}
	frozen, err := stopped.Freeze(g)
	if err != nil {
		return nil, err.Error()
	}
	mem, err := proc.OpenMemory(frozen.Pid)
	if err != nil {
		frozen.ReleaseIn(stopped)
		return nil, fmt.Sprintf("open the copy's memory: %v", err)
	}
	t.frozen = frozen
	return mem, ""
}

// gadget finds the ptrace.Gadget in the code of the runtime's functions
// it is made of, as the process maps them.
func (t *Target) gadget() (ptrace.Gadget, error) {
	var code [3]ptrace.Code
	for i, name := range []string{"runtime.exit", "runtime.futex", "runtime.clone"} {
		f := t.Binary.Lines.FuncByName(name)
		if f == nil || f.End <= f.Entry || f.End-f.Entry > 512 {
			return ptrace.Gadget{}, fmt.Errorf("no %s in the binary's pclntab", name)
		}
		b := make([]byte, f.End-f.Entry)
		if _, err := t.Mem.ReadAt(b, f.Entry+t.Bias); err != nil {
			return ptrace.Gadget{}, fmt.Errorf("read %s: %w", name, err)
		}
		code[i] = ptrace.Code{Entry: f.Entry + t.Bias, Bytes: b}
	}
	return ptrace.FindGadget(t.Binary.Arch, code[0], code[1], code[2])
}

// FrozenCopy returns the pid of the Frozen copy the snapshot being taken
// reads (from the Hooks' Stopped), 0 if it reads the stopped process.
func (t *Target) FrozenCopy() int {
	if t.frozen == nil {
		return 0
	}
	return t.frozen.Pid
}

// FreezeRefused says why the Freeze of the snapshot being taken (or the
// last one) was refused, "" if it was not.
func (t *Target) FreezeRefused() string { return t.freezeRefused }

// newSnapshot decodes a raw copy taken when the target's clock read now,
// its rawGs made (gsAfterStop).
func (t *Target) newSnapshot(raw *rawSnapshot, now int64) *Snapshot {
	snap := &Snapshot{
		PID:       t.PID,
		NSPid:     t.PID,
		Exe:       t.Binary.Path,
		GoVersion: t.Binary.GoVersion,
		Runtime21: t.Layout.G.ParentGoid != runtimelayout.Missing,
		Warnings:  raw.warnings,
	}
	snap.Goroutines = t.decode(raw, now)
	if raw.waits != nil {
		raws := make(map[uint64]*rawG, len(raw.gs))
		for _, rg := range raw.gs {
			raws[rg.addr] = rg
		}
		t.index(raw.waits, raws)
		snap.Warnings = append(snap.Warnings, raw.waits.problemWarnings()...)
		t.decodeWaits(raw.waits, snap.Goroutines, raw.gs, now, raws)
		snap.Deadlocks = t.findHolders(snap.Goroutines)
		t.findSuspects(snap.Goroutines)
		for a := range raw.waits.sudogs {
			snap.Sudogs = append(snap.Sudogs, a)
		}
		sort.Slice(snap.Sudogs, func(i, j int) bool { return snap.Sudogs[i] < snap.Sudogs[j] })
	}
	sort.SliceStable(snap.Goroutines, func(i, j int) bool { return snap.Goroutines[i].ID < snap.Goroutines[j].ID })
	return snap
}

// tracebackLabels tells whether the target's tracebacks print pprof labels:
// runtime.debug.tracebacklabels read from its memory where DWARF locates it,
// else (stripped) the value the runtime computed at start-up from the
// binary's DefaultGODEBUG and the GODEBUG of its environment.
func (t *Target) tracebackLabels() bool {
	if a := t.Layout.TracebackLabels; a != 0 {
		var b [4]byte
		if _, err := t.Mem.ReadAt(b[:], a+t.Bias); err == nil {
			return binary.LittleEndian.Uint32(b[:]) == 1
		}
		return false
	}
	if t.process == nil || t.process.Environ == nil {
		return false // no environment to read
	}
	env, _ := t.process.Environ()
	return tracebackLabelsAtStart(goMinor(t.Binary.GoVersion), t.Binary.DefaultGODEBUG, env)
}

// tracebackLabelsAtStart computes GODEBUG tracebacklabels the way the
// runtime does at start-up: the release's default (on from Go 1.27, which
// changed it; absent before 1.26), overridden by the binary's DefaultGODEBUG
// (a module older than go 1.27 keeps the old default), overridden by the
// first GODEBUG variable of environ, the rightmost setting winning.
func tracebackLabelsAtStart(minor int, defaultGODEBUG string, environ []byte) bool {
	if minor < 26 {
		return false
	}
	on := minor >= 27
	setting := func(godebug string) {
		for _, kv := range strings.Split(godebug, ",") {
			if v, ok := strings.CutPrefix(kv, "tracebacklabels="); ok {
				on = v == "1"
			}
		}
	}
	setting(defaultGODEBUG)
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			setting(v)
			break
		}
	}
	return on
}

// monotonicNow returns CLOCK_MONOTONIC, the clock runtime.nanotime reads.
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
