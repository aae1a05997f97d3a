package measure

import (
	"context"
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
// per function, where it went.
type Live struct {
	process  *proc.Process
	sites    *trace.Sites
	reattach time.Duration
	why      bool

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
	attached time.Time // when the last attach or add began
	opening  bool      // a trace is being opened
	closed   bool
	cancel   context.CancelFunc // stops the running trace; nil when none runs
	done     chan struct{}      // closed when the running trace is detached
	idle     *sync.Cond         // signalled when an open finishes
}

// liveTick is how often the running trace takes the pending functions.
const liveTick = 100 * time.Millisecond

// NewLive returns a Live for process p (the caller's to close), whose
// executable's probe sites are sites (shared with the caller's Program),
// that attaches more functions, when the set grows, at most once per
// reattach, and splits the calls' time if why is set.
func NewLive(p *proc.Process, sites *trace.Sites, reattach time.Duration, why bool) *Live {
	l := &Live{process: p, sites: sites, reattach: reattach, why: why, stats: trace.NewStats(), funcs: map[string]*trace.Function{}, names: map[string]bool{}}
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
func (l *Live) Why() bool { return l.why }

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
	if l.closed || l.opening || len(l.pending) > 0 || (!l.attached.IsZero() && time.Since(l.attached) < l.reattach) {
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
	s, err := trace.Open(trace.Options{Process: l.process, Include: exactNames(names), Growable: true, Sites: l.sites, Why: l.why})

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
	l.warnings = s.Warnings
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
		res := s.Run(ctx, trace.RunOptions{Interval: liveTick}, trace.Handlers{Call: l.record, Tick: func() { l.addPending(s) }})
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
