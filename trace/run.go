package trace

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/governor"
	"github.com/gi-debug/gi/proc"
)

// DrainInterval is how often the ring buffer is emptied.
const DrainInterval = 10 * time.Millisecond

// tickDrain bounds a drain at a tick: the rest is read at the next, after
// the watch's check (watch.go).
const tickDrain = 20 * time.Millisecond

// finalDrain bounds the drain that ends a run.
const finalDrain = 2 * time.Second

// Handlers receive what a running trace produces. Any may be nil.
//
// They run on Run's goroutine, the one that also drains the ring buffer,
// ends the sampling windows and keeps the overhead budget
// (Options.MaxOverhead): a handler must not block. One that writes where
// a reader may fall behind (a pipe, a terminal, a file on a slow disk)
// writes through an OutputQueue, which drops whole units of output past
// its backlog instead of waiting.
type Handlers struct {
	// Call is called for every completed call, innermost first.
	Call func(h Header, c *Call)
	// Root is called when a root call completes, with its whole tree.
	Root func(h Header, root *Call)
	// Tick is called every Interval (if set) while tracing.
	Tick func()
	// Event sees every event before the call trees do.
	Event func(*Event)
	// Running is called when the run ends, once per goroutine with calls
	// still open (ordered by goroutine), with those calls outermost first:
	// open[0] is a root call with its tree so far. Each open call has
	// Running set and End at the end of the run, so its Duration is its
	// time so far (a worker loop, a function that never returns).
	Running func(h Header, open []*Call)
}

// RunOptions bound a run.
type RunOptions struct {
	// Duration stops the run after this long; 0 runs until ctx is done.
	Duration time.Duration
	// Interval is how often Handlers.Tick runs.
	Interval time.Duration
	// Labels, if set, returns the pprof labels of the goroutine whose g is
	// at address g, read from the live process when gi first sees it (nil
	// if the g no longer belongs to that goroutine).
	Labels func(k GoroutineKey, g uint64) map[string]string
}

// RunResult sums up a finished run.
type RunResult struct {
	Events uint64
	Lost   uint64
	// UnreadFloats counts calls whose float registers could not be read
	// (Session.UnreadFloats).
	UnreadFloats uint64
	Unmatched    uint64
	Overflow     uint64
	// Running are the root calls still open when the run ended.
	Running int
	// OpenGoroutines is the number of goroutines gi still keeps state for.
	OpenGoroutines int
	// Open are the calls entered and not yet returned when the run ended.
	Open []OpenCall
	// Sampling says what sampling did, nil when nothing was sampled
	// (Options.MaxOverhead).
	Sampling *Sampling
	// Warnings are what the run added to Session.Warnings: functions
	// moved to the sampling windows as they became costly, a budget it
	// could not keep.
	Warnings []string
	// Err is set when the run stopped because the target went away or
	// the ring buffer failed.
	Err error
}

