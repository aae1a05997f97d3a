package export

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/gi-debug/gi/trace"
)

// Profile accumulates a pprof profile of the time spent in traced functions
// by call path: one sample per distinct path of traced calls (innermost
// first) and goroutine labels, valued in nanoseconds of self time (a call's
// duration less its traced children's), so that `go tool pprof -http`
// draws the flame graph of a trace. Memory grows with the distinct paths,
// not with the calls.
type Profile struct {
	samples map[string]*sample
	funcs   map[*trace.Function]*profile.Function
	locs    map[*trace.Function]*profile.Location
	p       *profile.Profile
	// Nanos is the total time recorded.
	Nanos int64
}

type sample struct {
	stack  []*trace.Function // innermost first
	labels map[string][]string
	nanos  int64
	calls  int64
}

// NewProfile returns an empty profile.
func NewProfile() *Profile {
	return &Profile{samples: map[string]*sample{}, funcs: map[*trace.Function]*profile.Function{},
		locs: map[*trace.Function]*profile.Location{}, p: &profile.Profile{}}
}

// Root records a completed root call of goroutine h and its whole tree.
func (pr *Profile) Root(h trace.Header, root *trace.Call) {
	labels := map[string][]string{"goroutine": {strconv.FormatUint(h.Goid, 10)}}
	for k, v := range h.Labels {
		labels[k] = []string{v}
	}
	var walk func(c *trace.Call, path []*trace.Function)
	walk = func(c *trace.Call, path []*trace.Function) {
		path = append([]*trace.Function{c.Func}, path...)
		self := int64(c.Duration())
		for _, ch := range c.Children {
			self -= int64(ch.Duration())
			walk(ch, path)
		}
		pr.add(path, labels, max(self, 0))
	}
	walk(root, nil)
}

func (pr *Profile) add(stack []*trace.Function, labels map[string][]string, nanos int64) {
	if stack[0].Sampled {
		// The self time of a function traced in sampling windows: some of
		// its calls, not all.
		marked := make(map[string][]string, len(labels)+1)
		for k, v := range labels {
			marked[k] = v
		}
		marked["gi_sampled"] = []string{"true"}
		labels = marked
	}
	var key strings.Builder
	for _, f := range stack {
		fmt.Fprintf(&key, "%p;", f)
	}
	lk := make([]string, 0, len(labels))
	for k, v := range labels {
		lk = append(lk, strconv.Quote(k)+"="+strconv.Quote(v[0]))
	}
	sort.Strings(lk)
	key.WriteString(strings.Join(lk, ","))
	s := pr.samples[key.String()]
	if s == nil {
		s = &sample{stack: append([]*trace.Function(nil), stack...), labels: labels}
		pr.samples[key.String()] = s
	}
	s.nanos += nanos
	s.calls++
	pr.Nanos += nanos
}

func (pr *Profile) location(f *trace.Function) *profile.Location {
	if l := pr.locs[f]; l != nil {
		return l
	}
	fn := &profile.Function{ID: uint64(len(pr.p.Function) + 1), Name: f.Name, SystemName: f.Name, Filename: f.File, StartLine: int64(f.Line)}
	pr.p.Function = append(pr.p.Function, fn)
	l := &profile.Location{ID: uint64(len(pr.p.Location) + 1), Address: f.Entry, Line: []profile.Line{{Function: fn, Line: int64(f.Line)}}}
	pr.p.Location = append(pr.p.Location, l)
	pr.locs[f] = l
	return l
}

// Sampling notes, in the profile's comments, what sampling did (nil:
// nothing was sampled): the functions traced in windows, whose samples
// carry the label gi_sampled=true and count the calls the windows saw,
// not scaled.
func (pr *Profile) Sampling(sm *trace.Sampling) {
	if sm == nil {
		return
	}
	for _, f := range sm.Functions {
		pr.p.Comments = append(pr.p.Comments, fmt.Sprintf("gi: %s traced in %d sampling windows covering %.1f%% of the trace (--max-overhead %.3g%%): its samples (gi_sampled=true) are the calls the windows saw, about %.0f in all",
			f.Func.Name, sm.Windows, 100*sm.TracedShare(), 100*sm.Budget, sm.EstimatedCalls(f)))
	}
	if sm.SchedWindowed {
		pr.p.Comments = append(pr.p.Comments, fmt.Sprintf("gi: --why's scheduler probes attached in %d sampling windows", sm.Windows))
	}
}

// Write writes the profile (gzipped protobuf) to w.
func (pr *Profile) Write(w io.Writer) error {
	p := pr.p
	p.SampleType = []*profile.ValueType{{Type: "calls", Unit: "count"}, {Type: "time", Unit: "nanoseconds"}}
	p.DefaultSampleType = "time"
	keys := make([]string, 0, len(pr.samples))
	for k := range pr.samples {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := pr.samples[k]
		ps := &profile.Sample{Value: []int64{s.calls, s.nanos}, Label: s.labels}
		for _, f := range s.stack {
			ps.Location = append(ps.Location, pr.location(f))
		}
		p.Sample = append(p.Sample, ps)
	}
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("pprof profile: %w", err)
	}
	return p.Write(w)
}
