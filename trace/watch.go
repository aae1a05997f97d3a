package trace

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/bpf"
)

// Watching for a jump. The governor (govern, every governPeriod) reads
// every probe's hits and the threads' CPU times: too dear to do more than
// once a second at thousands of functions, and a function that turns hot
// just after it is traced whole at full cost until the next: a second's
// stall of every goroutine calling it, longer on a busy machine. So at
// every drain (DrainInterval), before the ring buffer is read, Run checks
// two figures: the summed cost of the probes of the functions traced
// whole, which the programs keep in one per-CPU counter (whole_cost: hits
// on emulated and on single-stepped instructions, program nanoseconds),
// and the process's CPU time (its CPU-time clock, one clock_gettime).
// Past the budget over that interval, the hits of the functions traced
// whole are read, and read again at the next check; if their cost over
// that interval is still past the budget, the costliest are moved to the
// sampling windows at once (govern, demote), tens of milliseconds after
// the cost rose. The rest stays with the governor.

// watchHoldFactor bounds what the watch's reads of the functions' hits
// (about a microsecond a probe) cost while the sum of their cost is past
// the budget and theirs are not (bursts, noise): after a confirmation
// that moved nothing, the next read waits this many times what it took.
const watchHoldFactor = 50

// watchConfirm is the shortest interval over which the hits of the
// functions traced whole are read twice to tell which went past the
// budget.
const watchConfirm = 2 * time.Millisecond

// watchSample is what a check reads.
type watchSample struct {
	at time.Time
	// cpu is the process's CPU time (0 when unknown); probes the time the
	// probes of the functions traced whole took so far.
	cpu, probes time.Duration
}

// watch is Run's check of the cost of the functions traced whole.
type watch struct {
	s *Session
	// clock is the traced process's CPU-time clock, cpuKnown whether it
	// can be read.
	clock    int32
	cpuKnown bool
	last     watchSample
	// quiet is when a check last found the cost within the budget: the
	// cost rose after it.
	quiet time.Time
	// pending is the functions' costs read, at pendingAt, when the sum
	// went past the budget, to be read again by confirm (nil: none);
	// hold is when the next such read may be.
	pending   *Overhead
	pendingAt time.Time
	hold      time.Time
	// Checks and Spent count the checks and confirmations, and the time
	// they took (the reads of the functions' hits included).
	Checks int
	Spent  time.Duration
}

// newWatch returns the watch of s's run, nil if the programs keep no
// summed cost.
func (s *Session) newWatch() *watch {
	if s.objs == nil || s.objs.WholeCost == nil || s.Opts.MaxOverhead <= 0 {
		return nil
	}
	w := &watch{s: s}
	if pid := s.Opts.PID; pid > 0 {
		// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED): the thread group's
		// summed runtime, readable for any process.
		w.clock = int32(uint32(^pid)<<3) | 2
		var ts unix.Timespec
		w.cpuKnown = unix.ClockGettime(w.clock, &ts) == nil
	}
	var err error
	if w.last, err = w.sample(); err != nil {
		return nil
	}
	w.quiet = w.last.at
	return w
}

// sample reads the process's CPU time and the summed cost of the probes
// of the functions traced whole.
func (w *watch) sample() (watchSample, error) {
	ws := watchSample{at: time.Now()}
	if w.cpuKnown {
		var ts unix.Timespec
		if unix.ClockGettime(w.clock, &ts) == nil {
			ws.cpu = time.Duration(ts.Nano())
		}
	}
	var perCPU []bpf.ThreadCost
	if err := w.s.objs.WholeCost.Lookup(uint32(0), &perCPU); err != nil {
		return ws, err
	}
	costs := w.s.meter.costs
	for _, c := range perCPU {
		ws.probes += time.Duration(c.Emulated)*costs.Emulated + time.Duration(c.Stepped)*costs.Stepped + time.Duration(c.Ns)
	}
	return ws, nil
}

// over says whether probes, the time the probes of the functions traced
// whole took over interval, in which the process ran cpu (0: unknown),
// is past the budget: over its share of the process's CPU time (of one
// CPU's when unknown), and over its share of one CPU (a burst of calls in
// a process otherwise idle is not a stall).
func (w *watch) over(probes, cpu, interval time.Duration) bool {
	if interval <= 0 {
		return false
	}
	if cpu <= 0 || !w.cpuKnown {
		cpu = interval
	}
	budget := w.s.Opts.MaxOverhead
	return float64(probes) > budget*float64(cpu) && float64(probes) > budget*float64(interval)
}

