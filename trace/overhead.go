package trace

import (
	"debug/elf"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/proc"
)

// Program kinds of the programs' cost map (GI_COST_* in gi.bpf.c).
const (
	costEntry = iota
	costReturn
	costEntryReturn
	costGoexit
	costSignal
	costSched
	costKinds
)

// Overhead is what the probes cost the traced process over an interval:
// each hit's traps (by the instruction the probe sits on, at the
// calibrated ProbeCosts) plus the time the programs ran, which they
// measure themselves, against the CPU time the process's threads spent,
// probes included.
type Overhead struct {
	// Interval is the wall time measured over.
	Interval time.Duration
	// TargetCPU is the CPU time of the process's threads, probes included
	// (0 when no single process is traced).
	TargetCPU time.Duration
	// Probes is the time the probes took from the process's threads.
	Probes time.Duration
	// Hits counts probe hits, the goroutine-exit probe's included.
	Hits uint64
	// Functions are the traced functions' shares, in Selection order.
	Functions []FunctionCost
	// Exit is the goroutine-exit probe's share (runtime.goexit1, hit at
	// every goroutine's exit, whatever is traced); its Func stands for it
	// (nil without the probe).
	Exit FunctionCost
	// Signals counts the signals sent to read float registers, each
	// costing the thread ProbeCosts.Signal.
	Signals uint64
	// Costs are the per-hit figures used.
	Costs ProbeCosts
	// Threads are the process's threads the probes took time from, with
	// that time and their CPU time (nil when only the process's total is
	// known).
	Threads []ThreadCost
}

// ThreadCost is one thread's share of an Overhead.
type ThreadCost struct {
	// TID is the thread's id (in gi's PID namespace).
	TID int
	// Probes is the time probes took from it; CPU its CPU time, probes
	// included.
	Probes, CPU time.Duration
}

// minThreadCPU is the CPU time below which a thread's share is not
// judged: a thread that barely ran; nor is that of a thread that ran less
// than minThreadShare of one CPU over the interval. A mostly idle thread
// that runs a light function traced whole (a few microseconds of probes
// a call, a few calls a second) would otherwise be the "worst": 10% of a
// thread that ran 10 ms in 12 s, stretching the windows of a hot loop on
// another thread to the longest period, and warning of a budget exceeded
// that cost the process a fraction of a percent.
const (
	minThreadCPU   = 5 * time.Millisecond
	minThreadShare = 0.1
)

// WorstThread returns the thread whose CPU time the probes took the
// largest share of, with the share: the slowdown of the code the probes
// slow most. ok is false when no thread ran long enough to judge.
func (o Overhead) WorstThread() (t ThreadCost, share float64, ok bool) {
	least := max(minThreadCPU, time.Duration(minThreadShare*float64(o.Interval)))
	for _, th := range o.Threads {
		if th.CPU < least {
			continue
		}
		if s := min(1, float64(th.Probes)/float64(th.CPU)); !ok || s > share {
			t, share, ok = th, s, true
		}
	}
	return t, share, ok
}

// FunctionCost is one function's share of an Overhead.
type FunctionCost struct {
	Func *Function
	// Hits counts its probes' hits: calls at its entry, returns at its RETs.
	Hits uint64
	// Time is what they cost.
	Time time.Duration
}

// Share is the fraction of the process's CPU time its probes took: the
// fraction of its throughput tracing costs a CPU-bound process. 0 when
// the CPU time is unknown.
func (o Overhead) Share() float64 {
	if o.TargetCPU <= 0 {
		return 0
	}
	return min(1, float64(o.Probes)/float64(o.TargetCPU))
}

// BudgetShare is the share Options.MaxOverhead bounds: the probes' time
// against the process's CPU time (Share: the throughput a CPU-bound
// process loses, and for one mostly waiting, the CPU time per request its
// work takes more), or against one CPU when that is unknown.
func (o Overhead) BudgetShare() float64 {
	if o.TargetCPU > 0 {
		return o.Share()
	}
	if o.Interval <= 0 {
		return 0
	}
	return min(1, float64(o.Probes)/float64(o.Interval))
}

