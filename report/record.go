package report

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/trace"
)

// RecordSummary is what one snapshot of `gi record` showed: a line of a
// record's summaries.jsonl, and what its triggers are judged on. System
// goroutines are left out, as gi ps leaves them out.
type RecordSummary struct {
	// Time is the snapshot's (RFC 3339), PauseNS how long it stopped the
	// process.
	Time    time.Time `json:"time"`
	PauseNS int64     `json:"pause_ns"`
	// Goroutines counts them; States by state (the wait reason of a
	// blocked one, else its status), most first; Sites by the go
	// statement that created them, most first, at most SummarySites.
	Goroutines int          `json:"goroutines"`
	States     []StateCount `json:"states"`
	Sites      []SiteCount  `json:"sites"`
	// Longest are the longest waits, longest first, at most
	// SummaryWaits.
	Longest []LongWait `json:"longest_waits"`
	// MemoryBytes and MemoryLimit are the process's memory cgroup's
	// usage and limit, the one closest to its limit (0: none known).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	MemoryLimit int64 `json:"memory_limit,omitempty"`
	// Latencies are the traced functions' calls that ended since the
	// snapshot before (gi record with functions traced).
	Latencies []FunctionLatency `json:"latencies,omitempty"`
	// LeaksJudged says the leak rule was judged on this snapshot (gi
	// record with a condition on leaks), Leaked how many goroutines it
	// found leaked, LeaksUndecided why it could not decide ("" when it
	// did).
	LeaksJudged    bool   `json:"leaks_judged,omitempty"`
	Leaked         int    `json:"leaked,omitempty"`
	LeaksUndecided string `json:"leaks_undecided,omitempty"`
}

// FunctionLatency is the calls of one function over an interval.
type FunctionLatency struct {
	Function string `json:"function"`
	Calls    uint64 `json:"calls"`
	P50NS    int64  `json:"p50_ns"`
	P90NS    int64  `json:"p90_ns"`
	P99NS    int64  `json:"p99_ns"`
	P999NS   int64  `json:"p999_ns"`
	MaxNS    int64  `json:"max_ns"`
}

// quantileNames are the percentiles a FunctionLatency keeps.
var quantileNames = [...]struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p999", 0.999}}

// QuantileOf returns the quantile a percentile a FunctionLatency keeps
// names ("p99": 0.99), false for another.
func QuantileOf(name string) (float64, bool) {
	for _, n := range quantileNames {
		if n.name == name {
			return n.q, true
		}
	}
	return 0, false
}

// QuantileName names a quantile QuantileOf gives ("p99").
func QuantileName(q float64) string {
	for _, n := range quantileNames {
		if n.q == q {
			return n.name
		}
	}
	return fmt.Sprintf("q%g", q)
}

// NewFunctionLatency sums up h, the calls of function over an interval.
func NewFunctionLatency(function string, h *trace.Histogram) FunctionLatency {
	return FunctionLatency{Function: function, Calls: h.Count(), P50NS: int64(h.Quantile(0.5)), P90NS: int64(h.Quantile(0.9)),
		P99NS: int64(h.Quantile(0.99)), P999NS: int64(h.Quantile(0.999)), MaxNS: int64(h.Max())}
}

// Quantile returns the quantile q of Quantiles (0 for another).
func (l FunctionLatency) Quantile(q float64) time.Duration {
	switch q {
	case 0.5:
		return time.Duration(l.P50NS)
	case 0.9:
		return time.Duration(l.P90NS)
	case 0.99:
		return time.Duration(l.P99NS)
	case 0.999:
		return time.Duration(l.P999NS)
	}
	return 0
}

// Latency returns the latency of function over the interval.
func (s *RecordSummary) Latency(function string) (FunctionLatency, bool) {
	for _, l := range s.Latencies {
		if l.Function == function {
			return l, true
		}
	}
	return FunctionLatency{}, false
}

// StateCount is how many goroutines are in one state.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
}

// SiteCount is how many goroutines one go statement created.
type SiteCount struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Count    int    `json:"count"`
}

// LongWait is a goroutine blocked for long, where.
type LongWait struct {
	Goid     uint64 `json:"goid"`
	State    string `json:"state"`
	WaitNS   int64  `json:"wait_ns"`
	Function string `json:"function"`
}

// How much of a snapshot a RecordSummary keeps.
const (
	SummarySites = 10
	SummaryWaits = 5
)

