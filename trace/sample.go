package trace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/governor"
	"github.com/gi-debug/gi/proc"
)

// Sampling. Under Options.MaxOverhead, gi first counts, for a short
// window, the calls of every matched function (an entry probe that only
// counts), and estimates what tracing each whole would cost the process:
// its calls per second of the process's CPU time times what a call costs
// (the traps at its entry and RET, two program runs). Functions are traced
// whole, as without a budget, while their sum fits; beyond, the costliest
// are traced in sampling windows: their probes attached for a window,
// then, while the window closes, only their calls made inside a call of
// the window still open are reported, until those have returned or a
// wait that follows the sampled calls' durations is over, then the probes
// detached. A call of a sampled function is reported whole or not at all:
// one still open when its window's probes go is cut (Builder.Cut), and
// one that would be unwound is dropped the same way. The probe on
// goroutine exits, which fires whatever is traced, is counted and costed
// as a function of its own, and goes in the windows when it costs too
// much. The windows' length and period follow
// what the last window cost, measured (hits counted in the kernel at the
// calibrated per-hit costs), against what the budget leaves after the
// whole functions' measured cost.

// countChecks are when the counting checks what it has cost so far: not
// before 10 ms, as the threads' CPU times (schedstat) of a thread running
// are updated at the scheduler's ticks, up to 4 ms (10 ms at 100 Hz) late.
var countChecks = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}

// Sampling parameters.
const (
	// countWindow is how long the calls are counted before the trace;
	// tracing, the counting stops at the first of countChecks at which
	// its probes have cost countBudget (Session.countFor).
	countWindow = 50 * time.Millisecond
	countBudget = time.Millisecond
	// programEstimate is what a program run is taken to cost before the
	// programs have measured themselves.
	programEstimate = 500 * time.Nanosecond
)

// CallRate is a function's call rate, counted in the window before the
// trace.
type CallRate struct {
	Func *Function
	// PerSecond is calls per second of wall time, the counting probes on.
	PerSecond float64
	// Cost estimates the share of the process's CPU time tracing the
	// function whole would take (the time its calls counted would have
	// cost, against the process's CPU time in the window, or one CPU's
	// when that is unknown: Overhead.BudgetShare).
	Cost float64
	// CPU is the same time as a share of one CPU's: what governFloor
	// weighs (a function costly only against an idle process's CPU time
	// is not worth a window).
	CPU float64
}

// Sampling sums up what sampling did over a run.
type Sampling struct {
	// Budget is Options.MaxOverhead.
	Budget float64
	// Functions are the functions traced in windows, costliest first.
	Functions []SampledFunction
	// Windows counts the windows; Traced is the time they were open
	// (closing included), of Elapsed, and Open the time they took calls
	// (from their entry probes' attach to their closing).
	Windows               int
	Traced, Open, Elapsed time.Duration
	// Cut counts the calls cut: still open when their window's probes
	// went, or ended unwound (their return may have gone with the
	// probes: Builder.UnwoundCut), with the calls open inside them.
	// Closing is the longest a window's closing took (governor.MaxClosing at
	// most).
	Cut     uint64
	Closing time.Duration
	// Stalled is the time the windows' perf events (kernels without
	// uprobe_multi links) took to attach and detach, counted against the
	// budget as lost to the traced code: their hits then are not counted.
	Stalled time.Duration
	// Missed sums the estimates of the calls of sampled functions nested
	// in calls traced whole that went unseen between the windows
	// (Call.Missed); MissedFloors counts the calls whose estimate is a
	// floor, MissedUnknown those no window covered.
	Missed, MissedFloors, MissedUnknown uint64
	// SchedWindowed says that --why's probes on the scheduler were
	// attached only in the windows, and Unsplit counts the calls they
	// missed whole, left without a split (calls they saw in part have
	// their time outside unknown, and are partial).
	SchedWindowed bool
	Unsplit       uint64
	// ExitWindowed says that the goroutine-exit probe was attached only
	// in the windows: it cost too much traced whole (a process that
	// starts and ends many goroutines).
	ExitWindowed bool
	// FirstDelay is how long the run waited, or was to wait, before its
	// first window: what the budget takes to pay for one (a session's
	// first run only).
	FirstDelay time.Duration
	// Warnings say where the budget could not be kept.
	Warnings []string
}

