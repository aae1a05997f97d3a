// Package service holds gi's operations as a front end calls them: each
// takes a request value and returns typed results, never text, so that
// gi's command line, and the front ends that come after it (a kubectl
// plugin across pods, a recorder), call the same code. cmd/gi parses its
// flags into requests and renders the results.
//
// Ps is gi ps: a snapshot of every goroutine of a live process or of a
// core file, with the leaks judged, a core written in the stop, or the
// latency of the function each goroutine is in traced. StartTrace is gi
// trace (probes on the functions patterns match, the calls handed to the
// caller's handlers, the result typed), Funcs gi funcs, and StartWatch
// gi top's engine (snapshots grouped, with a trace kept on the groups'
// functions).
package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/leak"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/ptrace"
)

// PsRequest says which process or core Ps reads and what it takes.
type PsRequest struct {
	// PID is the live process to read (its host pid); Core, if set
	// instead, a core file, and Binary its executable when the core's is
	// not where the process ran.
	PID    int
	Core   string
	Binary string
	// State, if set, names a goroutine state of the runtime (as the
	// binary's Go release spells it): a name that is none is an error.
	State string
	// Waits reads what each blocked goroutine waits on (the objects and
	// their other waiters); CopyEarly copies the stacks before the stop
	// and reads again only the pages written since, rather than in it.
	Waits     bool
	CopyEarly bool
	// Leaks judges which blocked goroutines can never be woken (the
	// runtime's leak rule), with LeakOptions (with CoreFile, the heap is
	// copied in the stop, so that the core holds what the walk read).
	Leaks       bool
	LeakOptions leak.Options
	// CoreFile, if set, writes a core of the live process from the
	// snapshot's stop; CoreAll writes all of its memory, not only what
	// gi reads.
	CoreFile string
	CoreAll  bool
	// Trace, if positive, measures for that long the latency of the
	// function each goroutine is in (a live process only), TraceDepth
	// frames deep, with Why each call's time split, under MaxOverhead (a
	// share of the process's CPU time; 0: none).
	Trace       time.Duration
	TraceDepth  int
	Why         bool
	MaxOverhead float64
	// Rows chooses the goroutines a trace follows (nil: every one).
	Rows func(*inspect.Snapshot) []*inspect.Goroutine
	// Attached, if set, is called once a trace's probes are in: the
	// functions, probes and goroutines it follows, and its warnings.
	Attached func(functions, probes, goroutines int, warnings []string)
	// CoreWritten, if set, is called once the core is written, before
	// any trace.
	CoreWritten func(w *inspect.CoreWritten, pause time.Duration)
	// Decoded, if set, is called with each snapshot of the live process
	// once decoded (inspect.Target.Decoded).
	Decoded func(*inspect.Snapshot)
}

// Check says whether the request's parts go together. Its messages name
// gi's flags, which every front end shares.
func (r PsRequest) Check() error {
	fromCore := r.Core != ""
	switch {
	case r.Why && r.Trace == 0:
		return fmt.Errorf("--why splits the time of the calls --trace measures: give --trace D")
	case fromCore && r.PID != 0:
		return fmt.Errorf("a live process or a core file, not both")
	case fromCore && r.Trace > 0:
		return fmt.Errorf("--trace measures a live process; %s is a core file", r.Core)
	case r.Binary != "" && !fromCore:
		return fmt.Errorf("--binary goes with a core file")
	case r.CoreFile != "" && fromCore:
		return fmt.Errorf("--core writes a core of a live process; %s is a core file already", r.Core)
	case r.CoreAll && r.CoreFile == "":
		return fmt.Errorf("--core-all goes with --core FILE")
	case r.Leaks && r.Trace > 0:
		return fmt.Errorf("--leaks and --trace: one at a time")
	case r.Trace > 0 && r.TraceDepth < 1:
		return fmt.Errorf("--trace-depth must be at least 1")
	}
	return nil
}

// PsResult is what Ps took.
type PsResult struct {
	// PID is the process's (a core's: the pid it had).
	PID int
	// Snapshot holds every goroutine, with a trace the last snapshot
	// (its rows' latencies in Measured).
	Snapshot *inspect.Snapshot
	// Leaks is the verdict on leaks (nil unless asked).
	Leaks *LeakVerdict
	// Measured is the trace's result (nil unless asked).
	Measured *measure.Result
	// Core is the core file read, and Missing the memory it lacks that gi
	// needs (the listing holds what could be decoded without it).
	Core    string
	Missing []core.MissingMemory
}

// LeakVerdict is the leak rule's verdict and what the capture of the
// heap it walked took.
type LeakVerdict struct {
	*leak.Result
	// Capture describes the heap's capture (nil: none was made, and the
	// walk is undecided).
	Capture *LeakCapture
}

// LeakCapture describes how the heap the leak walk read was captured.
type LeakCapture struct {
	// Took is the capture's time (its part in the stop); HeapBytes what
	// it holds of the heap's contents.
	Took      time.Duration
	HeapBytes int64
	// PreCopy is how long the heap was copied before the stop, Rewritten
	// the pages read again in it; InStop why it was copied in the stop
	// instead ("" when not).
	PreCopy   time.Duration
	Rewritten int
	InStop    string
	// Frozen says the heap was read from a copy the process made of
	// itself in the stop, and ReapPause the second stop that reaped it.
	Frozen    bool
	ReapPause time.Duration
}

