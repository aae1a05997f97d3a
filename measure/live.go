package measure

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/trace"
)

// Live keeps a trace running on a growing set of functions of one process
// (the measured functions of its goroutines, as gi top refreshes them) and
// accumulates per-function latency histograms. The first functions are
// attached in the background (Ensure returns at once, so a view driven by
// keys never waits for probes); later ones are added to the running trace
// (trace.Session.Add), which reads the binary once and never detaches.
// With why, it also splits the calls' time (trace.Options.Why) and keeps,
// per function, where it went. Under a budget (LiveOptions.MaxOverhead)
// the costliest functions are traced in sampling windows.
type Live struct {
	process *proc.Process
	sites   *trace.Sites
	o       LiveOptions

	mu sync.Mutex
	// stats holds the calls' latencies (and, with why, their splits),
	// keyed by one Function per name (funcs): a trace opened again has
	// new Functions.
	stats    *trace.Stats
	funcs    map[string]*trace.Function
	names    map[string]bool // functions traced or being attached
	pending  []string        // names the running trace adds at its next tick
	err      string
	warnings []string
	// sampled are the functions traced in sampling windows, and share
	// the share of the trace's time the windows covered.
	sampled  map[string]bool
	share    float64
	attached time.Time // when the last attach or add began
	opening  bool      // a trace is being opened
	closed   bool
	cancel   context.CancelFunc // stops the running trace; nil when none runs
	done     chan struct{}      // closed when the running trace is detached
	idle     *sync.Cond         // signalled when an open finishes
}

// liveTick is how often the running trace takes the pending functions.
const liveTick = 100 * time.Millisecond

// LiveOptions shape a Live trace.
type LiveOptions struct {
	// Reattach is how often, at most, more functions are attached when
	// the set grows.
	Reattach time.Duration
	// Why splits the calls' time (trace.Options.Why).
	Why bool
	// MaxOverhead bounds the probes' cost (trace.Options.MaxOverhead);
	// 0 for no bound.
	MaxOverhead float64
}

// NewLive returns a Live for process p (the caller's to close), whose
// executable's probe sites are sites (shared with the caller's Program).
func NewLive(p *proc.Process, sites *trace.Sites, o LiveOptions) *Live {
	l := &Live{process: p, sites: sites, o: o, stats: trace.NewStats(), funcs: map[string]*trace.Function{}, names: map[string]bool{}, sampled: map[string]bool{}}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// Histogram returns a copy of the latency histogram of function name, nil
// if none of its calls completed yet.
func (l *Live) Histogram(name string) *trace.Histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.stats.Of(l.funcs[name]); h != nil {
		c := *h
		return &c
	}
	return nil
}

// Why reports whether the calls' time is split (Mostly).
func (l *Live) Why() bool { return l.o.Why }

// Sampled returns, for a function traced in sampling windows, the share
// of the trace's time they were open, taking calls (its calls seen,
// divided by it, estimate its calls); 0 for a function traced whole.
func (l *Live) Sampled(name string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.sampled[name] {
		return 0
	}
	return l.share
}

// Mostly returns the part that dominates the time of function name's
// calls so far (with why), nil if none of them was split.
func (l *Live) Mostly(name string) *Part {
	l.mu.Lock()
	defer l.mu.Unlock()
	return dominant(l.stats.Parts(l.funcs[name]))
}

// Warnings returns the current trace's warnings: the kernel features it
// works without (trace.Session.Warnings).
func (l *Live) Warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warnings
}

// Err returns the last attach error, "" if none.
func (l *Live) Err() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Ensure makes the trace cover names: it opens one in the background if
// none runs, or has the running one add the functions it lacks (at most
// once per reattach interval). It does not block.
func (l *Live) Ensure(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.opening || len(l.pending) > 0 || (!l.attached.IsZero() && time.Since(l.attached) < l.o.Reattach) {
		return
	}
	var fresh []string
	for _, n := range names {
		if !l.names[n] {
			l.names[n] = true
			fresh = append(fresh, n)
		}
	}
	if len(fresh) == 0 {
		return
	}
	l.attached = time.Now()
	if l.cancel != nil {
		l.pending = fresh // the running trace's tick adds them
		return
	}
	all := make([]string, 0, len(l.names))
	for n := range l.names {
		all = append(all, n)
	}
	l.opening = true
	go l.open(all)
}

// open starts a trace on names.
func (l *Live) open(names []string) {
	s, err := trace.Open(trace.Options{Process: l.process, Include: exactNames(names), Growable: true, Sites: l.sites, Why: l.o.Why, MaxOverhead: l.o.MaxOverhead})

	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.idle.Broadcast()
	l.opening = false
	if err != nil {
		l.err = err.Error()
		// Forget the names so that the next Ensure (after the reattach
		// interval) tries again, even if the set did not grow.
		l.names = map[string]bool{}
		return
	}
	l.err = ""
	l.noteSampling(s)
	if l.closed {
		s.Close()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		defer s.Close()
		tick := func() {
			l.addPending(s)
			l.mu.Lock()
			defer l.mu.Unlock()
			l.noteSampling(s)
		}
		res := s.Run(ctx, trace.RunOptions{Interval: liveTick}, trace.Handlers{Call: l.record, Tick: tick})
		l.mu.Lock()
		defer l.mu.Unlock()
		l.pending = nil
		if res.Err != nil && ctx.Err() == nil {
			// The trace ended by itself (target gone, ring buffer):
			// say so, and let the next Ensure open another.
			l.err = res.Err.Error()
			l.names = map[string]bool{}
			l.cancel, l.done = nil, nil
		}
	}()
}

// noteSampling takes the warnings of s and what it samples; l.mu is held.
func (l *Live) noteSampling(s *trace.Session) {
	l.warnings = slices.Clone(s.Warnings)
	if sm := s.Sampling(); sm != nil {
		l.share = sm.OpenShare()
		for _, f := range sm.Functions {
			l.sampled[f.Func.Name] = true
		}
	}
}

// addPending adds the pending functions to the running trace s. It runs
// on the trace's reading goroutine, between two reads.
func (l *Live) addPending(s *trace.Session) {
	l.mu.Lock()
	names := l.pending
	l.mu.Unlock()
	if len(names) == 0 {
		return
	}
	_, _, err := s.Add(exactNames(names))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = nil
	if err != nil {
		l.err = err.Error()
		for _, n := range names { // asked again at the next Ensure
			delete(l.names, n)
		}
		return
	}
	l.err = ""
}

func (l *Live) record(_ trace.Header, c *trace.Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn := l.funcs[c.Func.Name]
	if fn == nil {
		fn = c.Func
		l.funcs[c.Func.Name] = fn
	}
	keyed := *c
	keyed.Func = fn
	l.stats.Add(&keyed)
}

// stopLocked detaches the running trace, if any, and waits for it. l.mu is
// held on entry and exit; it is released while waiting.
func (l *Live) stopLocked() {
	if l.cancel == nil {
		return
	}
	cancel, done := l.cancel, l.done
	l.cancel, l.done = nil, nil
	cancel()
	l.mu.Unlock()
	<-done
	l.mu.Lock()
}

// Close detaches the probes and waits until they are gone, an open in
// progress included.
func (l *Live) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for l.opening {
		l.idle.Wait()
	}
	l.stopLocked()
}