// SampledFunction is one function traced in windows.
type SampledFunction struct {
	Func *Function
	// Rate is its call rate before the trace.
	Rate CallRate
	// Calls counts its calls reported (whole); Cut those cut: open when
	// their window's probes went (or when it moved to the windows), or
	// ended unwound (see Sampling.Cut).
	Calls, Cut uint64
	// Moved is when a function traced whole that became costly during
	// the trace stopped being traced whole (CLOCK_MONOTONIC ns; 0 for a
	// function sampled from its start), and Reaction how long after its
	// probes' cost rose past the budget, as far as gi knows: from the
	// last check that found the cost of the functions traced whole
	// within it (the watch at each drain, watch.go; 0 when the move came
	// from the governor's check, every governor.Period).
	Moved    uint64
	Reaction time.Duration
}

// TracedShare is the share of the run the windows covered.
func (s Sampling) TracedShare() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return min(1, float64(s.Traced)/float64(s.Elapsed))
}

// OpenShare is the share of the run the windows were open, taking calls
// (closing, they only finish those): what estimates scale by.
func (s Sampling) OpenShare() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return min(1, float64(s.Open)/float64(s.Elapsed))
}

// EstimatedCalls estimates f's calls over the whole run from those seen
// in the windows, which took calls for OpenShare of it.
func (s Sampling) EstimatedCalls(f SampledFunction) float64 {
	if s.Open <= 0 {
		return 0
	}
	return float64(f.Calls) * float64(s.Elapsed) / float64(s.Open)
}

// entryProbes returns the entry probes of functions among probes from
// first on whose hits are counted (a growable session counts so many).
func (s *Session) entryProbes(first int) []int {
	var idx []int
	for i := first; i < len(s.probes) && i < int(s.objs.Hits.MaxEntries()); i++ {
		if p := s.probes[i]; p.fn != nil && p.kind == bpf.KindEntry {
			idx = append(idx, i)
		}
	}
	return idx
}

// pseudoProbes returns the probe sets counted as functions of their own:
// the scheduler's (Options.Why) and, with exit, the goroutine-exit probe.
func (s *Session) pseudoProbes(exit bool) []pseudoProbes {
	var out []pseudoProbes
	if len(s.schedIdx) > 0 {
		out = append(out, pseudoProbes{fn: s.schedFunc, idx: s.schedIdx})
	}
	if exit && s.exitFunc != nil {
		out = append(out, pseudoProbes{fn: s.exitFunc, idx: []int{s.exitIdx}})
	}
	return out
}

// probeFunc is the function probe i counts for: its own, or the
// goroutine-exit probe's stand-in (s.exitFunc).
func (s *Session) probeFunc(i int) *Function {
	if s.exitFunc != nil && i == s.exitIdx {
		return s.exitFunc
	}
	return s.probes[i].fn
}

// pseudoProbes are probes that are not a traced function's, counted and
// costed as one (a Function of their own): the scheduler's probes
// (Options.Why), the goroutine-exit probe.
type pseudoProbes struct {
	fn  *Function
	idx []int
}

// countCalls attaches a counting probe at the entry probes idx (one per
// function, s.entryProbes), and at the probes of pseudo, for countWindow
// or less (countFor), and returns their call rates: each pseudo set's as
// those of its Function, its hits per second, and their cost.
func (s *Session) countCalls(idx []int, pseudo ...pseudoProbes) ([]CallRate, error) {
	nfuncs := len(idx)
	idx = slices.Clip(idx)
	for _, ps := range pseudo {
		idx = append(idx, ps.idx...)
	}
	if s.objs.GiCount == nil {
		return nil, errors.New("the counting program is not loaded")
	}
	before, err := s.readHits(idx)
	if err != nil {
		return nil, err
	}
	// The counting probes' hits, until they are detached (perf events
	// count on for their detach's grace periods), are costed as theirs
	// (meter.counted), on every path.
	defer func() {
		if closed, err := s.readHits(idx); err == nil {
			counted := make(map[int]uint64, len(idx))
			for i, pi := range idx {
				counted[pi] = closed[i] - before[i]
			}
			s.meter.addCounted(counted)
		}
	}()
	links, err := s.linksFor(s.exe, s.objs.GiCount, idx, s.UprobeMulti)
	if err != nil {
		closeLinks(links)
		return nil, err
	}
	// Counted from when all the probes are in: attaching takes tens of
	// milliseconds, in which the first probes count and the last do not.
	// The CPU clock first: reading every thread's time takes
	// milliseconds with hundreds of threads, which the hits would count
	// and the times not.
	var clock *proc.CPUClock
	if s.Opts.PID > 0 {
		clock, _ = proc.NewCPUClock(s.Opts.PID)
	}
	from, err := s.readHits(idx)
	if err != nil {
		closeLinks(links)
		return nil, err
	}
	start := time.Now()
	after, err := s.countFor(idx, from, start)
	wall := time.Since(start)
	var cpu time.Duration
	if clock != nil {
		cpu, _ = clock.Read()
	}
	// Detached before the trace's probes go where these are, which would
	// count every hit twice meanwhile.
	if cerr := closeLinks(links); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// n hits that would have cost spent traced whole, against the CPU
	// time the process spent: a function whose counting probe already
	// took its caller's every cycle is counted at the rate the probe
	// allowed, and found costly all the same.
	rate := func(fn *Function, n uint64, spent time.Duration) CallRate {
		r := CallRate{Func: fn, PerSecond: float64(n) / wall.Seconds(), CPU: spent.Seconds() / wall.Seconds()}
		if cpu > 0 {
			r.Cost = spent.Seconds() / cpu.Seconds()
		} else {
			r.Cost = spent.Seconds() / wall.Seconds() // one CPU's worth
		}
		return r
	}
	rates := make([]CallRate, 0, nfuncs+len(pseudo))
	for i, pi := range idx[:nfuncs] {
		fn := s.probes[pi].fn
		n := after[i] - from[i]
		rates = append(rates, rate(fn, n, time.Duration(n)*s.callCost(fn)))
	}
	// Each pseudo set's probes cost their hits, each a trap and a
	// program run.
	i := nfuncs
	for _, ps := range pseudo {
		var hits uint64
		var spent time.Duration
		for _, pi := range ps.idx {
			n := after[i] - from[i]
			i++
			hits += n
			spent += time.Duration(n) * (s.meter.costs.of(s.probes[pi].class) + programEstimate)
		}
		rates = append(rates, rate(ps.fn, hits, spent))
	}
	return rates, nil
}

