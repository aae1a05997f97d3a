package main

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/trace"
)

// treePrinter writes call trees as text, one block per completed root call.
type treePrinter struct {
	W       *bufio.Writer
	Symbols *trace.Symbols
	// Clock converts event times to wall-clock times.
	Clock trace.Clock
	// PID is printed in headers when a trace covers several processes.
	ShowPID bool
}

const treeTimeLayout = "15:04:05.000000"

// Print writes one root call's tree under its goroutine header. A call
// still running when the trace ended (Call.Running) closes with its time so
// far and says so.
func (p *treePrinter) Print(h trace.Header, root *trace.Call) {
	if p.ShowPID {
		fmt.Fprintf(p.W, "pid %d ", h.PID)
	}
	p.W.WriteString(h.String())
	p.W.WriteByte('\n')
	p.printCall(h.PID, root)
	p.W.WriteByte('\n')
}

func (p *treePrinter) printCall(pid uint32, c *trace.Call) {
	indent := strings.Repeat("  ", c.Depth)
	caller := p.Symbols.Resolve(pid, c.CallerPC, true)
	open := fmt.Sprintf("%s%s(%s) {", indent, c.Func.Name, formatArgs(p.Symbols.Values(pid, c.Func.Args, c.Args)))
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
		closing += " = " + formatResults(res)
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
	fmt.Fprintf(p.W, "%s  %10s  %-50s  %s\n", p.Clock.Wall(c.End).Format(treeTimeLayout), formatLatency(time.Duration(c.Duration())), closing, where)
	if c.Time != nil {
		fmt.Fprintf(p.W, "%s  %10s  %s  %s\n", strings.Repeat(" ", len(treeTimeLayout)), "", indent, c.Time)
	}
	for _, m := range c.Missed {
		fmt.Fprintf(p.W, "%s  %10s  %s  %s\n", strings.Repeat(" ", len(treeTimeLayout)), "", indent, formatMissed(m))
	}
}

// formatMissed says what a call traced whole missed of a sampled function
// nested in it: "sampled out: ~278 calls of main.work (100 seen in the
// windows, which covered 30% of the call)".
func formatMissed(m trace.MissedCalls) string {
	switch {
	case m.Unknown:
		return fmt.Sprintf("sampled out: the calls of %s in it (no window covered this call)", m.Func.Name)
	case m.Floor:
		return fmt.Sprintf("sampled out: at least %d calls of %s (%d seen in the windows, which covered %.0f%% of the call; their probes took most of that time, so their pace outside was faster)",
			m.Missed, m.Func.Name, m.Seen, 100*m.Covered)
	}
	return fmt.Sprintf("sampled out: ~%d calls of %s (%d seen in the windows, which covered %.0f%% of the call)", m.Missed, m.Func.Name, m.Seen, 100*m.Covered)
}

// formatArgs writes arguments as a call's parameter list: "id=42, key=\"a\"".
func formatArgs(vs []funcargs.Value) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Name + "=" + v.Value)
	}
	return b.String()
}

// formatResults writes results as Go writes a return: one alone, several
// in parentheses: "3", "(3, nil)".
func formatResults(vs []funcargs.Value) string {
	if len(vs) == 1 {
		return vs[0].Value
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Value
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// formatLatency prints a latency with 3 decimals in a fitting unit:
// 850ns, 12.345µs, 3.456ms, 1.234s.
func formatLatency(d time.Duration) string {
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

// writeStats prints the latency table of every function traced, its
// function names shortened at their start to fit width columns (0: any).
func writeStats(w io.Writer, width int, s *trace.Stats, sampling *trace.Sampling) error {
	tbl := &listing{w: w, width: width}
	tbl.Header("FUNCTION", "CALLS", "MIN", "P50", "P90", "P99", "MAX", "TOTAL")
	tbl.AlignRight("CALLS", "MIN", "P50", "P90", "P99", "MAX", "TOTAL")
	tbl.ShrinkLeft("FUNCTION")
	for _, f := range s.Functions() {
		h := s.Of(f)
		calls := fmt.Sprint(h.Count())
		if f.Sampled && sampling != nil {
			// Traced in windows: the calls over the whole trace, estimated.
			calls = fmt.Sprintf("~%.0f", sampling.EstimatedCalls(trace.SampledFunction{Func: f, Calls: uint64(h.Count())}))
		}
		tbl.Append([]string{f.Name, calls, formatLatency(h.Min()), formatLatency(h.Quantile(0.5)),
			formatLatency(h.Quantile(0.9)), formatLatency(h.Quantile(0.99)), formatLatency(h.Max()), formatLatency(h.Total())})
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	return writeParts(w, width, s)
}

// writeParts prints, under --why, where each function's calls' time went:
// per part, the mean and the 99th percentile over its calls, and the
// part's share of their time.
func writeParts(w io.Writer, width int, s *trace.Stats) error {
	var tbl *listing
	for _, f := range s.Functions() {
		parts := s.Parts(f)
		if len(parts) == 0 {
			continue
		}
		if tbl == nil {
			io.WriteString(w, "\nwhere the time went (--why):\n")
			tbl = &listing{w: w, width: width}
			tbl.Header("FUNCTION", "PART", "MEAN", "P99", "SHARE")
			tbl.AlignRight("MEAN", "P99", "SHARE")
			tbl.ShrinkLeft("FUNCTION")
			tbl.Shrink("PART")
		}
		for i, p := range parts {
			name := ""
			if i == 0 {
				name = f.Name
			}
			tbl.Append([]string{name, p.Name, formatLatency(p.Mean), formatLatency(p.P99), fmt.Sprintf("%.1f%%", 100*p.Share)})
		}
	}
	if tbl == nil {
		return nil
	}
	return tbl.Render()
}