// Sub returns o less an earlier measurement of the same session: the
// overhead between the two.
func (o Overhead) Sub(before Overhead) Overhead {
	d := Overhead{Interval: o.Interval - before.Interval, TargetCPU: o.TargetCPU - before.TargetCPU,
		Probes: o.Probes - before.Probes, Hits: o.Hits - before.Hits, Signals: o.Signals - before.Signals, Costs: o.Costs}
	prev := make(map[int]ThreadCost, len(before.Threads))
	for _, t := range before.Threads {
		prev[t.TID] = t
	}
	for _, t := range o.Threads {
		b := prev[t.TID]
		d.Threads = append(d.Threads, ThreadCost{TID: t.TID, Probes: t.Probes - b.Probes, CPU: t.CPU - b.CPU})
	}
	d.Exit = o.Exit
	d.Exit.Hits -= before.Exit.Hits
	d.Exit.Time -= before.Exit.Time
	d.Functions = make([]FunctionCost, len(o.Functions))
	for i, f := range o.Functions {
		d.Functions[i] = f
		if i < len(before.Functions) && before.Functions[i].Func == f.Func {
			d.Functions[i].Hits -= before.Functions[i].Hits
			d.Functions[i].Time -= before.Functions[i].Time
		}
	}
	return d
}

// String sums o up in one line.
func (o Overhead) String() string {
	if o.TargetCPU <= 0 {
		return fmt.Sprintf("probes took %v (%d hits); the target's CPU time is unknown", o.Probes.Round(time.Microsecond), o.Hits)
	}
	return fmt.Sprintf("probes took %.2f%% of the target's CPU time (%v of %v, %d hits)",
		100*o.Share(), o.Probes.Round(time.Microsecond), o.TargetCPU.Round(time.Microsecond), o.Hits)
}

// meter is a session's overhead measurement.
type meter struct {
	mu    sync.Mutex     // Overhead's
	clock *proc.CPUClock // nil when no single process is traced
	start time.Time
	costs ProbeCosts
	// signalClass is the class of the float-register signal probe's site.
	signalClass siteClass
	// counted are the hits the counting probes took (Session.countCalls),
	// by probe: a trap each and a counting program's run, not the
	// tracing program's whose mean cost the other hits take.
	counted map[int]uint64
}

// countProgram is what a run of the counting program is taken to cost: a
// counter's increment, a fraction of a tracing program's run.
const countProgram = 100 * time.Nanosecond

// addCounted records hits the counting probes took, by probe.
func (m *meter) addCounted(hits map[int]uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counted == nil {
		m.counted = map[int]uint64{}
	}
	for i, n := range hits {
		m.counted[i] += n
	}
}

// startMeter begins measuring the overhead of an attached session.
func (s *Session) startMeter() {
	s.meter.start = time.Now()
	if s.Opts.PID > 0 {
		if c, err := proc.NewCPUClock(s.Opts.PID); err == nil {
			s.meter.clock = c
		}
	}
	costs, err := CalibrateProbes(s.UprobeMulti)
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("probe costs not measured (%v): the overhead is estimated with %v", err, costs))
	}
	s.meter.costs = costs
	if s.floatRegs {
		s.meter.signalClass = s.siteClassAt(s.signal.site)
	}
}

// programRuns are the probe programs' runs and run time, by kind
// (costKind), summed over CPUs.
type programRuns struct{ runs, ns [costKinds]uint64 }

// mean is a kind's mean run time, 0 if none ran.
func (p *programRuns) mean(k int) time.Duration {
	if p.runs[k] == 0 {
		return 0
	}
	return time.Duration(p.ns[k] / p.runs[k])
}

// programCosts reads the programs' cost counters: the first error, if a
// kind's cannot be read, with the others read.
func (s *Session) programCosts() (programRuns, error) {
	var p programRuns
	var first error
	var costs []bpf.ProgCost
	for k := range uint32(costKinds) {
		if err := s.objs.Cost.Lookup(k, &costs); err != nil {
			if first == nil {
				first = fmt.Errorf("trace: program costs: %w", err)
			}
			continue
		}
		for _, c := range costs {
			p.runs[k] += c.Runs
			p.ns[k] += c.Ns
		}
	}
	return p, first
}

