package trace

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/governor"
)

// Watching for a jump (governor.Watch decides). The governor reads every
// probe's hits and the threads' CPU times once a governor.Period; at every
// drain (DrainInterval), before the ring buffer is read, Run's watch reads
// two figures: the summed cost of the probes of the functions traced
// whole, which the programs keep in one per-CPU counter (whole_cost: hits
// on emulated and on single-stepped instructions, program nanoseconds),
// and the process's CPU time (its CPU-time clock, one clock_gettime). Past
// the budget, the hits of the functions traced whole are read
// (wholeOverhead), and read again at least governor.WatchConfirm later;
// if their cost over that interval is still past the budget, the
// costliest are moved to the sampling windows at once (govern, demote),
// tens of milliseconds after the cost rose.

// watch is Run's check of the cost of the functions traced whole.
type watch struct {
	s *Session
	// clock is the traced process's CPU-time clock, cpuKnown whether it
	// can be read.
	clock    int32
	cpuKnown bool
	decide   *governor.Watch[Overhead]
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
	first, err := w.sample()
	if err != nil {
		return nil
	}
	w.decide = governor.NewWatch[Overhead](s.Opts.MaxOverhead, w.cpuKnown, first)
	return w
}

// now reads the time and the process's CPU time (0 when unknown).
func (w *watch) now() governor.Reading {
	r := governor.Reading{At: time.Now()}
	if w.cpuKnown {
		var ts unix.Timespec
		if unix.ClockGettime(w.clock, &ts) == nil {
			r.CPU = time.Duration(ts.Nano())
		}
	}
	return r
}

// sample reads the process's CPU time and the summed cost of the probes
// of the functions traced whole.
func (w *watch) sample() (governor.Reading, error) {
	r := w.now()
	var perCPU []bpf.ThreadCost
	if err := w.s.objs.WholeCost.Lookup(uint32(0), &perCPU); err != nil {
		return r, err
	}
	costs := w.s.meter.costs
	for _, c := range perCPU {
		r.Probes += time.Duration(c.Emulated)*costs.Emulated + time.Duration(c.Stepped)*costs.Stepped + time.Duration(c.Ns)
	}
	return r, nil
}

// check runs at a drain, before it, and returns true when Run should
// confirm: the cost of the functions traced whole since the last check
// is past the budget, and their hits are read (now, or at an earlier
// check past it).
func (w *watch) check() bool {
	start := time.Now()
	defer w.spent(start)
	r, err := w.sample()
	if err != nil {
		return false
	}
	switch w.decide.Check(r) {
	case governor.ReadHits:
		w.decide.Pend(w.s.wholeOverhead(r), r.At)
		return true
	case governor.Confirm:
		return true
	}
	return false
}

// confirm reads the hits of the functions traced whole again, at least
// governor.WatchConfirm after check first did, and returns their costs
// over that interval if they are past the budget, with when their cost
// rose (see governor.Watch.Confirmed).
func (w *watch) confirm() (*Overhead, time.Time) {
	first := w.decide.Pending()
	if first == nil {
		return nil, time.Time{}
	}
	if d := w.decide.ConfirmWait(time.Now()); d > 0 {
		time.Sleep(d)
	}
	start := time.Now()
	defer w.spent(start)
	o := w.s.wholeOverhead(w.now())
	if len(o.Functions) != len(first.Functions) {
		w.decide.Drop() // grown meanwhile
		return nil, time.Time{}
	}
	d := o.Sub(*first)
	var probes time.Duration
	for _, f := range d.Functions {
		if !f.Func.Sampled {
			probes += f.Time
		}
	}
	if d.Exit.Func != nil && !d.Exit.Func.Sampled {
		probes += d.Exit.Time
	}
	rose, over := w.decide.Confirmed(probes, d.TargetCPU, d.Interval, time.Now(), time.Since(start))
	if !over {
		return nil, time.Time{}
	}
	return &d, rose
}

// spent counts a check that began at start.
func (w *watch) spent(start time.Time) {
	w.Checks++
	w.Spent += time.Since(start)
}

// moved tells the watch that functions moved to the windows: the hits it
// read before are of other links.
func (w *watch) moved() {
	w.decide.Drop()
}

// wholeOverhead returns the hits of the probes of the functions traced
// whole and their cost (as Overhead counts them), at the time and CPU
// time of ws: an Overhead whose Sub govern weighs.
func (s *Session) wholeOverhead(r governor.Reading) Overhead {
	o := Overhead{Interval: r.At.Sub(s.meter.start), TargetCPU: r.CPU, Costs: s.meter.costs}
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