// countFor lets the counting probes at idx (whose hits were before when
// they were all in, at start) count for countWindow, and returns their
// hits then. Tracing (not gi funcs), it stops early once their hits have
// cost the process countBudget: a function called a billion times a
// second, each call a trap, would otherwise lose most of 50 ms to the
// counting (over a few seconds' trace, a 1% budget's worth); 10 ms show
// it hot all the same, and a function too rare to be counted by then is
// cheap (the governor watches it during the trace).
func (s *Session) countFor(idx []int, before []uint64, start time.Time) ([]uint64, error) {
	if !s.Opts.countOnly {
		for _, at := range countChecks {
			time.Sleep(time.Until(start.Add(at)))
			hits, err := s.readHits(idx)
			if err != nil {
				return nil, err
			}
			var spent time.Duration
			for i, pi := range idx {
				spent += time.Duration(hits[i]-before[i]) * (s.meter.costs.of(s.probes[pi].class) + countProgram)
			}
			if spent >= countBudget {
				return hits, nil
			}
		}
	}
	time.Sleep(time.Until(start.Add(countWindow)))
	return s.readHits(idx)
}

// CountCalls counts the calls of the functions opts selects in process
// opts.PID for a short window (an entry probe that only counts, 50 ms)
// and attaches nothing else: the call rates gi funcs shows, before
// anything is traced.
func CountCalls(opts Options) ([]CallRate, error) {
	if opts.PID <= 0 && opts.Process == nil {
		return nil, errors.New("counting calls needs a process")
	}
	opts.countOnly = true
	s, err := Open(opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Rates, nil
}

// partition chooses the functions to sample among rates, beside functions
// traced whole already that cost whole (wholeCPU of one CPU), as
// governor.Partition does, and marks them Sampled.
func partition(rates []CallRate, budget, whole, wholeCPU float64) []CallRate {
	costs := make([]governor.Cost, len(rates))
	for i, r := range rates {
		costs[i] = governor.Cost{Share: r.Cost, CPU: r.CPU}
	}
	var sampled []CallRate
	for _, i := range governor.Partition(costs, budget, governor.Cost{Share: whole, CPU: wholeCPU}) {
		rates[i].Func.Sampled = true
		sampled = append(sampled, rates[i])
	}
	return sampled
}

// sampler runs the windows of the sampled functions.
type sampler struct {
	s      *Session
	budget float64
	// progs are the programs of the probe groups.
	progs []*ebpf.Program
	// ends receives, after each window's probes are detached, the time
	// (CLOCK_MONOTONIC ns) it closed: calls of sampled functions begun
	// by then and still open are cut.
	ends chan uint64
	// sched are the scheduler's probes when they are attached in the
	// windows (Options.Why); covFrom and covUntil (under covMu) are when
	// the last window had them all attached, and when their detaching
	// began (0 while attached). Run reads them before each event it
	// passes on: the time is read under the lock, so an event later than
	// covUntil is read after it is set, whatever the channels' order.
	sched             []int
	covMu             sync.Mutex
	covFrom, covUntil uint64

	mu sync.Mutex
	// groups are the sampled functions' probes by program (a growable
	// session adds to them: Session.Add).
	groups []probeGroup
	// spans are the windows' open times, oldest first (maxSpans kept).
	spans   []span
	report  Sampling
	started time.Time // when run began
	id      uint32
	// cost is what the probes windowed would cost attached whole (their
	// CallRate.Cost summed): what a run's first window is expected to
	// cost (firstDelay).
	cost float64
	// pace sets the windows' length and period, and how long their
	// closings wait.
	pace *governor.Pacer
	// last is the overhead at the last window's end, or at the opening
	// of a run's first window (fresh: none opened yet in this run).
	last  Overhead
	fresh bool
}

func newSampler(s *Session, budget float64) *sampler {
	sm := &sampler{s: s, budget: budget, ends: make(chan uint64, 16), pace: governor.NewPacer(budget)}
	sm.report.Budget = budget
	objs := s.objs
	sm.progs = []*ebpf.Program{objs.GiEntry, objs.GiEntryReturn, objs.GiReturn, objs.GiGoexit}
	sm.groups = make([]probeGroup, len(sm.progs))
	return sm
}

// add has the sampler attach the probes of groups in its windows from the
// next one on: those of the functions sampled.
// mv, if set, says they were traced whole until then.
func (sm *sampler) add(sampled []CallRate, groups []probeGroup, mv *movedNote) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, r := range sampled {
		f := SampledFunction{Func: r.Func, Rate: r}
		if mv != nil {
			f.Moved, f.Reaction = mv.at, mv.reaction
		}
		sm.report.Functions = append(sm.report.Functions, f)
		sm.cost += r.Cost
	}
	for i, g := range groups {
		sm.groups[i].name = g.name
		sm.groups[i].idx = append(sm.groups[i].idx, g.idx...)
	}
}