// attribute sets o's functions (Selection.Functions, and the goroutine
// exits' probe) and adds to them, and to o's totals, the hits of probes
// idx (hits[k] those of idx[k]) and what they cost: each hit the
// probe's class costs and its program's mean run (runs), or, for a hit
// the counting program made (meter.counted), that program's cost. The
// meter's lock is held.
func (s *Session) attribute(o *Overhead, idx []int, hits []uint64, runs *programRuns) {
	byFunc := make(map[*Function]int, len(s.Selection.Functions))
	o.Functions = make([]FunctionCost, len(s.Selection.Functions))
	for i, f := range s.Selection.Functions {
		o.Functions[i].Func = f
		byFunc[f] = i
	}
	o.Exit.Func = s.exitFunc
	for k, i := range idx {
		n := hits[k]
		if n == 0 {
			continue
		}
		p := s.probes[i]
		counted := min(n, s.meter.counted[i])
		t := time.Duration(n-counted)*(o.Costs.of(p.class)+runs.mean(p.costKind)) + time.Duration(counted)*(o.Costs.of(p.class)+countProgram)
		o.Hits += n
		o.Probes += t
		if j, ok := byFunc[p.fn]; ok {
			o.Functions[j].Hits += n
			o.Functions[j].Time += t
		} else if p.kind == bpf.KindGoexit {
			o.Exit.Hits += n
			o.Exit.Time += t
		}
	}
}

// Overhead returns what the probes have cost the traced process since
// they were attached. It may run beside Run.
func (s *Session) Overhead() (Overhead, error) {
	s.meter.mu.Lock()
	defer s.meter.mu.Unlock()
	o := Overhead{Interval: time.Since(s.meter.start), Costs: s.meter.costs}
	if s.objs == nil || s.objs.Hits == nil {
		return o, fmt.Errorf("trace: overhead of a session not attached")
	}
	if s.meter.clock != nil {
		cpu, err := s.meter.clock.Read()
		if err != nil {
			return o, err
		}
		o.TargetCPU = cpu
	}
	s.probesMu.RLock()
	defer s.probesMu.RUnlock()
	hits := make([]uint64, len(s.probes))
	for i := range s.probes {
		n, err := sumPerCPU(s.objs.Hits, uint32(i))
		if err != nil {
			break // beyond the counters of a grown session
		}
		hits[i] = n
	}
	runs, err := s.programCosts()
	if err != nil {
		return o, err
	}
	idx := make([]int, len(hits))
	for i := range idx {
		idx[i] = i
	}
	s.attribute(&o, idx, hits, &runs)
	if s.meter.clock != nil && s.objs.ThreadCosts != nil {
		if cpu := s.meter.clock.Threads(); cpu != nil {
			var tid uint32
			var c bpf.ThreadCost
			probes := map[int]time.Duration{}
			it := s.objs.ThreadCosts.Iterate()
			for it.Next(&tid, &c) {
				probes[int(tid)] = time.Duration(c.Emulated)*o.Costs.Emulated + time.Duration(c.Stepped)*o.Costs.Stepped + time.Duration(c.Ns)
			}
			for t, c := range cpu {
				o.Threads = append(o.Threads, ThreadCost{TID: t, Probes: probes[t], CPU: c})
			}
			sort.Slice(o.Threads, func(i, j int) bool { return o.Threads[i].TID < o.Threads[j].TID })
		}
	}
	// The signal probe's hits (every signal the process takes) and the
	// signals sent to read float registers.
	if s.floatRegs {
		o.Probes += time.Duration(runs.runs[costSignal])*o.Costs.of(s.meter.signalClass) + time.Duration(runs.ns[costSignal])
		o.Signals = s.lostCount(bpf.SentSignals)
		o.Probes += time.Duration(o.Signals) * o.Costs.Signal
	}
	return o, nil
}

// siteClassAt returns the class of the instruction at link-time address
// site of the session's binary (single-stepped if it cannot be read).
func (s *Session) siteClassAt(site uint64) siteClass {
	var code [16]byte
	if _, err := s.Binary.ReadAt(code[:], site); err != nil {
		return classStepped
	}
	return classify(s.Binary.File.Machine, code[:])
}

// returnClass is the class of a RET on the session's architecture.
func (s *Session) returnClass() siteClass {
	if s.Binary.File.Machine == elf.EM_AARCH64 {
		return classify(elf.EM_AARCH64, []byte{0xc0, 0x03, 0x5f, 0xd6})
	}
	return classify(elf.EM_X86_64, []byte{0xc3})
}
