package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// p50, p99 and max. For a function traced in sampling windows
	// (Sampled), the calls seen in them, and their estimated number in
	// the window (CallsEstimated).
	Calls          uint64 `json:"calls"`
	Sampled        bool   `json:"sampled,omitempty"`
	CallsEstimated uint64 `json:"calls_estimated,omitempty"`
	P50NS          int64  `json:"p50_ns"`
	P99NS          int64  `json:"p99_ns"`
	MaxNS          int64  `json:"max_ns"`
	// InCallNS is how long the goroutine has been in its current call of
	// Function when that call's entry was seen in the window; else 0.
	InCallNS int64 `json:"in_call_ns"`
	// Stuck marks a goroutine that sat in the same call of Function for
	// the whole window (never said of a function that does not return,
	// nor of one traced in sampling windows).
	Stuck bool `json:"stuck"`
	// TracedNS is how much of the window Function was traced: all of it
	// for the functions of the first snapshot's goroutines, the rest of it
	// for one attached when a later snapshot found a goroutine in it, 0
	// when it was never traced.
	TracedNS int64 `json:"traced_ns"`
	// Why says why the goroutine has no latency: WhyAppeared, WhyNoCall,
	// WhyNoSampledCall, WhyNoReturn, or WhyUntraceable and the reason.
	Why string `json:"why,omitempty"`
	// Dominant is the part of the calls' time that dominates (gi ps
	// --trace --why): on CPU, runnable or a wait reason, with its share.
	Dominant *Part `json:"dominant,omitempty"`
}

// Part is one part of a function's calls' time (trace.PartStat).
type Part struct {
	Part   string  `json:"part"`
	Share  float64 `json:"share"`
	MeanNS int64   `json:"mean_ns"`
	P99NS  int64   `json:"p99_ns"`
}

// dominant returns the largest of parts (trace.Stats.Parts, largest
// first), nil if there are none.
func dominant(parts []trace.PartStat) *Part {
	if len(parts) == 0 {
		return nil
	}
	p := parts[0]
	// Shares are written to four places: 0.8333, not 0.833270912...
	share := math.Round(p.Share*1e4) / 1e4
	return &Part{Part: p.Name, Share: share, MeanNS: int64(p.Mean), P99NS: int64(p.P99)}
}

// String renders the part as a MOSTLY column shows it: "sync.Mutex.Lock 83%".
func (p *Part) String() string {
	return fmt.Sprintf("%s %.0f%%", p.Part, 100*p.Share)
}

// Reasons a goroutine's row has no latency (Latency.Why).
const (
	// WhyAppeared: the goroutine is in a function no snapshot of the
	// window found a goroutine in, so it was not traced.
	WhyAppeared = "not traced: appeared during the window"
	// WhyNoCall: the function was traced, but no call of it completed in
	// the window and the goroutine's own call began before it was traced.
	WhyNoCall = "no call completed in the window"
	// WhyNoSampledCall: the function was traced in sampling windows
	// (Options.MaxOverhead), and none of its calls completed in them.
	WhyNoSampledCall = "no call completed in the sampling windows"
	// WhyNoReturn: the function has no RET (a worker loop, a select{}):
	// traced at entry only, its calls never complete.
	WhyNoReturn = "never returns (no RET)"
	// WhyUntraceable prefixes the reason none of the goroutine's frames
	// can carry probes.
	WhyUntraceable = "untraceable: "
)

