package inspect

import (
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// WritePprof writes goroutines as a pprof goroutine profile (gzipped
// protobuf) that `go tool pprof` opens. Goroutines with the same stack and
// labels become one sample with their count; labels are kept.
func WritePprof(w io.Writer, snap *Snapshot, gs []*Goroutine) error {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "goroutine", Unit: "count"}},
		PeriodType:    &profile.ValueType{Type: "goroutine", Unit: "count"},
		Period:        1,
		TimeNanos:     snap.Taken.UnixNano(),
		DurationNanos: snap.Pause.Nanoseconds(),
		Comments:      []string{"gi ps snapshot of pid " + strconv.Itoa(snap.PID) + " (" + snap.GoVersion + ")"},
	}
	mapping := &profile.Mapping{ID: 1, File: snap.Exe, HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true}
	p.Mapping = []*profile.Mapping{mapping}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	samples := map[string]*profile.Sample{}
	function := func(name, file string) *profile.Function {
		k := name + "\x00" + file
		if f, ok := funcs[k]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file}
		funcs[k] = f
		p.Function = append(p.Function, f)
		return f
	}
	for _, g := range gs {
		frames := g.VisibleFrames()
		var key strings.Builder
		var sampleLocs []*profile.Location
		// One location per physical frame; its lines list the inlined
		// frames innermost first, as pprof expects.
		for i := 0; i < len(frames); {
			j := i
			for j < len(frames)-1 && frames[j].Inlined && frames[j+1].PC == frames[i].PC {
				j++
			}
			var lk strings.Builder
			lk.WriteString(strconv.FormatUint(frames[i].PC, 16))
			for _, f := range frames[i : j+1] {
				lk.WriteString("|" + f.Function + ":" + strconv.Itoa(f.Line))
			}
			loc, ok := locs[lk.String()]
			if !ok {
				loc = &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: mapping, Address: frames[i].PC}
				for _, f := range frames[i : j+1] {
					loc.Line = append(loc.Line, profile.Line{Function: function(f.Function, f.File), Line: int64(f.Line)})
				}
				locs[lk.String()] = loc
				p.Location = append(p.Location, loc)
			}
			sampleLocs = append(sampleLocs, loc)
			key.WriteString(strconv.FormatUint(loc.ID, 10) + ",")
			i = j + 1
		}
		labels := map[string][]string{}
		names := make([]string, 0, len(g.Labels))
		for k := range g.Labels {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			labels[k] = []string{g.Labels[k]}
			key.WriteString("|" + k + "=" + g.Labels[k])
		}
		if s, ok := samples[key.String()]; ok {
			s.Value[0]++
			continue
		}
		s := &profile.Sample{Location: sampleLocs, Value: []int64{1}}
		if len(labels) > 0 {
			s.Label = labels
		}
		samples[key.String()] = s
		p.Sample = append(p.Sample, s)
	}
	if err := p.CheckValid(); err != nil {
		return err
	}
	return p.Write(w)
}
