package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/ptrace"
)

// Symbols resolves addresses of the traced process(es) to functions and lines.
type Symbols struct {
	Lines *pclntab.LineTable

	loadBias func(pid int) (uint64, error)
	bias     map[uint32]uint64
	// args and typesBase name the dynamic types of captured interfaces.
	args      *funcargs.Reader
	typesBase uint64
}

// NewSymbols returns a resolver for processes running bin.
func NewSymbols(bin *elfbin.Binary) *Symbols {
	return &Symbols{Lines: bin.Lines, loadBias: bin.LoadBias, bias: map[uint32]uint64{}}
}

// Bias returns the load bias of process pid (0 unless PIE), read once.
func (s *Symbols) Bias(pid uint32) uint64 {
	b, ok := s.bias[pid]
	if !ok {
		b, _ = s.loadBias(int(pid)) // 0 for a process gone meanwhile
		s.bias[pid] = b
	}
	return b
}

// Values formats what a probe of process pid captured (payload) with c:
// arguments at an entry, results at a return. Nil when nothing was
// captured.
func (s *Symbols) Values(pid uint32, c *funcargs.Capture, payload []byte) []funcargs.Value {
	if c == nil || (payload == nil && len(c.Ops) > 0) {
		return nil
	}
	var types funcargs.TypeResolver
	if s.args != nil && s.typesBase != 0 {
		bias := s.Bias(pid)
		types = func(addr uint64) godwarf.Type {
			if addr < bias+s.typesBase {
				return nil
			}
			return s.args.RuntimeType(addr - bias - s.typesBase)
		}
	}
	return c.Decode(payload, types)
}

// Site describes a code address: function, offset from its entry, file and line.
type Site struct {
	Function string
	Offset   uint64
	File     string
	Line     int
}

// Resolve symbolizes a runtime pc of process pid. For a return address
// (call site), pass returnAddr true: the line is that of the CALL before it.
func (s *Symbols) Resolve(pid uint32, pc uint64, returnAddr bool) Site {
	return s.ResolveLink(pc-s.Bias(pid), returnAddr)
}

// ResolveLink symbolizes a link-time address.
func (s *Symbols) ResolveLink(addr uint64, returnAddr bool) Site {
	f := s.Lines.FuncForPC(addr)
	if f == nil {
		return Site{Function: fmt.Sprintf("%#x", addr)}
	}
	site := Site{Function: f.Name, Offset: addr - f.Entry}
	lookup := addr
	if returnAddr && lookup > f.Entry {
		lookup--
	}
	if frames, err := s.Lines.Frames(f, lookup); err == nil && len(frames) > 0 {
		// The innermost logical frame: where the call is in the source.
		site.File, site.Line = frames[0].File, frames[0].Line
		if len(frames) > 1 {
			site.Function = frames[0].Function
		}
	}
	return site
}

// Header describes a goroutine for the header of its trees.
type Header struct {
	Goid      uint64
	PID       uint32
	CreatedBy Site
	ParentID  uint64
	Labels    map[string]string
	// G is the address of the goroutine's runtime.g when it was first seen.
	G uint64
	// Known is false when nothing could be learnt about the creator.
	Known bool
}

// String renders "goroutine 18 (created by main.serve at main.go:42 in goroutine 7) {worker=w1}".
func (h Header) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "goroutine %d", h.Goid)
	if h.Known && h.CreatedBy.Function != "" {
		fmt.Fprintf(&b, " (created by %s at %s:%d", h.CreatedBy.Function, filepath.Base(h.CreatedBy.File), h.CreatedBy.Line)
		if h.ParentID != 0 {
			fmt.Fprintf(&b, " in goroutine %d", h.ParentID)
		}
		b.WriteString(")")
	}
	if len(h.Labels) > 0 {
		keys := make([]string, 0, len(h.Labels))
		for k := range h.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" {")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k + "=" + h.Labels[k])
		}
		b.WriteString("}")
	}
	return b.String()
}

// TreePrinter writes call trees as text, one block per completed root call.
type TreePrinter struct {
	W       *bufio.Writer
	Symbols *Symbols
	// Clock converts event times to wall-clock times.
	Clock Clock
	// PID is printed in headers when a trace covers several processes.
	ShowPID bool
}

// Clock maps CLOCK_MONOTONIC nanoseconds to wall-clock time.
type Clock struct {
	wallAtZero time.Time
}

