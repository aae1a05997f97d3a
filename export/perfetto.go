// Package export writes traces into the formats of the tools people already
// look at traces with: the Chrome trace-event JSON that Perfetto UI and
// chrome://tracing open, and pprof profiles for `go tool pprof`.
package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/gi-debug/gi/trace"
)

// Perfetto writes a trace-event JSON file as calls complete: one track
// (thread) per goroutine, named as gi trace names goroutines, and one
// complete ("X") slice per call. It writes as it goes and keeps only the
// set of goroutines already named, so hours of events stay openable.
type Perfetto struct {
	w       *bufio.Writer
	clock   trace.Clock
	named   map[trace.GoroutineKey]bool
	started bool
	err     error
	// Slices counts the call slices written.
	Slices int
	flows  uint64 // flow arrows drawn, their ids
}

// NewPerfetto starts a trace-event file on w; clock converts event times.
func NewPerfetto(w io.Writer, clock trace.Clock) *Perfetto {
	return &Perfetto{w: bufio.NewWriterSize(w, 1<<16), clock: clock, named: map[trace.GoroutineKey]bool{}}
}

// traceEvent is one event of the Chrome trace-event format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"` // µs
	Dur  float64        `json:"dur,omitempty"`
	PID  uint32         `json:"pid"`
	TID  uint64         `json:"tid"`
	ID   uint64         `json:"id,omitempty"` // flow events
	BP   string         `json:"bp,omitempty"` // flow events: "e", bound to the enclosing slice
	S    string         `json:"s,omitempty"`  // instant events: "g", global
	Args map[string]any `json:"args,omitempty"`
}

func (p *Perfetto) emit(ev traceEvent) {
	if p.err != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		p.err = err
		return
	}
	if !p.started {
		p.w.WriteString("[\n")
		p.started = true
	} else {
		p.w.WriteString(",\n")
	}
	if _, err := p.w.Write(b); err != nil {
		p.err = err
	}
}

// Call writes one call of goroutine h: its slice, and the goroutine's track
// name the first time the goroutine is seen.
func (p *Perfetto) Call(h trace.Header, c *trace.Call) {
	k := trace.GoroutineKey{PID: h.PID, Goid: h.Goid}
	if !p.named[k] {
		p.named[k] = true
		p.emit(traceEvent{Name: "thread_name", Ph: "M", PID: h.PID, TID: h.Goid, Args: map[string]any{"name": h.String()}})
		p.emit(traceEvent{Name: "thread_sort_index", Ph: "M", PID: h.PID, TID: h.Goid, Args: map[string]any{"sort_index": h.Goid}})
	}
	args := map[string]any{"file": c.Func.File, "line": c.Func.Line, "depth": c.Depth}
	switch {
	case c.Unwound:
		args["unwound"] = true
	case c.Running:
		args["running"] = true
	}
	if c.Func.Sampled {
		args["sampled"] = true // traced in sampling windows: not every call
	}
	start := p.clock.Wall(c.Start).UnixNano()
	p.emit(traceEvent{Name: c.Func.Name, Cat: "call", Ph: "X", TS: float64(start) / 1e3, Dur: float64(c.Duration()) / 1e3,
		PID: h.PID, TID: h.Goid, Args: args})
	p.Slices++
	if c.Time != nil {
		p.waits(h, c.Time)
	}
}

// waits draws a call's waits and runnable spells (gi trace --why) as
// slices inside its own on the goroutine's track, and an arrow from the
// goroutine that ended a wait (a short slice on its track when it did)
// to the wait's end.
func (p *Perfetto) waits(h trace.Header, t *trace.TimeSplit) {
	for _, iv := range t.Intervals {
		ts, dur := float64(p.clock.Wall(iv.Start).UnixNano())/1e3, float64(iv.End-iv.Start)/1e3
		if iv.Reason == "" {
			p.emit(traceEvent{Name: "runnable", Cat: "runnable", Ph: "X", TS: ts, Dur: dur, PID: h.PID, TID: h.Goid})
			continue
		}
		args := map[string]any{}
		if o := iv.Object.String(); o != "" {
			args["object"] = o
		}
		if iv.WokenBy != 0 {
			args["woken_by"] = iv.WokenBy
			args["woken_by_function"] = iv.WokenByFunction
		}
		p.emit(traceEvent{Name: iv.Reason, Cat: "wait", Ph: "X", TS: ts, Dur: dur, PID: h.PID, TID: h.Goid, Args: args})
		if iv.WokenBy == 0 {
			continue
		}
		p.flows++
		end := ts + dur
		p.emit(traceEvent{Name: "wakes goroutine " + strconv.FormatUint(h.Goid, 10), Cat: "wake", Ph: "X", TS: end - 1, Dur: 1, PID: h.PID, TID: iv.WokenBy,
			Args: map[string]any{"function": iv.WokenByFunction}})
		p.emit(traceEvent{Name: "wake", Cat: "wake", Ph: "s", TS: end - 1, PID: h.PID, TID: iv.WokenBy, ID: p.flows})
		p.emit(traceEvent{Name: "wake", Cat: "wake", Ph: "f", BP: "e", TS: end, PID: h.PID, TID: h.Goid, ID: p.flows})
	}
}

// Running writes the calls of a goroutine still open at the end of the
// trace, outermost first, marked running.
func (p *Perfetto) Running(h trace.Header, open []*trace.Call) {
	for _, c := range open {
		p.Call(h, c)
	}
}

// Sampling records, at the trace's end, what sampling did (nil: nothing
// was sampled): a global instant event "gi: sampled" whose args name the
// functions traced in windows, the windows, the share of the trace they
// covered and the budget, so that a reader of the file knows those
// functions' slices are some of their calls, not all.
func (p *Perfetto) Sampling(sm *trace.Sampling, end uint64) {
	if sm == nil {
		return
	}
	funcs := []string{}
	for _, f := range sm.Functions {
		funcs = append(funcs, f.Func.Name)
	}
	args := map[string]any{"functions": funcs, "windows": sm.Windows, "traced_share": sm.TracedShare(), "budget": sm.Budget, "cut": sm.Cut}
	if sm.SchedWindowed {
		args["why_windowed"], args["unsplit"] = true, sm.Unsplit
	}
	if sm.ExitWindowed {
		args["exit_windowed"] = true
	}
	p.emit(traceEvent{Name: "gi: sampled", Cat: "gi", Ph: "i", S: "g", TS: float64(p.clock.Wall(end).UnixNano()) / 1e3, Args: args})
}

// Flush pushes what is buffered to the file (the file stays a valid
// trace: the format allows the closing bracket to be missing).
func (p *Perfetto) Flush() error {
	if err := p.w.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}

// Close ends the JSON array and flushes.
func (p *Perfetto) Close() error {
	if !p.started {
		p.w.WriteString("[\n")
	}
	p.w.WriteString("\n]\n")
	if err := p.Flush(); err != nil {
		return fmt.Errorf("write trace-event file: %w", err)
	}
	return nil
}