// exitWindowed records that the goroutine-exit probe, which costs cost
// traced whole, is attached in the windows.
func (sm *sampler) exitWindowed(cost float64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.report.ExitWindowed = true
	sm.cost += cost
}

// schedWindowed records that the scheduler's probes (Options.Why), which
// cost cost attached whole, are attached in the windows.
func (sm *sampler) schedWindowed(idx []int, cost float64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.sched = idx
	sm.report.SchedWindowed = true
	sm.cost += cost
}

// firstDelay is how long a session's first window waits: as long as the
// budget takes to pay for it at what the counted calls say its probes
// cost (governor.Pacer.FirstDelay); a later run of the session opens its
// first window at once, its cost known.
func (sm *sampler) firstDelay() time.Duration {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.id > 0 {
		return 0
	}
	return sm.pace.FirstDelay(sm.cost)
}

// probeGroups returns the sampled functions' probes by program, as of now.
func (sm *sampler) probeGroups() []probeGroup {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := make([]probeGroup, len(sm.groups))
	for i, g := range sm.groups {
		out[i] = probeGroup{name: g.name, idx: slices.Clone(g.idx)}
	}
	return out
}

// run opens and closes windows until ctx is done, then closes the one
// open, if any.
func (sm *sampler) run(ctx context.Context) {
	start := time.Now()
	sm.mu.Lock()
	// A report per run.
	sm.started = start
	sm.report.Windows, sm.report.Traced, sm.report.Open, sm.report.Elapsed, sm.report.Stalled, sm.report.Closing = 0, 0, 0, 0, 0, 0
	sm.fresh = true
	sm.mu.Unlock()
	defer func() {
		sm.mu.Lock()
		sm.report.Elapsed = time.Since(start)
		sm.mu.Unlock()
	}()
	first := sm.firstDelay()
	sm.mu.Lock()
	sm.report.FirstDelay = first
	sm.mu.Unlock()
	next := time.Now().Add(first)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		opened := time.Now()
		if err := sm.runWindow(ctx); err != nil {
			sm.mu.Lock()
			sm.report.Warnings = append(sm.report.Warnings, fmt.Sprintf("sampling stopped: %v", err))
			sm.mu.Unlock()
			return
		}
		sm.mu.Lock()
		next = opened.Add(sm.pace.Period())
		sm.mu.Unlock()
	}
}

