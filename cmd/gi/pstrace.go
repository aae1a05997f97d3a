package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/link"
	"github.com/gi-debug/gi/trace"
)

// latency is what `gi ps --trace` learns about one goroutine's current
// function during the trace window.
type latency struct {
	// Function is the measured function: the goroutine's frame chosen by
	// link.Program.MeasuredFrames, always on its stack; File and Line
	// locate that frame.
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Calls    uint64 `json:"calls"`
	P50NS    int64  `json:"p50_ns"`
	P99NS    int64  `json:"p99_ns"`
	MaxNS    int64  `json:"max_ns"`
	// InCallNS is how long the goroutine has been in its current call, when
	// the call's entry was seen; 0 when it began before the window.
	InCallNS int64 `json:"in_call_ns"`
	// Stuck marks a goroutine that sat in the same call for the whole window.
	Stuck bool `json:"stuck"`
}

// traceWindow describes the trace `gi ps --trace` ran.
type traceWindow struct {
	// The window, Unix ns: the statistics count the calls that began and
	// ended within it.
	StartNS     int64    `json:"start_ns"`
	EndNS       int64    `json:"end_ns"`
	Functions   []string `json:"functions"`
	Probes      int      `json:"probes"`
	Events      uint64   `json:"events"`
	Lost        uint64   `json:"lost"`
	Untraceable []string `json:"untraceable,omitempty"`
}

// psTrace is the result of `gi ps --trace`.
type psTrace struct {
	window traceWindow
	byGoid map[uint64]*latency
	d      time.Duration
}

