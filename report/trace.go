package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/trace"
)

// TraceCall is one line of `gi trace --json`: a completed call.
type TraceCall struct {
	Goid           uint64 `json:"goid"`
	PID            uint32 `json:"pid,omitempty"`
	Function       string `json:"function"`
	File           string `json:"file"`
	Line           int    `json:"line"`
	CallerFunction string `json:"caller_function"`
	CallerFile     string `json:"caller_file"`
	CallerLine     int    `json:"caller_line"`
	Depth          int    `json:"depth"`
	StartNS        int64  `json:"start_ns"`
	DurationNS     int64  `json:"duration_ns"`
	Unwound        bool   `json:"unwound"`
	// Running marks a call still open when the trace ended: DurationNS is
	// its time so far.
	Running bool `json:"running"`
	// Args and Results are the captured arguments and results (absent
	// when not captured; Results also when the call did not return).
	Args    []funcargs.Value `json:"args,omitempty"`
	Results []funcargs.Value `json:"results,omitempty"`
	// Time is where the call's time went (gi trace --why).
	Time *TraceTime `json:"time,omitempty"`
	// Missed estimates, for a call traced whole, the nested calls of
	// sampled functions unseen between the windows (trace.Call.Missed).
	Missed []TraceMissed `json:"missed,omitempty"`
}

// TraceMissed is one trace.MissedCalls.
type TraceMissed struct {
	Function string  `json:"function"`
	Seen     uint64  `json:"seen"`
	Covered  float64 `json:"covered"`
	Missed   uint64  `json:"missed"`
	Floor    bool    `json:"floor,omitempty"`
	Unknown  bool    `json:"unknown,omitempty"`
}

// newTraceMissed returns ms for a JSON call line; nil if there are none.
func newTraceMissed(ms []trace.MissedCalls) []TraceMissed {
	if len(ms) == 0 {
		return nil
	}
	out := make([]TraceMissed, len(ms))
	for i, m := range ms {
		// Shares to four places, as the dominant part's.
		out[i] = TraceMissed{Function: m.Func.Name, Seen: m.Seen, Covered: math.Round(m.Covered*1e4) / 1e4, Missed: m.Missed, Floor: m.Floor, Unknown: m.Unknown}
	}
	return out
}

// TraceTime is a call's trace.TimeSplit: its parts add up to its duration.
type TraceTime struct {
	OnCPUNS    uint64 `json:"on_cpu_ns"`
	RunnableNS uint64 `json:"runnable_ns"`
	// Blocked are the waits, by reason, object and who ended them.
	Blocked   []TraceWait `json:"blocked"`
	UnknownNS uint64      `json:"unknown_ns,omitempty"`
	// Partial says scheduler events of the call were lost: UnknownNS is
	// the time they leave unattributed.
	Partial bool `json:"partial,omitempty"`
}

// TraceWait is the time a call spent in waits of one kind.
type TraceWait struct {
	// Reason is the runtime's wait reason string.
	Reason string `json:"reason"`
	NS     uint64 `json:"ns"`
	Count  int    `json:"count"`
	// WokenBy is the goroutine whose action ended the waits (absent when
	// none did: timers, the network poller), WokenByFunction where it was.
	WokenBy         uint64      `json:"woken_by,omitempty"`
	WokenByFunction string      `json:"woken_by_function,omitempty"`
	Object          *WaitObject `json:"object,omitempty"`
}

// NewTraceTime returns t for a JSON call line; nil if t is.
func NewTraceTime(t *trace.TimeSplit) *TraceTime {
	if t == nil {
		return nil
	}
	out := &TraceTime{OnCPUNS: t.OnCPU, RunnableNS: t.Runnable, UnknownNS: t.Unknown, Partial: t.Partial, Blocked: []TraceWait{}}
	for _, b := range t.Blocked {
		w := TraceWait{Reason: b.Reason, NS: b.NS, Count: b.Count, WokenBy: b.WokenBy, WokenByFunction: b.WokenByFunction}
		if o := b.Object; o.Kind != "" {
			// As gi ps writes what a goroutine waits on.
			in := inspect.WaitObject{Kind: o.Kind, Addr: o.Addr, Name: o.Name, Dir: o.Dir}
			if o.Kind == "fd" {
				fd := o.FD
				in.FD, in.Type = &fd, fd.Kind
			}
			obj := NewWaitObject(in)
			w.Object = &obj
		}
		out.Blocked = append(out.Blocked, w)
	}
	return out
}

// TraceSummary is the last line of `gi trace --json`.
type TraceSummary struct {
	Events uint64 `json:"events"`
	Lost   uint64 `json:"lost"`
	// UnreadFloats counts calls whose float registers were not read.
	UnreadFloats uint64 `json:"unread_floats,omitempty"`
	// Dropped counts the calls whose lines were not printed: the output
	// was not read fast enough, and gi drops lines rather than hold up
	// the trace (trace.OutputQueue).
	Dropped  uint64 `json:"dropped,omitempty"`
	Probes   int    `json:"probes"`
	AttachNS int64  `json:"attach_ns"`
	DetachNS int64  `json:"detach_ns"`
	// Overhead is what the probes cost the traced process (nil when
	// every process running a binary was traced).
	Overhead *TraceOverhead `json:"overhead,omitempty"`
	// Sampling says which functions were traced in sampling windows
	// (nil when none was).
	Sampling *TraceSampling `json:"sampling,omitempty"`
}