// check runs at a drain, before it. When the cost of the functions
// traced whole since the last check is past the budget, it reads their
// hits (unless it holds those of an earlier check past it, or holds off)
// and returns true: Run confirms.
func (w *watch) check() bool {
	start := time.Now()
	defer w.spent(start)
	ws, err := w.sample()
	if err != nil {
		return false
	}
	prev := w.last
	w.last = ws
	if !w.over(ws.probes-prev.probes, ws.cpu-prev.cpu, ws.at.Sub(prev.at)) {
		w.pending = nil
		w.quiet = ws.at
		return false
	}
	if w.pending != nil {
		return true
	}
	if ws.at.Before(w.hold) {
		return false
	}
	o := w.s.wholeOverhead(ws)
	w.pending, w.pendingAt = &o, ws.at
	return true
}

// confirm reads the hits of the functions traced whole again, at least
// watchConfirm after check first did (checks past the budget since), and
// returns their costs over that interval if they are past the budget,
// with when their cost rose (the last check that found it within the
// budget). If not, the first read is kept for the next check, which
// confirms over the longer interval while the sum stays past the budget
// (a thread turned hot on a loaded machine runs in slices), and the
// next read waits watchHoldFactor times what this one took.
func (w *watch) confirm() (*Overhead, time.Time) {
	if w.pending == nil {
		return nil, time.Time{}
	}
	if d := watchConfirm - time.Since(w.pendingAt); d > 0 {
		time.Sleep(d)
	}
	start := time.Now()
	defer w.spent(start)
	ws := watchSample{at: time.Now()}
	if w.cpuKnown {
		var ts unix.Timespec
		if unix.ClockGettime(w.clock, &ts) == nil {
			ws.cpu = time.Duration(ts.Nano())
		}
	}
	o := w.s.wholeOverhead(ws)
	if len(o.Functions) != len(w.pending.Functions) {
		w.pending = nil // grown meanwhile
		return nil, time.Time{}
	}
	d := o.Sub(*w.pending)
	var probes time.Duration
	for _, f := range d.Functions {
		if !f.Func.Sampled {
			probes += f.Time
		}
	}
	if d.Exit.Func != nil && !d.Exit.Func.Sampled {
		probes += d.Exit.Time
	}
	if !w.over(probes, d.TargetCPU, d.Interval) {
		w.hold = time.Now().Add(watchHoldFactor * time.Since(start))
		return nil, time.Time{}
	}
	w.pending = nil
	return &d, w.quiet
}

// spent counts a check that began at start.
func (w *watch) spent(start time.Time) {
	w.Checks++
	w.Spent += time.Since(start)
}

// moved tells the watch that functions moved to the windows: the hits it
// read before are of other links.
func (w *watch) moved() {
	w.pending = nil
}

// wholeOverhead returns the hits of the probes of the functions traced
// whole and their cost (as Overhead counts them), at the time and CPU
// time of ws: an Overhead whose Sub govern weighs.
func (s *Session) wholeOverhead(ws watchSample) Overhead {
	o := Overhead{Interval: ws.at.Sub(s.meter.start), TargetCPU: ws.cpu, Costs: s.meter.costs}
	runs, _ := s.programCosts() // a kind unread costs its class alone
	s.meter.mu.Lock()
	defer s.meter.mu.Unlock()
	s.probesMu.RLock()
	defer s.probesMu.RUnlock()
	// The hits in one read where batches cost less (readCounters: for
	// every function of a big binary, 40 ms against 0.26 s key by key).
	var idx []int
	for _, wl := range s.whole {
		idx = append(idx, wl.idx...)
	}
	hits, err := readCounters(s.objs.Hits, idx)
	if err != nil {
		hits = make([]uint64, len(idx))
		for k, i := range idx {
			hits[k], _ = sumPerCPU(s.objs.Hits, uint32(i))
		}
	}
	s.attribute(&o, idx, hits, &runs)
	return o
}
