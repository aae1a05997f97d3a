package link

import (
	"context"
	"sync"
	"time"

	"github.com/gi-debug/gi/trace"
)

// Live keeps a trace running on a growing set of functions of one process
// (the measured functions of its goroutines, as gi top refreshes them) and
// accumulates per-function latency histograms across re-attachments.
// Attaching happens in the background: Ensure returns at once, so a view
// driven by keys never waits for probes.
type Live struct {
	pid      int
	reattach time.Duration

	mu        sync.Mutex
	stats     map[string]*trace.Histogram
	names     map[string]bool
	err       string
	warnings  []string
	attached  time.Time // when the last attach began
	attaching bool
	closed    bool
	cancel    context.CancelFunc // stops the running trace
	done      chan struct{}      // closed when the running trace is detached
	idle      *sync.Cond         // signalled when an attach finishes
}

// NewLive returns a Live for process pid that re-attaches, when the set of
// functions grows, at most once per reattach.
func NewLive(pid int, reattach time.Duration) *Live {
	l := &Live{pid: pid, reattach: reattach, stats: map[string]*trace.Histogram{}, names: map[string]bool{}}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// Histogram returns a copy of the latency histogram of function name, nil
// if none of its calls completed yet.
func (l *Live) Histogram(name string) *trace.Histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.stats[name]; h != nil {
		c := *h
		return &c
	}
	return nil
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

// Ensure makes the trace cover names, re-attaching in the background if the
// set grew (at most once per reattach interval). It does not block.
func (l *Live) Ensure(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.attaching || (!l.attached.IsZero() && time.Since(l.attached) < l.reattach) {
		return
	}
	grew := false
	for _, n := range names {
		if !l.names[n] {
			l.names[n], grew = true, true
		}
	}
	if !grew {
		return
	}
	pats := make([]trace.Pattern, 0, len(l.names))
	for n := range l.names {
		pats = append(pats, trace.ExactName(n))
	}
	l.attaching, l.attached = true, time.Now()
	go l.attach(pats)
}

// attach replaces the running trace with one on pats.
func (l *Live) attach(pats []trace.Pattern) {
	l.mu.Lock()
	l.stopLocked()
	l.mu.Unlock()
	s, err := trace.Open(trace.Options{PID: l.pid, Include: pats})

	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.idle.Broadcast()
	l.attaching = false
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
	l.cancel, l.done = cancel, make(chan struct{})
	done := l.done
	go func() {
		defer close(done)
		defer s.Close()
		res := s.Run(ctx, trace.RunOptions{}, trace.Handlers{Call: l.record})
		if res.Err != nil && ctx.Err() == nil {
			// The trace ended by itself (target gone, ring buffer):
			// say so, and let the next Ensure attach again.
			l.mu.Lock()
			l.err = res.Err.Error()
			l.names = map[string]bool{}
			l.mu.Unlock()
		}
	}()
}

func (l *Live) record(_ trace.Header, c *trace.Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.stats[c.Func.Name]
	if h == nil {
		h = &trace.Histogram{}
		l.stats[c.Func.Name] = h
	}
	h.Record(time.Duration(c.Duration()))
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

// Close detaches the probes and waits until they are gone, an attach in
// progress included.
func (l *Live) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for l.attaching {
		l.idle.Wait()
	}
	l.stopLocked()
}