// TraceSampling is a trace's trace.Sampling in the JSON summary.
type TraceSampling struct {
	Budget      float64 `json:"budget"`
	Windows     int     `json:"windows"`
	TracedShare float64 `json:"traced_share"`
	Cut         uint64  `json:"cut"`
	// WhyWindowed: --why's probes on the scheduler were attached in the
	// windows only; Unsplit calls were then left without a split.
	WhyWindowed bool   `json:"why_windowed,omitempty"`
	Unsplit     uint64 `json:"unsplit,omitempty"`
	// ExitWindowed: the goroutine-exit probe was attached in the windows
	// only (trace.Sampling.ExitWindowed).
	ExitWindowed bool `json:"exit_windowed,omitempty"`
	// Missed, MissedFloors and MissedUnknown are trace.Sampling's: the
	// nested calls of sampled functions calls traced whole missed.
	Missed        uint64 `json:"missed,omitempty"`
	MissedFloors  uint64 `json:"missed_floors,omitempty"`
	MissedUnknown uint64 `json:"missed_unknown,omitempty"`
	// StalledNS is trace.Sampling.Stalled; ClosingNS its Closing.
	StalledNS int64             `json:"stalled_ns,omitempty"`
	ClosingNS int64             `json:"closing_ns"`
	Functions []SampledFunction `json:"functions"`
}

// SampledFunction is one function traced in sampling windows.
type SampledFunction struct {
	Function       string  `json:"function"`
	Calls          uint64  `json:"calls"`
	Cut            uint64  `json:"cut"`
	EstimatedCalls float64 `json:"estimated_calls"`
	RatePerSecond  float64 `json:"rate_per_second"`
}

// NewTraceSampling returns s for the JSON summary; nil if s is.
func NewTraceSampling(s *trace.Sampling) *TraceSampling {
	if s == nil {
		return nil
	}
	out := &TraceSampling{Budget: s.Budget, Windows: s.Windows, TracedShare: s.TracedShare(), Cut: s.Cut,
		WhyWindowed: s.SchedWindowed, Unsplit: s.Unsplit, ExitWindowed: s.ExitWindowed, Missed: s.Missed, MissedFloors: s.MissedFloors, MissedUnknown: s.MissedUnknown, StalledNS: s.Stalled.Nanoseconds(), ClosingNS: s.Closing.Nanoseconds(),
		Functions: []SampledFunction{}}
	for _, f := range s.Functions {
		out.Functions = append(out.Functions, SampledFunction{Function: f.Func.Name, Calls: f.Calls, Cut: f.Cut,
			EstimatedCalls: s.EstimatedCalls(f), RatePerSecond: f.Rate.PerSecond})
	}
	return out
}

// TraceOverhead is a trace's trace.Overhead in the JSON summary.
type TraceOverhead struct {
	ProbeNS       int64   `json:"probe_ns"`
	TargetCPUNS   int64   `json:"target_cpu_ns"`
	Hits          uint64  `json:"hits"`
	Share         float64 `json:"share"`
	CostsMeasured bool    `json:"costs_measured"`
}

// NewTraceOverhead returns o for the JSON summary; nil when the target's
// CPU time is unknown.
func NewTraceOverhead(o trace.Overhead) *TraceOverhead {
	if o.TargetCPU <= 0 {
		return nil
	}
	return &TraceOverhead{ProbeNS: o.Probes.Nanoseconds(), TargetCPUNS: o.TargetCPU.Nanoseconds(), Hits: o.Hits,
		Share: o.Share(), CostsMeasured: o.Costs.Measured}
}

// TraceWriter writes the lines of `gi trace --json`: completed calls, then
// the summary.
type TraceWriter struct {
	enc     *json.Encoder
	Symbols *trace.Symbols
	Clock   trace.Clock
}

// NewTraceWriter returns a TraceWriter on w.
func NewTraceWriter(w io.Writer, sym *trace.Symbols, clock trace.Clock) *TraceWriter {
	return &TraceWriter{enc: json.NewEncoder(w), Symbols: sym, Clock: clock}
}

// Call writes one completed call.
func (j *TraceWriter) Call(k trace.GoroutineKey, c *trace.Call) error {
	return j.enc.Encode(NewTraceCall(j.Symbols, j.Clock, k, c))
}

// NewTraceCall is call c of goroutine k as gi trace --json prints it:
// sym resolves its caller and formats its arguments, clock converts its
// times.
func NewTraceCall(sym *trace.Symbols, clock trace.Clock, k trace.GoroutineKey, c *trace.Call) TraceCall {
	caller := sym.Resolve(k.PID, c.CallerPC, true)
	return TraceCall{
		Goid: k.Goid, PID: k.PID, Function: c.Func.Name, File: c.Func.File, Line: c.Func.Line,
		CallerFunction: caller.Function, CallerFile: caller.File, CallerLine: caller.Line,
		Depth: c.Depth, StartNS: clock.Wall(c.Start).UnixNano(), DurationNS: int64(c.Duration()), Unwound: c.Unwound,
		Running: c.Running, Args: sym.Values(k.PID, c.Func.Args, c.Args),
		Results: sym.Values(k.PID, c.Func.Results, c.Results),
		Time:    NewTraceTime(c.Time),
		Missed:  newTraceMissed(c.Missed),
	}
}

// Running writes the calls of one goroutine still open when the trace
// ended (as trace.Handlers.Running gives them, outermost first), innermost first
// like completed calls.
func (j *TraceWriter) Running(k trace.GoroutineKey, open []*trace.Call) error {
	for i := len(open) - 1; i >= 0; i-- {
		if err := j.Call(k, open[i]); err != nil {
			return fmt.Errorf("write running call %s: %w", open[i].Func.Name, err)
		}
	}
	return nil
}

// Summary writes the final summary line.
func (j *TraceWriter) Summary(s TraceSummary) error {
	return j.enc.Encode(struct {
		Summary TraceSummary `json:"summary"`
	}{s})
}