// NewRecordSummary sums up snap; memory and limit are the process's
// memory cgroup's usage and limit (0: unknown). waited, if set, says how
// long each goroutine has been blocked (0: not blocked, or unknown); nil
// takes what the runtime recorded (g.waitsince, stamped at collections).
func NewRecordSummary(snap *inspect.Snapshot, memory, limit int64, waited func(*inspect.Goroutine) time.Duration) RecordSummary {
	if waited == nil {
		waited = func(g *inspect.Goroutine) time.Duration {
			if g.WaitKnown {
				return g.Wait
			}
			return 0
		}
	}
	s := RecordSummary{Time: snap.Taken, PauseNS: snap.Pause.Nanoseconds(), MemoryBytes: memory, MemoryLimit: limit}
	states := map[string]int{}
	type siteKey struct {
		fn, file string
		line     int
	}
	sites := map[siteKey]int{}
	var waits []LongWait
	for _, g := range snap.Goroutines {
		if g.System {
			continue
		}
		s.Goroutines++
		states[g.State]++
		k := siteKey{fn: "(runtime)"}
		if c := g.CreatedBy; c != nil {
			k = siteKey{c.Function, inspect.ShortPath(c.File), c.Line}
		}
		sites[k]++
		if w := waited(g); w > 0 {
			fn := ""
			if f, ok := g.Location(); ok {
				fn = f.Function
			}
			waits = append(waits, LongWait{Goid: g.ID, State: g.State, WaitNS: w.Nanoseconds(), Function: fn})
		}
	}
	for st, n := range states {
		s.States = append(s.States, StateCount{State: st, Count: n})
	}
	slices.SortFunc(s.States, func(a, b StateCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.State, b.State))
	})
	for k, n := range sites {
		s.Sites = append(s.Sites, SiteCount{Function: k.fn, File: k.file, Line: k.line, Count: n})
	}
	slices.SortFunc(s.Sites, func(a, b SiteCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Function, b.Function), cmp.Compare(a.Line, b.Line))
	})
	s.Sites = s.Sites[:min(len(s.Sites), SummarySites)]
	slices.SortFunc(waits, func(a, b LongWait) int { return cmp.Or(cmp.Compare(b.WaitNS, a.WaitNS), cmp.Compare(a.Goid, b.Goid)) })
	s.Longest = waits[:min(len(waits), SummaryWaits)]
	if s.States == nil {
		s.States = []StateCount{}
	}
	if s.Sites == nil {
		s.Sites = []SiteCount{}
	}
	if s.Longest == nil {
		s.Longest = []LongWait{}
	}
	return s
}

// Count returns how many goroutines are in state (0: none).
func (s *RecordSummary) Count(state string) int {
	for _, c := range s.States {
		if c.State == state {
			return c.Count
		}
	}
	return 0
}

// LongestWait returns the longest wait of the snapshot (0: none known).
func (s *RecordSummary) LongestWait() time.Duration {
	if len(s.Longest) == 0 {
		return 0
	}
	return time.Duration(s.Longest[0].WaitNS)
}

// RecordTrigger is a record's trigger.json: what fired, on what, and
// when.
type RecordTrigger struct {
	// Condition is the --when that fired as given ("on demand" for
	// SIGUSR1), Value what it measured then, Why the sentence gi printed.
	Condition string    `json:"condition"`
	Value     string    `json:"value"`
	Why       string    `json:"why"`
	Time      time.Time `json:"time"`
	PID       int       `json:"pid"`
	// Summaries are how many snapshot summaries the record holds, over
	// KeptNS (the window kept), and Dropped how many the window's bound
	// dropped since the recording began.
	Summaries int   `json:"summaries"`
	KeptNS    int64 `json:"kept_ns"`
	Dropped   int   `json:"dropped"`
	// Cost is what the recording has cost the process so far.
	Cost RecordCost `json:"cost"`
	// Call is the call that fired a condition on calls (FUNC > D), with
	// its time split under --why.
	Call *TraceCall `json:"call,omitempty"`
	// Calls are the traced root calls the record holds (calls.jsonl,
	// perfetto.json), and CallsDropped those the window's bound dropped
	// since the recording began.
	Calls        int `json:"calls,omitempty"`
	CallsDropped int `json:"calls_dropped,omitempty"`
}

// RecordCost is what a recording has cost the process: the time it was
// stopped for snapshots, and what the probes of its trace took, against
// the process's CPU time (ProbesShare, what --max-overhead bounds).
type RecordCost struct {
	Snapshots   int     `json:"snapshots"`
	PausedNS    int64   `json:"paused_ns"`
	PauseShare  float64 `json:"pause_share"`
	ProbesNS    int64   `json:"probes_ns,omitempty"`
	ProbesShare float64 `json:"probes_share,omitempty"`
}

// String says what fired.
func (t RecordTrigger) String() string {
	return fmt.Sprintf("%s: %s", t.Condition, t.Value)
}