// runWindow opens one window, lets it run its length, closes it, and
// sets the next window's length and period from what it cost.
func (sm *sampler) runWindow(ctx context.Context) error {
	s := sm.s
	sm.id++
	if err := s.objs.Window.Put(uint32(0), bpf.SampleWindow{State: bpf.WindowOpen, Id: sm.id}); err != nil {
		return fmt.Errorf("open window: %w", err)
	}
	if sm.fresh {
		// The first window of a run: what the probes cost before it,
		// between runs, is not this period's.
		var err error
		if sm.last, err = s.Overhead(); err != nil {
			return err
		}
		sm.fresh = false
	}
	opened, err := sm.countSampled()
	if err != nil {
		return err
	}
	start := time.Now()
	var links []link.Link
	// The scheduler's probes before the functions': a call is split
	// when they saw it whole.
	if len(sm.sched) > 0 {
		l, err := s.linksFor(s.exe, s.objs.GiSched, sm.sched, s.UprobeMulti)
		links = append(links, l...)
		if err != nil {
			closeLinks(links)
			return err
		}
		sm.covMu.Lock()
		sm.covFrom, sm.covUntil = uint64(monotonicNow()), 0
		sm.covMu.Unlock()
	}
	// detach ends the scheduler's probes' coverage before any probe of
	// the window goes, then detaches them all: on every path out.
	detach := func() error {
		sm.endCoverage()
		sm.closeSpan(uint64(monotonicNow()))
		return closeLinks(links)
	}
	// The RET probes first: a return whose entry the window did not see
	// is dropped, but an entry whose RET is not yet probed would leave
	// its call open.
	groups := sm.probeGroups()
	for _, i := range []int{returnGroup, entryReturnGroup, entryGroup, goexitGroup} {
		g := groups[i]
		if len(g.idx) == 0 {
			continue
		}
		if i == entryGroup || (i == entryReturnGroup && len(groups[entryGroup].idx) == 0) {
			// Calls are reported from their entries' first probe on.
			sm.openSpan(uint64(monotonicNow()))
		}
		l, err := s.linksFor(s.exe, sm.progs[i], g.idx, s.UprobeMulti)
		links = append(links, l...)
		if err != nil {
			detach()
			return err
		}
	}
	attached := time.Since(start)
	sm.mu.Lock()
	window := sm.pace.Window()
	sm.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(window):
	}
	// Closing: only calls inside the window's open calls, until those
	// returned or the deadline; a call traced whole sees no more of the
	// sampled calls nested in it.
	sm.closeSpan(uint64(monotonicNow()))
	if err := s.objs.Window.Put(uint32(0), bpf.SampleWindow{State: bpf.WindowClosing, Id: sm.id}); err != nil {
		detach()
		return fmt.Errorf("close window: %w", err)
	}
	sm.closeWindow(ctx, opened)
	length := time.Since(start)
	detaching := time.Now()
	err = detach()
	closed := uint64(monotonicNow())
	// A perf event per probe (kernels before 6.6): while they are
	// attached and detached, one by one, breakpoints sit in the code
	// without the programs that count their hits (the hot loop of
	// TestSamplingKeepsBudget lost 21% of its pace to it, 1.5% counted).
	// Their attach and detach are taken as lost to the traced code (the
	// closing's hits are counted).
	var stalled time.Duration
	if !s.UprobeMulti {
		stalled = attached + time.Since(detaching)
	}
	sm.ends <- closed
	after, oerr := s.Overhead()
	if err == nil {
		err = oerr
	}
	if err != nil {
		return err
	}
	sm.adapt(after.Sub(sm.last), length, stalled)
	sm.last = after
	return nil
}

// closeWindow waits, while the window closes, for the calls it opened to
// return (governor.Closing decides until when); once ctx is done (the run
// ends), the wait only.
func (sm *sampler) closeWindow(ctx context.Context, opened [2]uint64) {
	start := time.Now()
	sm.mu.Lock()
	closing := governor.NewClosing(start, sm.pace.ClosingWait())
	sm.mu.Unlock()
	for {
		n, err := sm.countSampled()
		if err != nil {
			break
		}
		entered, back := n[bpf.SampledOpened]-opened[bpf.SampledOpened], n[bpf.SampledReturned]-opened[bpf.SampledReturned]
		if closing.Done(time.Now(), entered, back, ctx.Err() != nil) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	sm.closed(time.Since(start))
}

// closed records that a closing took took, and sets the next closing's
// wait from the durations of the sampled calls reported lately
// (governor.Pacer.Closed).
func (sm *sampler) closed(took time.Duration) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.report.Closing = max(sm.report.Closing, took)
	sm.pace.Closed()
}

