package link

import (
	"context"
	"errors"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/trace"
)

// Latency is what a trace window tells about one goroutine's measured
// function (see Program.MeasuredFrames).
type Latency struct {
	// Function is the measured function, always a frame of the goroutine's
	// stack; File and Line locate that frame.
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	// Calls of Function that began and ended in the window, and their
	// p50, p99 and max.
	Calls uint64 `json:"calls"`
	P50NS int64  `json:"p50_ns"`
	P99NS int64  `json:"p99_ns"`
	MaxNS int64  `json:"max_ns"`
	// InCallNS is how long the goroutine has been in its current call of
	// Function when that call's entry was seen in the window; else 0.
	InCallNS int64 `json:"in_call_ns"`
	// Stuck marks a goroutine that sat in the same call of Function for
	// the whole window (never said of a function that does not return).
	Stuck bool `json:"stuck"`
}

// Window describes the trace a Result comes from.
type Window struct {
	// StartNS and EndNS bound the window (Unix ns): the statistics count
	// the calls that began and ended within it.
	StartNS     int64    `json:"start_ns"`
	EndNS       int64    `json:"end_ns"`
	Functions   []string `json:"functions"`
	Probes      int      `json:"probes"`
	Events      uint64   `json:"events"`
	Lost        uint64   `json:"lost"`
	Untraceable []string `json:"untraceable,omitempty"`
}

// Result is a snapshot taken at the end of a trace window, with the
// latencies of the goroutines' measured functions during it.
type Result struct {
	// Snapshot is taken when the window ends: the goroutines as they are
	// after it.
	Snapshot *inspect.Snapshot
	Window   Window
	Duration time.Duration
	// ByGoid holds the latency of each goroutine with a measured function
	// that could be traced.
	ByGoid map[uint64]*Latency
}

// Options bound a measurement.
type Options struct {
	// Duration is the length of the trace window.
	Duration time.Duration
	// Depth is how many traceable code frames of each goroutine are traced,
	// from the measured one outwards (at least 1).
	Depth int
	// Attached, if set, is called once the probes are in place, with the
	// kernel features the trace works without (trace.Session.Warnings).
	Attached func(functions, probes, goroutines int, warnings []string)
}

