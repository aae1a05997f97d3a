package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/leak"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
)

// leakReport is what gi ps --leaks prints below the listing.
type leakReport struct {
	doc *report.Leaks
}

// leakOptions are the walk's options for the flags o.
func leakOptions(o psOptions, errOut io.Writer) leak.Options {
	opts := leak.Options{Growth: int64(o.leakMaxGrowth) << 20}
	if o.leakMaxGrowth < 0 {
		opts.Growth = -1
	}
	if o.leakTrace {
		opts.Trace = errOut
	}
	return opts
}

// newLeakReport renders the verdict v on snap's goroutines (nil: none
// asked, and the report prints nothing).
func newLeakReport(v *service.LeakVerdict, snap *inspect.Snapshot) *leakReport {
	if v == nil {
		return nil
	}
	d := &report.Leaks{Mode: v.Mode, Leaked: len(v.Leaked), Candidates: v.Candidates, Undecided: v.Undecided,
		WalkNS: v.Took.Nanoseconds(), MarkedObjects: v.Marked, Sites: leakSites(snap.Goroutines)}
	if c := v.Capture; c != nil {
		d.CaptureNS, d.HeapBytes = c.Took.Nanoseconds(), c.HeapBytes
		d.PreCopyNS, d.RewrittenPages, d.InStop = c.PreCopy.Nanoseconds(), c.Rewritten, c.InStop
		if c.Frozen {
			d.Frozen, d.ReapPauseNS = true, c.ReapPause.Nanoseconds()
		}
	}
	return &leakReport{doc: d}
}

// leakSites counts the leaked goroutines by the go statement that created
// them, most first.
func leakSites(gs []*inspect.Goroutine) []report.LeakSite {
	type key struct {
		fn, file string
		line     int
	}
	sites := map[key]*report.LeakSite{}
	var order []key
	for _, g := range gs {
		if !g.Leaked {
			continue
		}
		k := key{fn: "(unknown)"}
		if c := g.CreatedBy; c != nil {
			k = key{c.Function, c.File, c.Line}
		}
		s, ok := sites[k]
		if !ok {
			s = &report.LeakSite{Function: k.fn, File: k.file, Line: k.line}
			sites[k] = s
			order = append(order, k)
		}
		s.Count++
		s.Goids = append(s.Goids, g.ID)
	}
	out := make([]report.LeakSite, 0, len(order))
	for _, k := range order {
		out = append(out, *sites[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// write prints the verdict: how many leaked, by creation site, how, and
// what it cost. A nil report prints nothing.
func (r *leakReport) write(out io.Writer) error {
	if r == nil {
		return nil
	}
	d := r.doc
	fmt.Fprintf(out, "\nleaks: %d leaked goroutines", d.Leaked)
	if d.Candidates > 0 {
		fmt.Fprintf(out, " (%d blocked on channels and sync objects were judged)", d.Candidates)
	}
	fmt.Fprintln(out)
	for _, s := range d.Sites {
		where := ""
		if s.File != "" {
			where = fmt.Sprintf(" (%s:%d)", inspect.ShortPath(s.File), s.Line)
		}
		noun := "goroutines"
		if s.Count == 1 {
			noun = "goroutine"
		}
		fmt.Fprintf(out, "  %d leaked %s created at %s%s\n", s.Count, noun, s.Function, where)
	}
	if d.Undecided != "" {
		fmt.Fprintf(out, "leaks: reachability undecided, only the goroutines blocked forever by definition are marked: %s\n", d.Undecided)
		return nil
	}
	if d.Candidates > 0 {
		how := fmt.Sprintf("heap %.1f MB copied in the stop in %v (%s)", float64(d.HeapBytes)/1e6, time.Duration(d.CaptureNS).Round(time.Microsecond), d.InStop)
		switch {
		case d.Frozen:
			how = fmt.Sprintf("heap %.1f MB read in %v from a copy the process made of itself in the stop, after it resumed; the copy reaped in a second stop of %v", float64(d.HeapBytes)/1e6,
				time.Duration(d.CaptureNS).Round(time.Microsecond), time.Duration(d.ReapPauseNS).Round(time.Microsecond))
		case d.InStop == "":
			how = fmt.Sprintf("heap %.1f MB copied before the stop in %v, the %d pages written since read again in %v of the pause", float64(d.HeapBytes)/1e6,
				time.Duration(d.PreCopyNS).Round(time.Microsecond), d.RewrittenPages, time.Duration(d.CaptureNS).Round(time.Microsecond))
		}
		fmt.Fprintf(out, "leaks: %s; %s; walked in %v\n", d.Mode, how, time.Duration(d.WalkNS).Round(time.Microsecond))
	}
	return nil
}
