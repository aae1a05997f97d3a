package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/dwarfx"
	"github.com/gi-debug/gi/ptrace"
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

// ErrNotGo is returned for processes whose executable is not a Go binary.
var ErrNotGo = errors.New("not a Go program")

// Target is an opened Go process: its binary, the runtime layout derived from
// it, and its memory. Open once, take as many snapshots as needed.
type Target struct {
	PID    int
	Binary *dwarfx.Binary
	Layout *dwarfx.RuntimeLayout
	// Bias is the load bias: runtime address minus link-time address (PIE).
	Bias uint64
	Mem  *ptrace.Memory

	// clockOffset is the target's CLOCK_MONOTONIC minus gi's (time
	// namespaces): g.waitsince is in the target's clock.
	clockOffset time.Duration

	waitReasons []string
	statusNames []string
	sym         *symbolizer
	scratch     []Frame // reused while unwinding
}

// Open opens process pid for inspection. It reads the executable through
// /proc/<pid>/exe, so it works across mount namespaces and for deleted binaries.
func Open(pid int) (*Target, error) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, ptrace.ErrNoSuchProcess)
	}
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	bin, err := dwarfx.Open(exe)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("process %d: open executable: %w", pid, ptrace.ErrPermission)
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("process %d: %w", pid, ptrace.ErrNoSuchProcess)
		}
		return nil, fmt.Errorf("process %d (%s): %w: %v", pid, comm(pid), ErrNotGo, err)
	}
	t := &Target{PID: pid, Binary: bin}
	if err := t.init(); err != nil {
		bin.Close()
		return nil, err
	}
	return t, nil
}

func (t *Target) init() error {
	var table *dwarfx.VersionLayout
	var err error
	t.Layout, table, err = dwarfx.LoadRuntimeLayout(t.Binary)
	if err != nil {
		return fmt.Errorf("process %d: runtime layout: %w", t.PID, err)
	}
	if t.Bias, err = loadBias(t.PID, t.Binary); err != nil {
		return fmt.Errorf("process %d: %w", t.PID, err)
	}
	if t.clockOffset, err = clockOffset(t.PID); err != nil {
		return fmt.Errorf("process %d: %w", t.PID, err)
	}
	if t.Mem, err = ptrace.OpenMemory(t.PID); err != nil {
		return fmt.Errorf("process %d: %w", t.PID, err)
	}
	if table != nil {
		// Stripped: the strings of the same Go release, generated.
		t.waitReasons, t.statusNames = table.WaitReasons, table.GStatuses
		t.sym = newSymbolizer(t.Binary, t.Bias)
		return nil
	}
	// Static tables: read from the live process (relocations applied).
	if t.waitReasons, err = t.readStringArray(t.Layout.WaitReasonStrings, t.Layout.WaitReasonCount); err != nil {
		t.Mem.Close()
		return fmt.Errorf("process %d: read runtime.waitReasonStrings: %w", t.PID, err)
	}
	if t.Layout.GStatusStrings != 0 {
		if t.statusNames, err = t.readStringArray(t.Layout.GStatusStrings, t.Layout.GStatusCount); err != nil {
			t.Mem.Close()
			return fmt.Errorf("process %d: read runtime.gStatusStrings: %w", t.PID, err)
		}
	}
	t.sym = newSymbolizer(t.Binary, t.Bias)
	return nil
}

// Close releases the target's resources. The process itself is not touched.
func (t *Target) Close() error {
	if t.Mem != nil {
		t.Mem.Close()
	}
	return t.Binary.Close()
}

// loadBias computes runtime minus link-time addresses from the entry point
// the kernel recorded in the auxiliary vector.
func loadBias(pid int, bin *dwarfx.Binary) (uint64, error) {
	if !bin.PIE {
		return 0, nil
	}
	entry, err := ptrace.EntryPoint(pid)
	if err != nil {
		return 0, err
	}
	return entry - bin.File.Entry, nil
}