// Measure traces, for o.Duration, the measured functions of goroutines gs
// (taken from first, a snapshot of t), then takes a second snapshot and
// relates the two. The probes are detached before the second snapshot, and
// on every path.
func Measure(ctx context.Context, t *inspect.Target, tr *ptrace.Tracer, first *inspect.Snapshot, gs []*inspect.Goroutine, o Options) (*Result, error) {
	if o.Depth < 1 {
		return nil, errors.New("trace depth must be at least 1")
	}
	prog := ProgramOf(t.Binary)
	names := measuredFunctions(prog, gs, o.Depth)
	if len(names) == 0 {
		return nil, errors.New("the goroutines are in no traceable function")
	}
	pats := make([]trace.Pattern, len(names))
	for i, n := range names {
		pats[i] = trace.ExactName(n)
	}
	s, err := trace.Open(trace.Options{PID: t.PID, Include: pats})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Attached != nil {
		o.Attached(len(s.Selection.Functions), s.Probes, len(gs), s.Warnings)
	}
	res := &Result{ByGoid: map[uint64]*Latency{}, Duration: o.Duration}
	res.Window.Probes = s.Probes
	for _, f := range s.Selection.Functions {
		res.Window.Functions = append(res.Window.Functions, f.Name)
	}
	for _, u := range s.Selection.Untraceable {
		res.Window.Untraceable = append(res.Window.Untraceable, u.Name+": "+u.Reason)
	}

	w := newWindow(o.Duration)
	res.Window.StartNS, res.Window.EndNS = w.wallStart.UnixNano(), w.wallStart.Add(o.Duration).UnixNano()
	run := s.Run(ctx, trace.RunOptions{Duration: o.Duration}, trace.Handlers{Call: w.call, Event: w.event})
	res.Window.Events, res.Window.Lost = run.Events, run.Lost
	if run.Err != nil {
		return nil, run.Err
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	end := uint64(trace.MonotonicNow())
	s.Close()

	if res.Snapshot, err = t.Snapshot(tr); err != nil {
		return nil, err
	}
	res.ByGoid = w.relate(prog, o.Depth, first, res.Snapshot, s.Selection.Functions, run.Open, uint32(t.PID), end, run.Lost > 0)
	return res, nil
}

// measuredFunctions returns the functions to trace: the measured frame of
// each goroutine and up to depth-1 traceable frames above it.
func measuredFunctions(prog Program, gs []*inspect.Goroutine, depth int) []string {
	seen := map[string]bool{}
	var names []string
	for _, g := range gs {
		for _, f := range prog.MeasuredFrames(g, depth) {
			if !seen[f.Function] {
				seen[f.Function] = true
				names = append(names, f.Function)
			}
		}
	}
	return names
}

// window accumulates what a trace window shows: per-function statistics of
// the calls that began and ended in it, and which functions each goroutine
// touched (entered or returned from).
type window struct {
	wallStart          time.Time
	monoStart, monoEnd uint64
	stats              *trace.Stats
	touched            map[trace.GoroutineKey]map[*trace.Function]bool
}

// newWindow starts a window of length d now, on both clocks, so that what
// gi counts can be compared with what anyone measured over it.
func newWindow(d time.Duration) *window {
	w := &window{wallStart: time.Now(), monoStart: uint64(trace.MonotonicNow()), stats: trace.NewStats(),
		touched: map[trace.GoroutineKey]map[*trace.Function]bool{}}
	w.monoEnd = w.monoStart + uint64(d)
	return w
}

func (w *window) call(_ trace.Header, c *trace.Call) {
	if c.Start >= w.monoStart && c.End <= w.monoEnd {
		w.stats.Add(c)
	}
}

func (w *window) event(ev *trace.Event) {
	if ev.Func == nil {
		return
	}
	k := trace.GoroutineKey{PID: ev.PID, Goid: ev.Goid}
	m := w.touched[k]
	if m == nil {
		m = map[*trace.Function]bool{}
		w.touched[k] = m
	}
	m[ev.Func] = true
}

// relate gives each goroutine of second its measured function's latency:
// the statistics of the window, its time in the current call when the call's
// entry was seen (open, still open at monotonic time end), and stuck when the
// goroutine was in that function before the window (in first) and the
// function saw no event of it since. With lost events no goroutine is said
// to be stuck: the missing event may be its.
func (w *window) relate(prog Program, depth int, first, second *inspect.Snapshot, fns []*trace.Function, open []trace.OpenCall, pid uint32, end uint64, lost bool) map[uint64]*Latency {
	byName := map[string]*trace.Function{}
	for _, f := range fns {
		byName[f.Name] = f
	}
	// The innermost open call of each goroutine, per function.
	innermost := map[trace.GoroutineKey]map[*trace.Function]trace.OpenCall{}
	for _, oc := range open {
		m := innermost[oc.Goroutine]
		if m == nil {
			m = map[*trace.Function]trace.OpenCall{}
			innermost[oc.Goroutine] = m
		}
		if prev, ok := m[oc.Func]; !ok || oc.Depth > prev.Depth {
			m[oc.Func] = oc
		}
	}
	before := map[uint64]*inspect.Goroutine{}
	for _, g := range first.Goroutines {
		before[g.ID] = g
	}
	out := map[uint64]*Latency{}
	for _, g := range second.Goroutines {
		var fn *trace.Function
		var at inspect.Frame
		for _, f := range prog.MeasuredFrames(g, depth) {
			if fn = byName[f.Function]; fn != nil {
				at = f
				break
			}
		}
		if fn == nil {
			continue
		}
		l := &Latency{Function: fn.Name, File: at.File, Line: at.Line}
		if h := w.stats.Of(fn); h != nil {
			l.Calls = h.Count()
			l.P50NS, l.P99NS, l.MaxNS = int64(h.Quantile(0.5)), int64(h.Quantile(0.99)), int64(h.Max())
		}
		k := trace.GoroutineKey{PID: pid, Goid: g.ID}
		if oc, ok := innermost[k][fn]; ok && end > oc.Start {
			l.InCallNS = int64(end - oc.Start)
		} else if prev := before[g.ID]; !lost && prev != nil && !fn.EntryOnly && !w.touched[k][fn] && inFunction(prev, fn.Name) {
			// A function that never returns (a worker loop) is always in
			// the same call: that is not being stuck.
			l.Stuck = true
		}
		out[g.ID] = l
	}
	return out
}

func inFunction(g *inspect.Goroutine, name string) bool {
	for _, f := range g.CodeFrames() {
		if f.Function == name {
			return true
		}
	}
	return false
}

// GroupLatency sums up the latencies of a group of goroutines that share a
// measured function (as gi ps --group folds them): the representative's
// statistics, the longest in-call time, how many are stuck, and Stuck when
// all are. ok is false when the representative has no latency.
func (r *Result) GroupLatency(representative *inspect.Goroutine, members []*inspect.Goroutine) (l Latency, stuck int, ok bool) {
	rep := r.ByGoid[representative.ID]
	if rep == nil {
		return Latency{}, 0, false
	}
	l = *rep
	l.Stuck, l.InCallNS = false, 0
	for _, g := range members {
		if m := r.ByGoid[g.ID]; m != nil {
			l.InCallNS = max(l.InCallNS, m.InCallNS)
			if m.Stuck {
				stuck++
			}
		}
	}
	l.Stuck = stuck == len(members)
	return l, stuck, true
}