// Window describes the trace a Result comes from.
type Window struct {
	// StartNS and EndNS bound the window (Unix ns): the statistics count
	// the calls that began and ended within it.
	StartNS   int64    `json:"start_ns"`
	EndNS     int64    `json:"end_ns"`
	Functions []string `json:"functions"`
	// Added are the functions of Functions attached during the window,
	// when a snapshot taken in it found goroutines in them.
	Added []string `json:"added,omitempty"`
	// Snapshots is how many snapshots were taken during the window to
	// follow the goroutines into new functions.
	Snapshots   int      `json:"snapshots"`
	Probes      int      `json:"probes"`
	Events      uint64   `json:"events"`
	Lost        uint64   `json:"lost"`
	Untraceable []string `json:"untraceable,omitempty"`
	// Sampled are the functions traced in sampling windows to keep the
	// overhead budget (Options.MaxOverhead), and SampledShare the share
	// of the window those were open, taking calls (what CallsEstimated
	// scales by).
	Sampled      []string `json:"sampled,omitempty"`
	SampledShare float64  `json:"sampled_share,omitempty"`
	// Warnings are what the trace said after it was attached (the
	// functions added and sampled, a budget not kept).
	Warnings []string `json:"warnings,omitempty"`
}

// Result is a snapshot taken at the end of a trace window, with the
// latencies of the goroutines' measured functions during it.
type Result struct {
	// Snapshot is taken when the window ends: the goroutines as they are
	// after it.
	Snapshot *inspect.Snapshot
	Window   Window
	Duration time.Duration
	// ByGoid holds, for each goroutine, the latency of its measured
	// function, or why it has none (Latency.Why).
	ByGoid map[uint64]*Latency
}

// Options bound a measurement.
type Options struct {
	// Duration is the length of the trace window.
	Duration time.Duration
	// Depth is how many traceable code frames of each goroutine are traced,
	// from the measured one outwards (at least 1).
	Depth int
	// Rows chooses the goroutines of a snapshot that are listed (a
	// filter): their functions are traced. Nil: every goroutine.
	Rows func(*inspect.Snapshot) []*inspect.Goroutine
	// Why splits the calls' time (trace.Options.Why): each latency says
	// which part dominates (Latency.Dominant).
	Why bool
	// MaxOverhead bounds the probes' cost (trace.Options.MaxOverhead):
	// the costliest functions, those traced from the outset and those
	// added, are traced in sampling windows; 0 for no bound.
	MaxOverhead float64
	// Attached, if set, is called once the probes are in place, with the
	// kernel features the trace works without (trace.Session.Warnings).
	Attached func(functions, probes, goroutines int, warnings []string)
}

func (o Options) rows(s *inspect.Snapshot) []*inspect.Goroutine {
	if o.Rows == nil {
		return s.Goroutines
	}
	return o.Rows(s)
}

// Follow bounds the snapshots taken during a window: at most one per
// followMinInterval, and apart by followPauseFactor times the last one's
// pause, so that they stop the target at most 1/followPauseFactor of the
// time.
const (
	followMinInterval = 250 * time.Millisecond
	followPauseFactor = 20
	followTick        = 50 * time.Millisecond
)