// NewClock captures the offset between CLOCK_MONOTONIC and wall time now.
//
// The wall clock is read between two reads of the monotonic one, a few
// times: the pair whose reads lie closest together gives the offset, so
// that gi being descheduled between two reads does not shift every time
// it prints.
func NewClock() Clock {
	var best Clock
	gap := int64(-1)
	for range 5 {
		before := monotonicNow()
		wall := time.Now()
		after := monotonicNow()
		if d := after - before; gap < 0 || d < gap {
			gap = d
			best = Clock{wallAtZero: wall.Add(-time.Duration(before + d/2))}
		}
	}
	return best
}

// Wall converts a monotonic timestamp.
func (c Clock) Wall(mono uint64) time.Time {
	return c.wallAtZero.Add(time.Duration(mono))
}

const treeTimeLayout = "15:04:05.000000"

// Print writes one root call's tree under its goroutine header. A call
// still running when the trace ended (Call.Running) closes with its time so
// far and says so.
func (p *TreePrinter) Print(h Header, root *Call) {
	if p.ShowPID {
		fmt.Fprintf(p.W, "pid %d ", h.PID)
	}
	p.W.WriteString(h.String())
	p.W.WriteByte('\n')
	p.printCall(h.PID, root)
	p.W.WriteByte('\n')
}

func (p *TreePrinter) printCall(pid uint32, c *Call) {
	indent := strings.Repeat("  ", c.Depth)
	caller := p.Symbols.Resolve(pid, c.CallerPC, true)
	open := fmt.Sprintf("%s%s(%s) {", indent, c.Func.Name, FormatArgs(p.Symbols.Values(pid, c.Func.Args, c.Args)))
	fmt.Fprintf(p.W, "%s  %10s  %-50s  %s+%#x %s:%d\n", p.Clock.Wall(c.Start).Format(treeTimeLayout), "", open,
		caller.Function, caller.Offset, filepath.Base(caller.File), caller.Line)
	for _, ch := range c.Children {
		p.printCall(pid, ch)
	}
	if c.Dropped > 0 {
		fmt.Fprintf(p.W, "%s  %10s  %s  ... %d more calls not kept\n", strings.Repeat(" ", len(treeTimeLayout)), "", indent, c.Dropped)
	}
	closing := fmt.Sprintf("%s} %s", indent, c.Func.Name)
	if res := p.Symbols.Values(pid, c.Func.Results, c.Results); len(res) > 0 {
		closing += " = " + FormatResults(res)
	}
	where := ""
	switch {
	case c.Running:
		where = "still running at exit (time so far)"
	case c.Unwound:
		where = "unwound (panic, recover or Goexit)"
	case c.ReturnSite != 0:
		ret := p.Symbols.ResolveLink(c.ReturnSite, false)
		where = fmt.Sprintf("%s:%d", filepath.Base(ret.File), ret.Line)
	}
	fmt.Fprintf(p.W, "%s  %10s  %-50s  %s\n", p.Clock.Wall(c.End).Format(treeTimeLayout), FormatDuration(time.Duration(c.Duration())), closing, where)
}

// FormatArgs writes arguments as a call's parameter list: "id=42, key=\"a\"".
func FormatArgs(vs []funcargs.Value) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Name + "=" + v.Value)
	}
	return b.String()
}

