package trace

import (
	"sort"
	"time"
)

// Stats accumulates per-function latency histograms, and with --why the
// histograms of each part of the calls' time.
type Stats struct {
	byFunc map[*Function]*Histogram
	parts  map[*Function]*partStats
}

// partStats are one function's time splits: per part, the histogram of
// its non-zero values, over split calls.
type partStats struct {
	calls uint64
	order []string
	hist  map[string]*Histogram
}

// NewStats returns empty statistics.
func NewStats() *Stats {
	return &Stats{byFunc: make(map[*Function]*Histogram), parts: make(map[*Function]*partStats)}
}

// Add records one completed call. Unwound calls are counted too: their
// duration is the time until they were unwound.
func (s *Stats) Add(c *Call) {
	h := s.byFunc[c.Func]
	if h == nil {
		h = &Histogram{}
		s.byFunc[c.Func] = h
	}
	h.Record(time.Duration(c.Duration()))
	if c.Time != nil {
		s.addSplit(c.Func, c.Time)
	}
}

// Part names of a split besides the wait reasons.
const (
	PartOnCPU    = "on CPU"
	PartRunnable = "runnable"
	PartUnknown  = "unknown"
)

func (s *Stats) addSplit(fn *Function, t *TimeSplit) {
	ps := s.parts[fn]
	if ps == nil {
		ps = &partStats{hist: map[string]*Histogram{}}
		s.parts[fn] = ps
	}
	ps.calls++
	byPart := map[string]uint64{PartOnCPU: t.OnCPU, PartRunnable: t.Runnable, PartUnknown: t.Unknown}
	for _, b := range t.Blocked {
		byPart[b.Reason] += b.NS
	}
	for _, name := range append([]string{PartOnCPU, PartRunnable}, blockedReasons(t)...) {
		ps.record(name, byPart[name])
	}
	ps.record(PartUnknown, byPart[PartUnknown])
}

func blockedReasons(t *TimeSplit) []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range t.Blocked {
		if !seen[b.Reason] {
			seen[b.Reason] = true
			out = append(out, b.Reason)
		}
	}
	return out
}

func (ps *partStats) record(name string, ns uint64) {
	if ns == 0 {
		return
	}
	h := ps.hist[name]
	if h == nil {
		h = &Histogram{}
		ps.hist[name] = h
		ps.order = append(ps.order, name)
	}
	h.Record(time.Duration(ns))
}

// PartStat is one part of a function's calls' time (--why).
type PartStat struct {
	// Name is on CPU, runnable, unknown or a wait reason.
	Name string
	// Mean and P99 are over every split call, those without the part
	// counting zero; Share is the part's share of the calls' total time.
	Mean, P99 time.Duration
	Share     float64
}

// Parts returns where fn's calls' time went, the largest share first;
// nil if none of its calls was split.
func (s *Stats) Parts(fn *Function) []PartStat {
	ps := s.parts[fn]
	if ps == nil || ps.calls == 0 {
		return nil
	}
	var total time.Duration
	for _, h := range ps.hist {
		total += h.Total()
	}
	out := make([]PartStat, 0, len(ps.order))
	for _, name := range ps.order {
		h := ps.hist[name]
		p := PartStat{Name: name, Mean: h.Total() / time.Duration(ps.calls)}
		// The 99th percentile over all calls, of which those without
		// the part are zeros below the histogram's values.
		if q := 1 - 0.01*float64(ps.calls)/float64(h.Count()); q > 0 {
			p.P99 = h.Quantile(q)
		}
		if total > 0 {
			p.Share = float64(h.Total()) / float64(total)
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Share > out[j].Share })
	return out
}

// Of returns the histogram of fn, nil if it was never seen.
func (s *Stats) Of(fn *Function) *Histogram { return s.byFunc[fn] }

// Functions returns the functions seen, busiest (by total time) first.
func (s *Stats) Functions() []*Function {
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
	return fns
}