// observe records the duration of a sampled call reported, not nested in
// another sampled call: what the closings wait for.
func (sm *sampler) observe(c *Call) {
	if c.End < c.Start {
		return
	}
	for p := c.Parent; p != nil; p = p.Parent {
		if p.Func.Sampled {
			return
		}
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.pace.Observe(time.Duration(c.End - c.Start))
}

// endCoverage ends the scheduler's probes' coverage now, before they are
// detached, if it is open (none is without them); the time is read under
// the lock (see covMu).
func (sm *sampler) endCoverage() {
	sm.covMu.Lock()
	defer sm.covMu.Unlock()
	if sm.covFrom != 0 && sm.covUntil == 0 {
		sm.covUntil = uint64(monotonicNow())
	}
}

// schedCoverage returns when the scheduler's probes were last attached
// whole, and when they began to be detached (0 while attached); 0, 0
// before the first window.
func (sm *sampler) schedCoverage() (from, until uint64) {
	sm.covMu.Lock()
	defer sm.covMu.Unlock()
	return sm.covFrom, sm.covUntil
}

// countSampled reads the sampled_count counters, summed over CPUs.
func (sm *sampler) countSampled() ([2]uint64, error) {
	var out [2]uint64
	for k := range uint32(2) {
		n, err := sumPerCPU(sm.s.objs.SampledCount, k)
		if err != nil {
			return out, fmt.Errorf("sampled calls: %w", err)
		}
		out[k] = n
	}
	return out, nil
}

// adapt sets the next window from o, the overhead over the last period
// (from the end of the window before to the end of this one), the
// window's length, open to closed, and the time its perf events stalled
// the code (governor.Pacer.Adapt): paced by the share of the CPU time of
// the thread the probes slowed most, or the budget's share where none
// was busy.
func (sm *sampler) adapt(o Overhead, length, stalled time.Duration) {
	sm.mu.Lock()
	sm.report.Windows++
	sm.report.Traced += length
	sm.report.Stalled += stalled
	share := o.BudgetShare()
	if _, worst, ok := o.WorstThread(); ok {
		share = worst
	}
	over := sm.pace.Adapt(governor.WindowCost{Interval: o.Interval, Share: share, Length: length, Stalled: stalled})
	sm.mu.Unlock()
	switch {
	case over != nil && over.Stalled > 0:
		sm.warn(fmt.Sprintf("without uprobe_multi links (kernel 6.6+) each window attaches and detaches a perf event per probe, %v here, while the probed code runs slowed and unmeasured: with the windows %v apart that still took %.1f%% of a thread, over the budget; narrow the pattern", over.Stalled.Round(time.Millisecond), governor.MaxPeriod, 100*over.Share))
	case over != nil:
		sm.warn(fmt.Sprintf("the probes took %.1f%% of a thread's CPU time with the shortest windows, over the budget: narrow the pattern", 100*over.Share))
	}
}

// overBudget says, if the run's probes took more than the budget, by how
// much: their measured share since the run began (at), of the busiest
// thread where one was busy, plus the time the windows' perf events took
// to attach and detach, lost to the traced code. "" within the budget.
func (r Sampling) overBudget(s *Session, at Overhead) string {
	o, err := s.Overhead()
	if err != nil || r.Elapsed <= 0 {
		return ""
	}
	d := o.Sub(at)
	share := d.BudgetShare()
	if _, worst, ok := d.WorstThread(); ok {
		share = worst
	}
	stalled := float64(r.Stalled) / float64(r.Elapsed)
	if share+stalled <= r.Budget {
		return ""
	}
	w := fmt.Sprintf("the probes took %.1f%% over the run, over the %.3g%% budget", 100*(share+stalled), 100*r.Budget)
	if r.Stalled > 0 {
		w += fmt.Sprintf(", %.1f%% of it the windows' perf events' attach and detach (no uprobe_multi links before kernel 6.6; the windows space out in a longer trace)", 100*stalled)
	}
	return w
}

// warn records a warning once.
func (sm *sampler) warn(w string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, x := range sm.report.Warnings {
		if x == w {
			return
		}
	}
	sm.report.Warnings = append(sm.report.Warnings, w)
}

// Sampling returns what sampling did so far (nil when nothing is
// sampled): the windows, the time they covered and the time elapsed; its
// functions' Calls, Cut and Unsplit are counted by Run, and left 0 here.
func (s *Session) Sampling() *Sampling {
	if s.sampler == nil {
		return nil
	}
	r := s.sampler.snapshot()
	return &r
}

// snapshot returns the sampling report so far.
func (sm *sampler) snapshot() Sampling {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	r := sm.report
	if r.Elapsed == 0 && !sm.started.IsZero() {
		r.Elapsed = time.Since(sm.started) // still running
	}
	r.Functions = append([]SampledFunction(nil), r.Functions...)
	r.Warnings = append([]string(nil), r.Warnings...)
	return r
}

// maxCountedPerfProbes bounds the functions whose calls are counted on a
// kernel without uprobe_multi links, where each counting probe is a perf
// event whose detach waits for the kernel's grace periods.
const maxCountedPerfProbes = 64

// planSampling counts the calls of the traced functions and chooses those
// to sample under Options.MaxOverhead: it returns groups without their
// probes, and prepares the sampler that attaches those in windows.
func (s *Session) planSampling(groups []probeGroup) []probeGroup {
	if !s.UprobeMulti && len(s.Selection.Functions) > maxCountedPerfProbes {
		s.Warnings = append(s.Warnings, notEnforcedPerf(len(s.Selection.Functions)))
		return groups
	}
	rates, err := s.countCalls(s.entryProbes(0), s.pseudoProbes(true)...)
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("--max-overhead not enforced: counting calls: %v", err))
		return groups
	}
	// The scheduler's probes and the goroutine-exit probe compete for
	// the budget as functions of their own, and are attached in windows
	// if partition samples them.
	sampled := partition(rates, s.Opts.MaxOverhead, 0, 0)
	s.wholeCost, s.wholeCPU = wholeCost(rates)
	isSched := func(r CallRate) bool { return r.Func == s.schedFunc }
	if i := slices.IndexFunc(rates, isSched); i >= 0 {
		r := rates[i]
		s.SchedRate, s.schedWindowed = &r, r.Func.Sampled
	}
	isExit := func(r CallRate) bool { return s.exitFunc != nil && r.Func == s.exitFunc }
	if i := slices.IndexFunc(rates, isExit); i >= 0 {
		r := rates[i]
		s.ExitRate = &r
	}
	isPseudo := func(r CallRate) bool { return isSched(r) || isExit(r) }
	s.Rates = slices.DeleteFunc(rates, isPseudo)
	sampled = slices.DeleteFunc(sampled, isSched)
	whole := s.sampleGroups(groups, sampled, nil)
	var pseudo float64 // the scheduler's and goroutine exits' probes
	for _, r := range []*CallRate{s.SchedRate, s.ExitRate} {
		if r != nil {
			pseudo += r.Cost
		}
	}
	if w := traceWholeHint(s.Rates, pseudo); w != "" {
		s.Warnings = append(s.Warnings, w)
	}
	if s.schedWindowed {
		s.sampler.schedWindowed(s.schedIdx, s.SchedRate.Cost)
		s.Warnings = append(s.Warnings, fmt.Sprintf("over the %.3g%% overhead budget, --why's probes on the scheduler (%.0f hits/s, %.0f%% if kept) are attached in sampling windows: only the calls they saw whole are split", 100*s.Opts.MaxOverhead, s.SchedRate.PerSecond, 100*s.SchedRate.Cost))
	}
	return whole
}