// Run reads events until ctx is done, the duration has passed, or the
// traced process exits, feeding the call-tree builder and the handlers.
// It does not detach: the caller closes the Session.
func (s *Session) Run(ctx context.Context, opts RunOptions, hs Handlers) RunResult {
	headers := newHeaderCache(s.Symbols())
	headers.labels = opts.Labels
	b := NewBuilder()
	b.Why = s.Opts.Why
	sym := headers.sym
	if s.Opts.Why {
		b.Describe = newWaitNamer(s, sym).describe
	}
	if s.schedWindowed {
		b.WhyWindows()
	}
	sampledCalls, cutCalls := map[*Function]uint64{}, map[*Function]uint64{}
	var missed *missedBook // from the first call completed while sampling
	b.OnCall = func(k GoroutineKey, c *Call) {
		if c.Func.Sampled {
			sampledCalls[c.Func]++
			if sm := s.sampler; sm != nil {
				sm.observe(c)
			}
		}
		if sm := s.sampler; sm != nil {
			if missed == nil {
				missed = newMissedBook(sm.covered, s.callCost)
			}
			missed.completed(c)
		}
		if hs.Call != nil {
			hs.Call(headers.Header(k), c)
		}
	}
	b.OnCut = func(c *Call) {
		cutCalls[c.Func]++
		if missed != nil {
			missed.forget(c)
		}
	}
	b.OnRoot = func(k GoroutineKey, g uint64, c *Call) {
		if hs.Root != nil {
			hs.Root(headers.Header(k), c)
		}
	}
	handle := func(ev *Event) {
		if hs.Event != nil {
			hs.Event(ev)
		}
		if s.schedWindowed {
			// The scheduler's probes' windows as of now: an event
			// read is no later than what the sampler says.
			b.SchedCoverage(s.sampler.schedCoverage())
		}
		k := GoroutineKey{PID: ev.PID, Goid: ev.Goid}
		switch ev.Kind {
		case bpf.KindEntry:
			headers.Seen(ev)
			if c := b.Entry(k, ev.G, ev.Func, ev.Time, frameKey(ev), ev.Caller); c != nil && ev.Values != nil {
				c.Args = append([]byte(nil), ev.Values...)
			}
		case bpf.KindReturn:
			b.ReturnWith(k, ev.Func, ev.Time, frameKey(ev), ev.Site, ev.Values)
		case bpf.KindGoexit:
			b.GoroutineExit(k, ev.Time)
			headers.Forget(k)
		case bpf.KindPark, bpf.KindReady, bpf.KindRun, bpf.KindYield, bpf.KindSyscall, bpf.KindSysret, bpf.KindSema, bpf.KindPoll:
			se := SchedEvent{Kind: ev.Kind, Time: ev.Time, Reason: ev.Reason, Object: ev.Object, WokenBy: ev.Waker, PCs: ev.PCs}
			if ev.Waker != 0 {
				se.WokenByFunction = sym.Caller(ev.PID, ev.PCs)
			}
			b.Sched(k, se)
		}
	}

	var res RunResult
	tick := time.NewTicker(DrainInterval)
	defer tick.Stop()
	var deadline <-chan time.Time
	if opts.Duration > 0 {
		t := time.NewTimer(opts.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var interval <-chan time.Time
	if opts.Interval > 0 && hs.Tick != nil {
		t := time.NewTicker(opts.Interval)
		defer t.Stop()
		interval = t.C
	}
	alive := func() bool { return s.Opts.PID <= 0 || proc.Alive(s.Opts.PID) }
	checks := 0
	var (
		windowEnds <-chan uint64
		cut        uint64
	)
	// The sampler runs from the start, or from the tick whose Session.Add
	// first sampled a function.
	stopSampling := func() {}
	startSampling := func() {
		sm := s.sampler
		if sm == nil || windowEnds != nil {
			return
		}
		sctx, cancel := context.WithCancel(context.Background())
		sampling := make(chan struct{})
		go func() {
			defer close(sampling)
			sm.run(sctx)
		}()
		stopSampling = func() {
			cancel()
			<-sampling
		}
		windowEnds = sm.ends
	}
	startSampling()
	// drain reads the ring buffer; events it lost meanwhile leave the
	// splits of the calls open then partial.
	lost := uint64(0)
	drainFor := func(limit time.Duration) error {
		err := s.drainFor(handle, heldTimeout, limit)
		if b.Why {
			if n := s.Lost(); n > lost {
				lost = n
				b.MarkPartial()
			}
		}
		return err
	}
	drain := func() error { return drainFor(0) }
	// endWindow cuts the calls of sampled functions still open when the
	// probes of their window, closed at time end, went.
	endWindow := func(end uint64) error {
		err := drain()
		cut += uint64(b.Cut(func(c *Call) bool { return c.Func.Sampled && c.Start <= end }))
		return err
	}
	// Under a budget, the cost of the functions traced whole is checked
	// every governor.Period, and the costliest moved to the sampling windows
	// past it (Session.govern).
	// A jump is caught sooner: at each drain, the watch checks their
	// summed cost since the last (watch.go).
	warned := len(s.Warnings)
	var governing <-chan time.Time
	var lastCost, runCost Overhead
	var w *watch
	if s.Opts.MaxOverhead > 0 && !s.Opts.empty {
		if o, err := s.Overhead(); err == nil {
			lastCost, runCost = o, o
			t := time.NewTicker(governor.Period)
			defer t.Stop()
			governing = t.C
			w = s.newWatch()
		}
	}
	// move moves the costliest functions traced whole to the sampling
	// windows if their costs over d say so (rose: when the watch saw
	// their cost rise), and cuts the calls of those moved that are still
	// open: their RETs' probes went with the links.
	move := func(d Overhead, rose time.Time) error {
		moved, stopped, err := s.govern(d, rose)
		if w != nil && len(moved) > 0 {
			w.moved()
		}
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("--max-overhead: the functions traced whole took more than the budget, and moving the costliest to the sampling windows failed: %v", err))
			governing, w = nil, nil
		}
		if len(moved) == 0 {
			return nil
		}
		// Their calls open when they stopped reporting return unseen; a
		// window may have opened since.
		if err := drain(); err != nil {
			return err
		}
		cut += uint64(b.Cut(func(c *Call) bool { return slices.Contains(moved, c.Func) && c.Start <= stopped }))
		startSampling()
		return nil
	}
	// govern checks the period past.
	govern := func() error {
		o, err := s.Overhead()
		if err != nil {
			return nil
		}
		d := o.Sub(lastCost)
		lastCost = o
		return move(d, time.Time{})
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case end := <-windowEnds:
			if err := endWindow(end); err != nil {
				res.Err = err
				break loop
			}
		case <-deadline:
			break loop
		case <-governing:
			if err := govern(); err != nil {
				res.Err = err
				break loop
			}
		case <-interval:
			if err := drainFor(tickDrain); err != nil {
				res.Err = err
				break loop
			}
			hs.Tick()
			startSampling()
		case <-tick.C:
			// Before the drain, which a function turned hot floods
			// (bounded: the next check is not held by it either).
			if w != nil && w.check() {
				if d, rose := w.confirm(); d != nil {
					if err := move(*d, rose); err != nil {
						res.Err = err
						break loop
					}
				}
			}
			if err := drainFor(tickDrain); err != nil {
				res.Err = err
				break loop
			}
			if checks++; checks%10 == 0 && !alive() {
				res.Err = errTargetExited(s.Opts.PID)
				break loop
			}
		}
	}
	stopSampling()
	for len(windowEnds) > 0 {
		if err := endWindow(<-windowEnds); err != nil && res.Err == nil {
			res.Err = err
		}
	}
	// The last events, bounded: a process whose traced calls come
	// faster than gi reads them (gi tracing what it runs itself) would
	// hold the end of the run, its probes attached, for ever.
	endDrain := time.Now()
	if err := s.drainFor(handle, 0, finalDrain); err != nil && res.Err == nil {
		res.Err = err
	}
	if time.Since(endDrain) >= finalDrain {
		s.Warnings = append(s.Warnings, fmt.Sprintf("events were still coming faster than gi read them at the end of the trace: after %v, the rest were not read", finalDrain))
	}
	if s.schedWindowed {
		b.SchedCoverage(s.sampler.schedCoverage())
	}
	running := b.Flush(uint64(monotonicNow()))
	if s.sampler != nil {
		r := s.sampler.snapshot()
		// Unsplit with the calls running at the end that Flush left so.
		r.Cut, r.Unsplit = cut+b.UnwoundCut, b.Unsplit
		if missed != nil {
			r.Missed, r.MissedFloors, r.MissedUnknown = missed.Missed, missed.Floors, missed.Unknown
		}
		if w := r.overBudget(s, runCost); w != "" {
			r.Warnings = append(r.Warnings, w)
		}
		if r.Windows == 0 && r.FirstDelay > r.Elapsed {
			r.Warnings = append(r.Warnings, fmt.Sprintf("no sampling window opened: under the %.3g%% budget the first was to open %v after sampling began (what a window is estimated to cost, paid for at the budget's rate), past the end of the trace %v after; trace longer, or raise --max-overhead",
				100*r.Budget, r.FirstDelay.Round(10*time.Millisecond), r.Elapsed.Round(10*time.Millisecond)))
		}
		for i := range r.Functions {
			r.Functions[i].Calls = sampledCalls[r.Functions[i].Func]
			r.Functions[i].Cut = cutCalls[r.Functions[i].Func]
		}
		res.Sampling = &r
	}
	res.Warnings = s.Warnings[warned:]
	res.Running = len(running)
	if hs.Running != nil {
		for _, r := range running {
			hs.Running(headers.Header(r.Goroutine), r.Calls)
		}
	}
	res.Open = b.OpenCalls()
	res.OpenGoroutines = b.Open()
	res.Events, res.Lost, res.UnreadFloats = s.Events, s.Lost(), s.UnreadFloats()
	res.Unmatched, res.Overflow = b.Unmatched, b.Overflow
	return res
}

// frameKey identifies a frame independently of where the stack lives: the
// distance of the stack pointer at entry (and at the RET) from the top of
// the goroutine's stack survives the runtime copying the stack to grow it.
func frameKey(ev *Event) uint64 {
	if ev.StackHi < ev.SP {
		return 0
	}
	return ev.StackHi - ev.SP
}

// OpenCall is a call entered and not returned when a run ended.
type OpenCall struct {
	Goroutine GoroutineKey
	Func      *Function
	// Start is CLOCK_MONOTONIC nanoseconds.
	Start uint64
	Depth int
}