// traceFunctions returns the functions the goroutines are in: the measured
// frame of each and up to depth-1 traceable frames above it.
func traceFunctions(prog link.Program, gs []*inspect.Goroutine, depth int) []string {
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

// runPsTrace traces, for d, the functions the goroutines of the first
// snapshot are in, then takes a second snapshot and relates the two.
func runPsTrace(a *app, t *inspect.Target, first *inspect.Snapshot, gs []*inspect.Goroutine, d time.Duration, depth int, errOut io.Writer) (*inspect.Snapshot, *psTrace, error) {
	prog := link.ProgramOf(t.Binary)
	names := traceFunctions(prog, gs, depth)
	if len(names) == 0 {
		return nil, nil, errors.New("--trace: the goroutines are in no traceable function")
	}
	pats := make([]trace.Pattern, len(names))
	for i, n := range names {
		pats[i] = trace.ExactName(n)
	}
	s, err := trace.Open(trace.Options{PID: t.PID, Include: pats})
	if err != nil {
		return nil, nil, fmt.Errorf("--trace: %w", err)
	}
	defer s.Close()
	pt := &psTrace{byGoid: map[uint64]*latency{}, d: d}
	fmt.Fprintf(errOut, "gi: tracing %d functions (%d probes) of %d goroutines for %v\n", len(s.Selection.Functions), s.Probes, len(gs), d)
	pt.window.Probes = s.Probes
	for _, f := range s.Selection.Functions {
		pt.window.Functions = append(pt.window.Functions, f.Name)
	}
	for _, u := range s.Selection.Untraceable {
		pt.window.Untraceable = append(pt.window.Untraceable, u.Name+": "+u.Reason)
	}

	stats := trace.NewStats()
	touched := map[trace.GoroutineKey]map[*trace.Function]bool{}
	ctx, stop := a.traceContext()
	defer stop()
	// The window is exactly [start, start+d] on both clocks, so that what
	// gi counts can be compared with what anyone measured over it.
	wallStart, monoStart := time.Now(), uint64(monotonicNow())
	monoEnd := monoStart + uint64(d)
	pt.window.StartNS, pt.window.EndNS = wallStart.UnixNano(), wallStart.Add(d).UnixNano()
	res := s.Run(ctx, trace.RunOptions{Duration: d}, trace.Handlers{
		Call: func(_ trace.Header, c *trace.Call) {
			if c.Start >= monoStart && c.End <= monoEnd {
				stats.Add(c)
			}
		},
		Event: func(ev *trace.Event) {
			if ev.Func == nil {
				return
			}
			k := trace.GoroutineKey{PID: ev.PID, Goid: ev.Goid}
			m := touched[k]
			if m == nil {
				m = map[*trace.Function]bool{}
				touched[k] = m
			}
			m[ev.Func] = true
		},
	})
	pt.window.Events, pt.window.Lost = res.Events, res.Lost
	if res.Err != nil {
		return nil, nil, res.Err
	}
	if ctx.Err() != nil {
		return nil, nil, errors.New("interrupted")
	}
	monoNow := monotonicNow()
	s.Close()

	second, err := t.Snapshot(a.tracer)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*trace.Function{}
	for _, f := range s.Selection.Functions {
		byName[f.Name] = f
	}
	// The innermost open call of each goroutine, per function.
	open := map[trace.GoroutineKey]map[*trace.Function]trace.OpenCall{}
	for _, oc := range res.Open {
		m := open[oc.Goroutine]
		if m == nil {
			m = map[*trace.Function]trace.OpenCall{}
			open[oc.Goroutine] = m
		}
		if prev, ok := m[oc.Func]; !ok || oc.Depth > prev.Depth {
			m[oc.Func] = oc
		}
	}
	before := map[uint64]*inspect.Goroutine{}
	for _, g := range first.Goroutines {
		before[g.ID] = g
	}
	for _, g := range second.Goroutines {
		var fn *trace.Function
		var at inspect.Frame
		for _, f := range prog.MeasuredFrames(g, depth) {
			if fn = byName[f.Function]; fn != nil {
				at = f
				break
			}
		}
		if fn == nil {
			continue
		}
		l := &latency{Function: fn.Name, File: at.File, Line: at.Line}
		if h := stats.Of(fn); h != nil {
			l.Calls = h.Count()
			l.P50NS, l.P99NS, l.MaxNS = int64(h.Quantile(0.5)), int64(h.Quantile(0.99)), int64(h.Max())
		}
		k := trace.GoroutineKey{PID: uint32(t.PID), Goid: g.ID}
		if oc, ok := open[k][fn]; ok && uint64(monoNow) > oc.Start {
			l.InCallNS = int64(uint64(monoNow) - oc.Start)
		} else if prev := before[g.ID]; prev != nil && len(fn.Returns) > 0 && !touched[k][fn] && inFunction(prev, fn.Name) {
			// A function that never returns (a worker loop) is always
			// in the same call: that is not being stuck.
			l.Stuck = true
		}
		pt.byGoid[g.ID] = l
	}
	return second, pt, nil
}

func inFunction(g *inspect.Goroutine, name string) bool {
	for _, f := range g.CodeFrames() {
		if f.Function == name {
			return true
		}
	}
	return false
}

// location renders the FUNCTION and LOCATION columns of a goroutine's row:
// with a trace, the measured function, whose latency the row gives.
func (pt *psTrace) location(g *inspect.Goroutine) (fn, loc string) {
	if pt != nil {
		if l := pt.byGoid[g.ID]; l != nil {
			return l.Function, fmt.Sprintf("%s:%d", shortFile(l.File), l.Line)
		}
	}
	return location(g)
}

// inCallText renders the IN CALL column.
func (pt *psTrace) inCallText(l *latency) string {
	switch {
	case l == nil:
		return ""
	case l.Stuck:
		return "stuck >" + formatWait(pt.d, true)
	case l.InCallNS > 0:
		return formatWait(time.Duration(l.InCallNS), true)
	}
	return ""
}

// columns renders CALLS, P50, P99, MAX, IN CALL for one goroutine.
func (pt *psTrace) columns(g *inspect.Goroutine) []string {
	l := pt.byGoid[g.ID]
	if l == nil {
		return []string{"", "", "", "", ""}
	}
	if l.Calls == 0 {
		return []string{"0", "", "", "", pt.inCallText(l)}
	}
	return []string{fmt.Sprint(l.Calls), trace.FormatDuration(time.Duration(l.P50NS)), trace.FormatDuration(time.Duration(l.P99NS)), trace.FormatDuration(time.Duration(l.MaxNS)), pt.inCallText(l)}
}

// groupColumns renders the same for a group: the function's statistics,
// the longest in-call time and how many members are stuck.
func (pt *psTrace) groupColumns(gr *inspect.Group) []string {
	cols := pt.columns(gr.Representative())
	var longest int64
	stuck := 0
	for _, g := range gr.Goroutines {
		if l := pt.byGoid[g.ID]; l != nil {
			longest = max(longest, l.InCallNS)
			if l.Stuck {
				stuck++
			}
		}
	}
	switch {
	case stuck > 0 && stuck == len(gr.Goroutines):
		cols[4] = "stuck >" + formatWait(pt.d, true)
	case stuck > 0:
		cols[4] = fmt.Sprintf("%d stuck >%s", stuck, formatWait(pt.d, true))
	case longest > 0:
		cols[4] = "max " + formatWait(time.Duration(longest), true)
	}
	return cols
}

// monotonicNow is CLOCK_MONOTONIC, the clock of BPF timestamps.
func monotonicNow() int64 {
	return int64(trace.MonotonicNow())
}
