package service

import (
	"fmt"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/leak"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/trace"
)

// TopRequest says which process gi top watches and how its trace runs.
type TopRequest struct {
	PID int
	// Why splits the traced calls' time; MaxOverhead bounds the probes'
	// share of the process's CPU time (0: no bound).
	Why         bool
	MaxOverhead float64
	// Reattach is how often, at most, the trace attaches to the
	// functions new groups are in (0: DefaultReattach).
	Reattach time.Duration
	// Decoded, if set, is called with each snapshot once decoded
	// (inspect.Target.Decoded).
	Decoded func(*inspect.Snapshot)
}

// DefaultReattach is how often, at most, a Watch's trace grows.
const DefaultReattach = 5 * time.Second

// Watch is gi top's operation: a process's goroutines snapshotted on
// demand, grouped by the function they are in (or the object they wait
// on), with a trace kept running on those functions for their latency.
// It is what a live view, or a recorder, refreshes in a loop.
type Watch struct {
	pid     int
	tracer  *ptrace.Tracer
	target  *inspect.Target
	live    *measure.Live
	program measure.Program
	snap    *inspect.Snapshot
	closed  bool
}

// StartWatch opens the process and takes its first snapshot. The tracer
// stops it for each snapshot (one per command: see ptrace.Tracer).
func StartWatch(tracer *ptrace.Tracer, r TopRequest) (*Watch, error) {
	w, err := OpenWatch(tracer, r)
	if err != nil {
		return nil, err
	}
	if err := w.Refresh(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// OpenWatch opens the process without stopping it: its executable and
// runtime are read (States), and Refresh takes the first snapshot.
func OpenWatch(tracer *ptrace.Tracer, r TopRequest) (*Watch, error) {
	if r.PID <= 0 {
		return nil, fmt.Errorf("no process: pid %d", r.PID)
	}
	if r.MaxOverhead < 0 || r.MaxOverhead >= 1 {
		return nil, fmt.Errorf("--max-overhead %g%%: want a percentage from 0 to 100 (5%%) or none", 100*r.MaxOverhead)
	}
	if r.Reattach <= 0 {
		r.Reattach = DefaultReattach
	}
	t, err := inspect.Open(r.PID)
	if err != nil {
		return nil, err
	}
	t.Decoded = r.Decoded
	sites := trace.NewSites(t.Binary)
	return &Watch{pid: r.PID, tracer: tracer, target: t, program: measure.ProgramOf(sites),
		live: measure.NewLive(t.Process(), sites, measure.LiveOptions{Reattach: r.Reattach, Why: r.Why, MaxOverhead: r.MaxOverhead})}, nil
}

// States are what a goroutine's state can be in the process's Go
// release (inspect.Target.States), GoVersion that release.
func (w *Watch) States() []string { return w.target.States() }

// GoVersion is the Go release that built the process.
func (w *Watch) GoVersion() string { return w.target.Binary.GoVersion }

// Snapshot is the latest snapshot (nil before the first Refresh).
func (w *Watch) Snapshot() *inspect.Snapshot { return w.snap }

// Refresh takes a new snapshot. If it fails, the latest stays; a process
// that is gone is proc.ErrNoSuchProcess.
func (w *Watch) Refresh() error {
	s, err := w.target.Snapshot(w.tracer)
	if err != nil {
		if !w.target.Process().Alive() {
			return fmt.Errorf("process %d exited: %w", w.pid, proc.ErrNoSuchProcess)
		}
		return err
	}
	w.snap = s
	return nil
}

// RefreshCore takes a new snapshot and, from the same stop, writes a core
// file of the process to path (inspect.Target.SnapshotCore). If it
// fails, the latest snapshot stays.
func (w *Watch) RefreshCore(path string) (*inspect.CoreWritten, error) {
	s, written, err := w.target.SnapshotCore(w.tracer, path, inspect.CoreOptions{})
	if err != nil {
		if !w.target.Process().Alive() {
			return nil, fmt.Errorf("process %d exited: %w", w.pid, proc.ErrNoSuchProcess)
		}
		return nil, err
	}
	w.snap = s
	return written, nil
}

// RefreshLeaks takes a new snapshot with the leak rule judged on it, as
// gi ps --leaks does: the goroutines nothing that can run will ever wake
// are marked Leaked. If it fails, the latest snapshot stays.
func (w *Watch) RefreshLeaks(opts leak.Options) (*LeakVerdict, error) {
	snap, im, capErr := leak.Take(w.target, func() (*inspect.Snapshot, error) { return w.target.Snapshot(w.tracer) }, opts)
	if snap == nil {
		if !w.target.Process().Alive() {
			return nil, fmt.Errorf("process %d exited: %w", w.pid, proc.ErrNoSuchProcess)
		}
		return nil, capErr
	}
	v := judge(w.target, snap, im, capErr, opts)
	w.snap = snap
	return v, nil
}

// Groups groups the latest snapshot's goroutines by the function they
// are in (byObject: by the object they wait on), and has the trace
// follow the groups' functions.
func (w *Watch) Groups(byObject bool) []*measure.Group {
	var groups []*measure.Group
	if byObject {
		groups = w.program.GroupByObject(w.snap.Goroutines)
	} else {
		groups = w.program.Group(w.snap.Goroutines)
	}
	var names []string
	for _, g := range groups {
		if g.Function != "" {
			names = append(names, g.Function)
		}
	}
	w.live.Ensure(names)
	return groups
}

// Latency is the trace on the groups' functions: their latencies, what
// is sampled, its warnings and error.
func (w *Watch) Latency() *measure.Live { return w.live }

// Close takes the trace down and releases the process; after the first
// call it does nothing.
func (w *Watch) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.live.Close()
	return w.target.Close()
}