// FormatResults writes results as Go writes a return: one alone, several
// in parentheses: "3", "(3, nil)".
func FormatResults(vs []funcargs.Value) string {
	if len(vs) == 1 {
		return vs[0].Value
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Value
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// FormatDuration prints a latency with 3 decimals in a fitting unit:
// 850ns, 12.345µs, 3.456ms, 1.234s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
}

// JSONCall is one line of `gi trace --json`: a completed call.
type JSONCall struct {
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
}

// Summary is the last line of `gi trace --json`.
type Summary struct {
	Events uint64 `json:"events"`
	Lost   uint64 `json:"lost"`
	// UnreadFloats counts calls whose float registers were not read.
	UnreadFloats uint64 `json:"unread_floats,omitempty"`
	Probes       int    `json:"probes"`
	AttachNS     int64  `json:"attach_ns"`
	DetachNS     int64  `json:"detach_ns"`
}

// JSONWriter writes completed calls as JSON lines.
type JSONWriter struct {
	enc     *json.Encoder
	Symbols *Symbols
	Clock   Clock
}

// NewJSONWriter returns a JSONWriter on w.
func NewJSONWriter(w io.Writer, sym *Symbols, clock Clock) *JSONWriter {
	return &JSONWriter{enc: json.NewEncoder(w), Symbols: sym, Clock: clock}
}

// Call writes one completed call.
func (j *JSONWriter) Call(k GoroutineKey, c *Call) error {
	caller := j.Symbols.Resolve(k.PID, c.CallerPC, true)
	return j.enc.Encode(JSONCall{
		Goid: k.Goid, PID: k.PID, Function: c.Func.Name, File: c.Func.File, Line: c.Func.Line,
		CallerFunction: caller.Function, CallerFile: caller.File, CallerLine: caller.Line,
		Depth: c.Depth, StartNS: j.Clock.Wall(c.Start).UnixNano(), DurationNS: int64(c.Duration()), Unwound: c.Unwound,
		Running: c.Running, Args: j.Symbols.Values(k.PID, c.Func.Args, c.Args),
		Results: j.Symbols.Values(k.PID, c.Func.Results, c.Results),
	})
}

// Running writes the calls of one goroutine still open when the trace
// ended (as Handlers.Running gives them, outermost first), innermost first
// like completed calls.
func (j *JSONWriter) Running(k GoroutineKey, open []*Call) error {
	for i := len(open) - 1; i >= 0; i-- {
		if err := j.Call(k, open[i]); err != nil {
			return fmt.Errorf("write running call %s: %w", open[i].Func.Name, err)
		}
	}
	return nil
}

// Summary writes the final summary line.
func (j *JSONWriter) Summary(s Summary) error {
	return j.enc.Encode(struct {
		Summary Summary `json:"summary"`
	}{s})
}

// Stats accumulates per-function latency histograms.
type Stats struct {
	byFunc map[*Function]*Histogram
}

// NewStats returns empty statistics.
func NewStats() *Stats { return &Stats{byFunc: make(map[*Function]*Histogram)} }

// Add records one completed call. Unwound calls are counted too: their
// duration is the time until they were unwound.
func (s *Stats) Add(c *Call) {
	h := s.byFunc[c.Func]
	if h == nil {
		h = &Histogram{}
		s.byFunc[c.Func] = h
	}
	h.Record(time.Duration(c.Duration()))
}

// Of returns the histogram of fn, nil if it was never seen.
func (s *Stats) Of(fn *Function) *Histogram { return s.byFunc[fn] }

// Write prints the statistics table, busiest function (by total time) first.
func (s *Stats) Write(w io.Writer) error {
	fns := make([]*Function, 0, len(s.byFunc))
	for f := range s.byFunc {
		fns = append(fns, f)
	}
	sort.Slice(fns, func(i, j int) bool {
		a, b := s.byFunc[fns[i]], s.byFunc[fns[j]]
		if a.Total() != b.Total() {
			return a.Total() > b.Total()
		}
		return fns[i].Name < fns[j].Name
	})
	tbl := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Settings: tw.Settings{
				Separators: tw.Separators{ShowHeader: tw.Off, ShowFooter: tw.Off, BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowTop: tw.Off, ShowBottom: tw.Off, ShowHeaderLine: tw.Off, ShowFooterLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignRight),
		tablewriter.WithAlignment(tw.Alignment{tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight}),
	)
	tbl.Header("FUNCTION", "CALLS", "MIN", "P50", "P90", "P99", "MAX", "TOTAL")
	for _, f := range fns {
		h := s.byFunc[f]
		if err := tbl.Append([]string{f.Name, fmt.Sprint(h.Count()), FormatDuration(h.Min()), FormatDuration(h.Quantile(0.5)),
			FormatDuration(h.Quantile(0.9)), FormatDuration(h.Quantile(0.99)), FormatDuration(h.Max()), FormatDuration(h.Total())}); err != nil {
			return err
		}
	}
	return tbl.Render()
}

// MonotonicNow returns the host's CLOCK_MONOTONIC in nanoseconds, the
// clock of event timestamps (bpf_ktime_get_ns), even when gi runs in a
// time namespace of its own.
func MonotonicNow() int64 { return monotonicNow() }

// selfClockOffset is gi's own time-namespace offset, read once.
var selfClockOffset = sync.OnceValue(func() int64 {
	off, _ := ptrace.MonotonicOffset(0)
	return int64(off)
})

// monotonicNow returns the host's CLOCK_MONOTONIC, the clock
// bpf_ktime_get_ns reads: gi's own clock minus its namespace's offset.
func monotonicNow() int64 {
	// The offset first: the first call reads it from /proc, and the clock
	// must be read after that, not before.
	off := selfClockOffset()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() - off
}