// Ps takes the snapshot r asks for. The tracer stops live processes (one
// per command: see ptrace.Tracer); ctx ends a trace early.
func Ps(ctx context.Context, tracer *ptrace.Tracer, r PsRequest) (*PsResult, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	if r.Core == "" && r.PID <= 0 {
		return nil, fmt.Errorf("no process: pid %d", r.PID)
	}
	if r.Core != "" {
		return psCore(r)
	}
	return psLive(ctx, tracer, r)
}

// psCore reads the goroutines a core file holds.
func psCore(r PsRequest) (*PsResult, error) {
	c, err := core.Open(r.Core, r.Binary)
	if errors.Is(err, core.ErrNoExecutable) {
		return nil, fmt.Errorf("%w (give it: --binary PATH)", err)
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t, err := inspect.New(c.Process)
	if err != nil {
		return nil, err
	}
	if err := CheckState(t, r.State); err != nil {
		return nil, err
	}
	now, _ := c.Now() // 0: waits unknown
	t.KeepStacks = r.Leaks
	snap, err := t.Decode(c.Threads, now)
	if err != nil {
		return nil, err
	}
	res := &PsResult{PID: c.Process.PID, Snapshot: snap, Core: c.Path, Missing: c.Missing()}
	if r.Leaks {
		im, capErr := leak.Capture(c.Process.Mem, t.Binary, t.Layout, t.Bias, c.Threads, r.LeakOptions)
		if maps, err := c.Process.ReadMappings(); im != nil && err == nil {
			var paths []string
			for _, m := range maps {
				paths = append(paths, m.Path)
			}
			im.GoModules = leak.GoModules("/", paths, t.Binary)
		}
		res.Leaks = judge(t, snap, im, capErr, r.LeakOptions)
	}
	if len(res.Missing) > 0 && len(snap.Goroutines) == 0 {
		return nil, fmt.Errorf("core %s: no goroutine could be decoded: it lacks %s", c.Path, core.DescribeMissing(res.Missing))
	}
	snap.Origin = coreOrigin(c)
	return res, nil
}

// psLive stops the live process for its snapshot, and traces after it if
// asked.
func psLive(ctx context.Context, tracer *ptrace.Tracer, r PsRequest) (*PsResult, error) {
	t, err := inspect.Open(r.PID)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if err := CheckState(t, r.State); err != nil {
		return nil, err
	}
	t.SkipWaits = !r.Waits
	t.StacksInStop = !r.CopyEarly
	t.Decoded = r.Decoded
	var written *inspect.CoreWritten
	take := func() (*inspect.Snapshot, error) {
		if r.CoreFile == "" {
			return t.Snapshot(tracer)
		}
		s, w, err := t.SnapshotCore(tracer, r.CoreFile, inspect.CoreOptions{All: r.CoreAll})
		written = w
		return s, err
	}
	res := &PsResult{PID: r.PID}
	if r.Leaks && r.CoreFile != "" {
		// The core then holds what the walk read.
		r.LeakOptions.InStop = true
	}
	if r.Leaks {
		snap, im, capErr := leak.Take(t, take, r.LeakOptions)
		if snap == nil {
			return nil, capErr
		}
		res.Snapshot = snap
		res.Leaks = judge(t, snap, im, capErr, r.LeakOptions)
	} else if res.Snapshot, err = take(); err != nil {
		return nil, err
	}
	if written != nil && r.CoreWritten != nil {
		r.CoreWritten(written, res.Snapshot.Pause)
	}
	if r.Trace > 0 {
		m, err := measure.Run(ctx, t, tracer, res.Snapshot, measure.Options{Duration: r.Trace, Depth: r.TraceDepth, Rows: r.Rows, Why: r.Why, MaxOverhead: r.MaxOverhead, Attached: r.Attached})
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		res.Measured, res.Snapshot = m, m.Snapshot
	}
	return res, nil
}

// judge runs the leak walk on the image captured beside snap (nil, with
// capErr, when the capture failed: the walk is then undecided, and says
// why), marks snap's leaked goroutines and releases the image.
func judge(t *inspect.Target, snap *inspect.Snapshot, im *leak.Image, capErr error, opts leak.Options) *LeakVerdict {
	res := leak.Find(t, snap, im, opts)
	snap.ReleaseStacks()
	if capErr != nil && res.Undecided != "" {
		res.Undecided = capErr.Error()
	}
	v := &LeakVerdict{Result: res}
	if im != nil {
		c := &LeakCapture{Took: im.Took, HeapBytes: im.Contents.Bytes, PreCopy: im.PreCopy, Rewritten: im.Rewritten, InStop: im.InStop}
		if im.Frozen {
			c.Frozen, c.ReapPause = true, snap.ReapPause
		}
		v.Capture = c
		im.Release()
	}
	return v
}

// CheckState fails on a state that no goroutine of t's Go release can be
// in, naming those it has.
func CheckState(t *inspect.Target, state string) error {
	if state == "" {
		return nil
	}
	states := t.States()
	for _, s := range states {
		if strings.EqualFold(s, state) {
			return nil
		}
	}
	return fmt.Errorf("--state %q: no such state in %s; it has: %s", state, t.Binary.GoVersion, strings.Join(states, ", "))
}

// coreOrigin names a core file, its process, the signal that ended it
// and when the core was written.
func coreOrigin(c *core.Core) string {
	s := "core " + c.Path + " (" + c.Command
	if c.Signal != 0 {
		s += ", " + unix.SignalName(syscall.Signal(c.Signal))
	}
	if st, err := os.Stat(c.Path); err == nil {
		s += ", written " + st.ModTime().UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return s + ")"
}
