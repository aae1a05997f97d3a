package trace

import (
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf/link"
)

// Counting while the programs load. Under a budget, the calls of the
// functions are counted before their probes go in (countCalls: 50 ms, and
// attaching and detaching a counting probe per function); the verifier
// meanwhile would have nothing to do, though it takes longer than the
// counting to check the tracing programs (20 to 120 ms each on 6.18, 230
// ms for those of a trace without arguments). So the maps and the
// counting program, which the verifier checks in a millisecond, load
// first, the calls are counted and the functions to sample chosen, and the
// tracing programs load meanwhile on the same maps (bpf.LoadSharing).
// A trace whose probes capture arguments loads its programs again when
// its plans need more room or float registers, on maps of their own, so
// it counts after loading as before.

// countsWhileLoading reports whether the session counts the calls while
// its tracing programs load: under a budget, with no capture plans.
func (s *Session) countsWhileLoading() bool {
	return s.Opts.MaxOverhead > 0 && !s.Opts.empty && !s.Opts.countOnly && len(s.Opts.Where) == 0 &&
		(!s.Opts.Args || len(s.Selection.Functions) > maxArgFunctions)
}

// loadCounting loads the maps of setup and the counting program, makes
// them the session's (with what the counting needs: the executable, the
// probe table by address where probes find their cookie so, the
// scheduler's probes schedIdx), and sets setup to load the other programs
// on those maps.
func (s *Session) loadCounting(setup *loadSetup, schedIdx []int) error {
	first := *setup
	first.programs = []string{"gi_count"}
	l := s.loadObjects(first)
	if l.err != nil {
		return l.err
	}
	s.objs = l.objs // closed by Close from now on
	s.noteMissing(l.missing)
	s.CookieByIP, s.UprobeMulti = l.byIP, l.multi
	if l.byIP {
		bias, err := s.probeBias()
		if err != nil {
			return err
		}
		for i, p := range s.probes {
			if err := s.objs.Cookies.Put(p.site+bias, s.cookie(i)); err != nil {
				return fmt.Errorf("probe table by address: %w", err)
			}
		}
	}
	var err error
	if s.exe, err = link.OpenExecutable(s.Opts.Path); err != nil {
		return fmt.Errorf("open %s for uprobes: %w", s.Opts.Path, err)
	}
	s.schedIdx = schedIdx
	setup.maps = l.objs
	setup.programs = slices.DeleteFunc(slices.Clone(setup.programs), func(p string) bool { return p == "gi_count" })
	return nil
}

// countWhileLoading counts the calls and chooses the functions to sample
// (planSampling) while the tracing programs load, and returns groups
// without the probes of those, and how long it took.
func (s *Session) countWhileLoading(groups []probeGroup) ([]probeGroup, time.Duration) {
	start := time.Now()
	s.startMeter()
	groups = s.planSampling(groups)
	return groups, time.Since(start)
}
