package recorder

import (
	"bufio"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/gi-debug/gi/export"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/trace"
)

// DefaultMaxCalls bounds the traced root calls a recording keeps.
const DefaultMaxCalls = 20000

// callWindow keeps the traced calls of the window: the root calls (with
// their trees) that ended within Keep, at most max of them, each
// function's latencies since the last snapshot, and the calls that
// fired a condition on calls. Its handlers run on the trace's loop; the
// recording reads it between snapshots.
type callWindow struct {
	keep  time.Duration
	max   int
	clock trace.Clock
	sym   *trace.Symbols
	// onCall are the conditions judged on each call, by index in
	// Options.When.
	onCall map[int]*Condition

	// symMu serialises the symbolizer's uses (it caches types as it
	// formats arguments): the trace's handlers and the records' writes.
	symMu sync.Mutex

	mu       sync.Mutex
	roots    []keptCall
	dropped  int
	interval map[string]*trace.Histogram
	// slow holds the calls that fired a condition, for the recording to
	// write; a full queue drops them (a storm writes once anyway).
	slow chan slowCall
}

// keptCall is a root call and its goroutine.
type keptCall struct {
	h    trace.Header
	c    *trace.Call
	ends time.Time
}

// slowCall is a call that fired condition cond.
type slowCall struct {
	cond  int
	value string
	call  report.TraceCall
	at    time.Time
}

func newCallWindow(keep time.Duration, max int, clock trace.Clock, sym *trace.Symbols, when []*Condition) *callWindow {
	w := &callWindow{keep: keep, max: max, clock: clock, sym: sym, onCall: map[int]*Condition{},
		interval: map[string]*trace.Histogram{}, slow: make(chan slowCall, 16)}
	for i, c := range when {
		if c.OnCall() {
			w.onCall[i] = c
		}
	}
	return w
}

// handlers are the trace's handlers that fill the window.
func (w *callWindow) handlers() trace.Handlers {
	return trace.Handlers{
		Call: func(h trace.Header, c *trace.Call) {
			d := time.Duration(c.Duration())
			w.mu.Lock()
			hist := w.interval[c.Func.Name]
			if hist == nil {
				hist = &trace.Histogram{}
				w.interval[c.Func.Name] = hist
			}
			hist.Record(d)
			w.mu.Unlock()
			for i, cond := range w.onCall {
				if cond.fn != c.Func.Name {
					continue
				}
				if over, value := cond.SlowCall(d); over {
					w.symMu.Lock()
					tc := report.NewTraceCall(w.sym, w.clock, trace.GoroutineKey{PID: h.PID, Goid: h.Goid}, c)
					w.symMu.Unlock()
					sc := slowCall{cond: i, value: value, at: w.clock.Wall(c.End), call: tc}
					select {
					case w.slow <- sc:
					default:
					}
				}
			}
		},
		Root: func(h trace.Header, c *trace.Call) {
			ends := w.clock.Wall(c.End)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.roots = append(w.roots, keptCall{h, c, ends})
			drop := 0
			for drop < len(w.roots) && (len(w.roots)-drop > w.max || ends.Sub(w.roots[drop].ends) > w.keep) {
				drop++
			}
			if drop > 0 {
				w.dropped += drop
				w.roots = slices.Delete(w.roots, 0, drop)
			}
		},
	}
}

// latencies returns each function's latency since the last call, and
// starts the next interval.
func (w *callWindow) latencies() []report.FunctionLatency {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []report.FunctionLatency
	for fn, h := range w.interval {
		out = append(out, report.NewFunctionLatency(fn, h))
	}
	slices.SortFunc(out, func(a, b report.FunctionLatency) int {
		switch {
		case a.Function < b.Function:
			return -1
		case a.Function > b.Function:
			return 1
		}
		return 0
	})
	clear(w.interval)
	return out
}

// kept returns the root calls of the window, oldest first, and how many
// the bound has dropped.
func (w *callWindow) kept() ([]keptCall, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.roots), w.dropped
}

// writeJSONLines writes each call of the trees, as gi trace --json
// prints calls: a root, then its calls depth first.
func (w *callWindow) writeJSONLines(b *bufio.Writer, roots []keptCall) error {
	w.symMu.Lock()
	defer w.symMu.Unlock()
	enc := json.NewEncoder(b)
	var walk func(k trace.GoroutineKey, c *trace.Call) error
	walk = func(k trace.GoroutineKey, c *trace.Call) error {
		if err := enc.Encode(report.NewTraceCall(w.sym, w.clock, k, c)); err != nil {
			return err
		}
		for _, ch := range c.Children {
			if err := walk(k, ch); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(trace.GoroutineKey{PID: r.h.PID, Goid: r.h.Goid}, r.c); err != nil {
			return err
		}
	}
	return nil
}

// writePerfetto writes the trees as trace-event JSON: a track per
// goroutine.
func (w *callWindow) writePerfetto(b *bufio.Writer, roots []keptCall) error {
	p := export.NewPerfetto(b, w.clock)
	var walk func(h trace.Header, c *trace.Call)
	walk = func(h trace.Header, c *trace.Call) {
		p.Call(h, c)
		for _, ch := range c.Children {
			walk(h, ch)
		}
	}
	for _, r := range roots {
		walk(r.h, r.c)
	}
	return p.Close()
}