func (t *Target) readStringArray(addr uint64, n int64) ([]string, error) {
	if n <= 0 || n > 4096 {
		return nil, fmt.Errorf("implausible length %d", n)
	}
	hdr := make([]byte, n*16)
	if _, err := t.Mem.ReadAt(hdr, addr+t.Bias); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		p := binary.LittleEndian.Uint64(hdr[i*16:])
		l := binary.LittleEndian.Uint64(hdr[i*16+8:])
		if l == 0 {
			continue
		}
		if l > maxStringLen {
			return nil, fmt.Errorf("string %d has length %d", i, l)
		}
		b := make([]byte, l)
		if _, err := t.Mem.ReadAt(b, p); err != nil {
			return nil, fmt.Errorf("string %d at %#x: %w", i, p, err)
		}
		out[i] = string(b)
	}
	return out, nil
}

// Snapshot stops the process, copies what it needs, resumes it and decodes.
// The process is resumed on every path, errors and panics included.
func (t *Target) Snapshot(tr *ptrace.Tracer) (*Snapshot, error) {
	start := time.Now()
	bufs := t.prepareBuffers()
	defer bufs.release()
	// Thread ids as the target's namespace numbers them (m.procid) to gi's,
	// mapped before the stop: only for a target in another PID namespace.
	nsTIDs, err := ptrace.NamespaceTIDs(t.PID, nil)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.PID, err)
	}
	// No garbage collection while the target waits: a cycle started by the
	// copy's allocations would compete for the CPUs.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	stopped, err := tr.Stop(t.PID)
	if err != nil {
		return nil, fmt.Errorf("stop process %d: %w", t.PID, err)
	}
	now := monotonicNow() + int64(t.clockOffset) // the target's clock
	taken := time.Now()
	raw, copyErr := func() (raw *rawSnapshot, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic while copying target memory: %v", r)
			}
		}()
		return t.copyRaw(stopped, bufs, nsTIDs)
	}()
	resumeErr := stopped.Resume()
	pause := stopped.Pause()
	if copyErr != nil {
		if !ptrace.Alive(t.PID) {
			return nil, fmt.Errorf("process %d: %w", t.PID, ptrace.ErrProcessExited)
		}
		return nil, fmt.Errorf("process %d: %w", t.PID, copyErr)
	}
	if resumeErr != nil {
		return nil, fmt.Errorf("resume process %d: %w", t.PID, resumeErr)
	}
	nsPid, _ := ptrace.NamespacePID(t.PID)
	snap := &Snapshot{
		PID:       t.PID,
		NSPid:     nsPid,
		Exe:       t.Binary.Path,
		GoVersion: t.Binary.GoVersion,
		Pause:     pause,
		Taken:     taken,
		Runtime21: t.Layout.G.ParentGoid != dwarfx.Missing,
		Warnings:  raw.warnings,
	}
	snap.TracebackLabels = t.tracebackLabels()
	snap.Goroutines = t.decode(raw, now)
	sort.SliceStable(snap.Goroutines, func(i, j int) bool { return snap.Goroutines[i].ID < snap.Goroutines[j].ID })
	snap.Total = time.Since(start)
	return snap, nil
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
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", t.PID))
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

// clockOffset returns how far the target's monotonic clock is ahead of gi's.
func clockOffset(pid int) (time.Duration, error) {
	theirs, err := ptrace.MonotonicOffset(pid)
	if err != nil {
		return 0, err
	}
	ours, err := ptrace.MonotonicOffset(0)
	if err != nil {
		return 0, err
	}
	return theirs - ours, nil
}

// monotonicNow returns CLOCK_MONOTONIC, the clock runtime.nanotime reads.
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// comm returns the process's command name, for error messages.
func comm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "pid " + strconv.Itoa(pid)
	}
	return strings.TrimSpace(string(b))
}