// Run traces, for o.Duration, the measured functions of the goroutines
// of first (a snapshot of t) that o.Rows keeps, then takes a second
// snapshot and relates the two. During the window it takes more snapshots
// (see followMinInterval) and attaches the functions goroutines have moved
// into since: requests served by fresh goroutines pass through functions
// the first snapshot did not see. The probes are detached before the
// second snapshot, and on every path.
func Run(ctx context.Context, t *inspect.Target, tr *ptrace.Tracer, first *inspect.Snapshot, o Options) (*Result, error) {
	if o.Depth < 1 {
		return nil, errors.New("trace depth must be at least 1")
	}
	if t.Process() == nil || !t.Process().Live {
		return nil, errors.New("measuring latencies needs a live process, not a memory image or a core")
	}
	// The binary inspect read, its probe sites decoded once for the
	// traceability of frames, the trace and what it adds.
	sites := trace.NewSites(t.Binary)
	prog := ProgramOf(sites)
	gs := o.rows(first)
	names := measuredFunctions(prog, gs, o.Depth)
	if len(names) == 0 {
		return nil, errors.New("the goroutines are in no traceable function")
	}
	s, err := trace.Open(trace.Options{Process: t.Process(), Include: exactNames(names), Growable: true, Sites: sites, Why: o.Why, MaxOverhead: o.MaxOverhead})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if o.Attached != nil {
		o.Attached(len(s.Selection.Functions), s.Probes, len(gs), s.Warnings)
	}
	warned := len(s.Warnings)
	res := &Result{ByGoid: map[uint64]*Latency{}, Duration: o.Duration}

	w := newWindow(o.Duration)
	res.Window.StartNS, res.Window.EndNS = w.wallStart.UnixNano(), w.wallStart.Add(o.Duration).UnixNano()
	f := &follower{t: t, tr: tr, s: s, prog: prog, o: o, since: map[string]uint64{}, next: time.Now()}
	for _, fn := range s.Selection.Functions {
		f.since[fn.Name] = w.monoStart
	}
	run := s.Run(ctx, trace.RunOptions{Duration: o.Duration, Interval: followTick}, trace.Handlers{Call: w.call, Event: w.event, Tick: f.tick})
	res.Window.Events, res.Window.Lost, res.Window.Snapshots = run.Events, run.Lost, f.snapshots
	res.Window.Probes = s.Probes
	for _, fn := range s.Selection.Functions {
		res.Window.Functions = append(res.Window.Functions, fn.Name)
	}
	res.Window.Added = f.added
	for _, u := range s.Selection.Untraceable {
		res.Window.Untraceable = append(res.Window.Untraceable, u.Name+": "+u.Reason)
	}
	res.Window.Warnings = s.Warnings[warned:]
	var sampledShare float64
	if sm := run.Sampling; sm != nil {
		sampledShare = sm.OpenShare()
		res.Window.SampledShare = math.Round(sampledShare*1e4) / 1e4
		for _, f := range sm.Functions {
			res.Window.Sampled = append(res.Window.Sampled, f.Func.Name)
		}
		// Where the budget could not be kept, or no window opened.
		res.Window.Warnings = append(res.Window.Warnings, sm.Warnings...)
	}
	if run.Err != nil {
		return nil, run.Err
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	if f.err != nil {
		return nil, fmt.Errorf("following the goroutines during the window: %w", f.err)
	}
	end := uint64(trace.MonotonicNow())
	s.Close()

	if res.Snapshot, err = t.Snapshot(tr); err != nil {
		return nil, err
	}
	traced := map[string]tracedFunction{}
	for _, fn := range s.Selection.Functions {
		traced[fn.Name] = tracedFunction{fn, f.since[fn.Name]}
	}
	res.ByGoid = w.relate(prog, o.Depth, first, o.rows(res.Snapshot), traced, run.Open, uint32(t.PID), end, run.Lost > 0)
	for _, l := range res.ByGoid {
		if l.Sampled && sampledShare > 0 {
			l.CallsEstimated = uint64(math.Round(float64(l.Calls) / sampledShare))
		}
	}
	return res, nil
}

func exactNames(names []string) []trace.Pattern {
	pats := make([]trace.Pattern, len(names))
	for i, n := range names {
		pats[i] = trace.ExactName(n)
	}
	return pats
}

// follower takes the snapshots of a window and attaches the functions
// they find goroutines in. Its tick runs on the trace's reading goroutine,
// so that the session grows between two reads.
type follower struct {
	t     *inspect.Target
	tr    *ptrace.Tracer
	s     *trace.Session
	prog  Program
	o     Options
	since map[string]uint64 // when each traced function was attached (monotonic ns)
	added []string
	next  time.Time // when the next snapshot is due
	// snapshots counts those taken; err stops the following.
	snapshots int
	err       error
}

func (f *follower) tick() {
	if f.err != nil || time.Now().Before(f.next) {
		return
	}
	snap, err := f.t.Snapshot(f.tr)
	if err != nil {
		f.err = err
		return
	}
	f.snapshots++
	f.next = time.Now().Add(max(followMinInterval, followPauseFactor*snap.Pause))
	var fresh []string
	for _, n := range measuredFunctions(f.prog, f.o.rows(snap), f.o.Depth) {
		if _, ok := f.since[n]; !ok {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) == 0 {
		return
	}
	added, refused, err := f.s.Add(exactNames(fresh))
	if err != nil {
		f.err = err
		return
	}
	at := uint64(trace.MonotonicNow())
	for _, fn := range added {
		f.since[fn.Name] = at
		f.added = append(f.added, fn.Name)
	}
	for _, u := range refused { // not asked again
		f.since[u.Name] = 0
	}
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

// tracedFunction is a function the window traced, and since when
// (monotonic ns; the window's start for those traced from the outset).
type tracedFunction struct {
	fn    *trace.Function
	since uint64
}

// relate gives each goroutine of rows (from the snapshot that ends the
// window) its measured function's latency: the statistics of the window,
// its time in the current call when the call's entry was seen (open, still
// open at monotonic time end), and stuck when the function was traced the
// whole window, the goroutine was in it before the window (in first) and
// the function saw no event of it since. A goroutine without a latency
// gets the reason (Latency.Why). With lost events no goroutine is said to
// be stuck: the missing event may be its.
func (w *window) relate(prog Program, depth int, first *inspect.Snapshot, rows []*inspect.Goroutine, traced map[string]tracedFunction, open []trace.OpenCall, pid uint32, end uint64, lost bool) map[uint64]*Latency {
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
	for _, g := range rows {
		frames := prog.MeasuredFrames(g, depth)
		if len(frames) == 0 {
			at, why := prog.unmeasured(g)
			out[g.ID] = &Latency{Function: at.Function, File: at.File, Line: at.Line, Why: WhyUntraceable + why}
			continue
		}
		var tf tracedFunction
		at := frames[0]
		for _, f := range frames {
			if t, ok := traced[f.Function]; ok && t.fn != nil {
				tf, at = t, f
				break
			}
		}
		l := &Latency{Function: at.Function, File: at.File, Line: at.Line}
		out[g.ID] = l
		fn := tf.fn
		if fn == nil {
			l.Why = WhyAppeared
			continue
		}
		// The part of the window the function was traced: its
		// statistics count the calls within the window alone, and a
		// function attached during it missed the calls before.
		if from, until := max(tf.since, w.monoStart), min(end, w.monoEnd); until > from {
			l.TracedNS = int64(until - from)
		}
		l.Sampled = fn.Sampled
		if h := w.stats.Of(fn); h != nil {
			l.Calls = h.Count()
			l.P50NS, l.P99NS, l.MaxNS = int64(h.Quantile(0.5)), int64(h.Quantile(0.99)), int64(h.Max())
		}
		l.Dominant = dominant(w.stats.Parts(fn))
		k := trace.GoroutineKey{PID: pid, Goid: g.ID}
		if oc, ok := innermost[k][fn]; ok && end > oc.Start {
			l.InCallNS = int64(end - oc.Start)
		} else if prev := before[g.ID]; !lost && prev != nil && tf.since <= w.monoStart && !fn.EntryOnly && !fn.Sampled && !w.touched[k][fn] && inFunction(prev, fn.Name) {
			// A function that never returns (a worker loop) is always in
			// the same call: that is not being stuck; nor is a goroutine
			// whose calls went between the sampling windows.
			l.Stuck = true
		}
		switch {
		case l.Calls > 0 || l.InCallNS > 0 || l.Stuck:
		case fn.EntryOnly:
			l.Why = WhyNoReturn
		case fn.Sampled:
			l.Why = WhyNoSampledCall
		default:
			l.Why = WhyNoCall
		}
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
	if (l.Why == WhyNoCall || l.Why == WhyNoSampledCall || l.Why == WhyNoReturn) && (l.InCallNS > 0 || stuck > 0) {
		l.Why = "" // a member's call says something
	}
	return l, stuck, true
}