// sampleAdded does for the functions Session.Add brings, n of them whose
// probes are those from first on, what planSampling does for the first:
// it counts their calls and samples the costliest if, beside the
// functions traced whole already, they would take the trace over the
// budget.
func (s *Session) sampleAdded(groups []probeGroup, first, n int) []probeGroup {
	if !s.UprobeMulti && n > maxCountedPerfProbes {
		s.Warnings = append(s.Warnings, notEnforcedPerf(n))
		return groups
	}
	rates, err := s.countCalls(s.entryProbes(first))
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("--max-overhead not enforced on the functions added: counting calls: %v", err))
		return groups
	}
	sampled := partition(rates, s.Opts.MaxOverhead, s.wholeCost, s.wholeCPU)
	cost, cpu := wholeCost(rates)
	s.wholeCost += cost
	s.wholeCPU += cpu
	s.Rates = append(s.Rates, rates...)
	return s.sampleGroups(groups, sampled, nil)
}

// traceWholeHint says, when some of the functions counted in rates are
// sampled, how many are traced whole and what it would take to trace
// every call whole: the budget to give (--max-overhead, rounded up to a
// multiple of 5% above what the probes would take, the functions' and
// pseudo, the other probes') and that share of the process's CPU time.
func traceWholeHint(rates []CallRate, pseudo float64) string {
	sampled := 0
	total := pseudo
	for _, r := range rates {
		total += r.Cost
		if r.Func != nil && r.Func.Sampled {
			sampled++
		}
	}
	if sampled == 0 {
		return ""
	}
	budget := 5 * math.Ceil((100*total+1)/5)
	return fmt.Sprintf("%d of %d functions traced whole; to trace every call whole: --max-overhead %.0f%% (the probes would take about %.0f%% of the process's CPU time)",
		len(rates)-sampled, len(rates), budget, 100*total)
}

