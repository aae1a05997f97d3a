package trace

import (
	"sort"
	"time"
)

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