// notEnforcedPerf is the warning that the budget is not kept on n
// functions without uprobe_multi links.
func notEnforcedPerf(n int) string {
	return fmt.Sprintf("--max-overhead not enforced: without uprobe_multi links (kernel 6.6+), counting the calls of %d functions takes a perf event each, whose detach waits 0.1-0.2 s; trace at most %d functions", n, maxCountedPerfProbes)
}

// wholeCost is what the functions of rates partition did not sample cost
// traced whole: a share of the process's CPU time, and of one CPU's.
func wholeCost(rates []CallRate) (cost, cpu float64) {
	for _, r := range rates {
		if !r.Func.Sampled {
			cost += r.Cost
			cpu += r.CPU
		}
	}
	return cost, cpu
}

// movedNote says when functions traced whole that became costly during a
// run were moved to the windows (demote).
type movedNote struct {
	// at is when they stopped reporting (CLOCK_MONOTONIC ns); reaction
	// how long after their cost rose past the budget (0: not known).
	at       uint64
	reaction time.Duration
}

// sampleGroups returns groups without the probes of the sampled functions
// (marked Sampled), and hands those to the sampler, made if there is none
// yet (none is made without a function sampled, unless the scheduler's
// probes are). mv, if set, says that they were traced whole and became
// costly during the trace, in the warning.
func (s *Session) sampleGroups(groups []probeGroup, sampled []CallRate, mv *movedNote) []probeGroup {
	if len(sampled) == 0 && (!s.schedWindowed || s.sampler != nil) {
		return groups
	}
	if s.CookieByIP {
		// The cookies found by address carry the sampled mark too.
		if bias, err := s.probeBias(); err == nil {
			for _, g := range groups {
				for _, pi := range g.idx {
					if p := s.probes[pi]; p.fn != nil && p.fn.Sampled {
						_ = s.objs.Cookies.Put(p.site+bias, s.cookie(pi))
					}
				}
			}
		}
	}
	whole := make([]probeGroup, len(groups))
	windowed := make([]probeGroup, len(groups))
	for i, g := range groups {
		whole[i].name, windowed[i].name = g.name, g.name
		for _, pi := range g.idx {
			if fn := s.probeFunc(pi); fn != nil && fn.Sampled {
				windowed[i].idx = append(windowed[i].idx, pi)
			} else {
				whole[i].idx = append(whole[i].idx, pi)
			}
		}
	}
	var exit *CallRate
	if i := slices.IndexFunc(sampled, func(r CallRate) bool { return s.exitFunc != nil && r.Func == s.exitFunc }); i >= 0 {
		exit = &sampled[i]
		sampled = slices.Delete(slices.Clone(sampled), i, i+1)
	}
	if s.sampler == nil {
		s.sampler = newSampler(s, s.Opts.MaxOverhead)
	}
	s.sampler.add(sampled, windowed, mv)
	names := make([]string, 0, len(sampled))
	for _, r := range sampled {
		names = append(names, fmt.Sprintf("%s (%.0f calls/s, %.0f%% if traced whole)", r.Func.Name, r.PerSecond, 100*r.Cost))
	}
	switch {
	case len(names) > 0 && mv != nil:
		w := fmt.Sprintf("%s became costly during the trace (over the %.3g%% overhead budget): traced in sampling windows from then on", joinNames(names), 100*s.Opts.MaxOverhead)
		if mv.reaction > 0 {
			whose := "its"
			if len(names) > 1 {
				whose = "their"
			}
			w += fmt.Sprintf(", %v after %s cost rose", mv.reaction.Round(time.Millisecond), whose)
		}
		s.Warnings = append(s.Warnings, w)
	case len(names) > 0:
		s.Warnings = append(s.Warnings, fmt.Sprintf("over the %.3g%% overhead budget, traced in sampling windows: %s", 100*s.Opts.MaxOverhead, joinNames(names)))
	}
	if exit != nil {
		s.sampler.exitWindowed(exit.Cost)
		when := "over the %.3g%% overhead budget"
		if mv != nil {
			when = "costly during the trace (over the %.3g%% overhead budget)"
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s, the probe on goroutine exits (runtime.goexit1, %.0f exits/s, %.1f%% if kept) is attached in the sampling windows: a call of a function without RET (entry only) whose goroutine exits between windows is shown still running at the end",
			fmt.Sprintf(when, 100*s.Opts.MaxOverhead), exit.PerSecond, 100*exit.Cost))
	}
	return whole
}

// joinNames joins names with commas, the first ten and a count of the rest.
func joinNames(names []string) string {
	const shown = 10
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}
