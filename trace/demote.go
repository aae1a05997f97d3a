package trace

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Choosing again. The functions to sample are chosen from the calls
// counted before the trace; a function idle then and hot later would be
// traced whole at any cost. So while a run goes, the measured cost of the
// functions traced whole is checked every governPeriod; past the budget's
// margin, the costliest are moved to the sampling windows (demote), until
// the rest costs half the margin.

// governPeriod is how often the cost of the functions traced whole is
// checked; governTrigger is the share of the budget they may take over a
// period before the costliest are sampled (above the margin partition
// leaves them, so that a function at the edge does not move for noise).
const (
	governPeriod  = time.Second
	governTrigger = 0.6
)

// wholeLink is the probes of one program group of functions traced whole,
// attached together: one uprobe_multi link, or a perf event per probe
// (links[j] for idx[j]). gen is their generation (probe_gen).
type wholeLink struct {
	group int
	idx   []int
	links []link.Link
	gen   uint8
}

// groupPrograms returns the programs of the probe groups, in their order.
func (s *Session) groupPrograms() []*ebpf.Program {
	o := s.objs
	return []*ebpf.Program{o.GiEntry, o.GiEntryReturn, o.GiReturn, o.GiGoexit}
}

// attachGroups attaches each group's program at its probes, and keeps the
// links by group (s.whole).
func (s *Session) attachGroups(groups []probeGroup) error {
	for i, prog := range s.groupPrograms() {
		if len(groups[i].idx) == 0 {
			continue
		}
		if s.Opts.Empty {
			prog = s.objs.GiEmpty
		}
		links, err := s.linksFor(s.exe, prog, groups[i].idx, s.UprobeMulti)
		if len(links) > 0 {
			idx := slices.Clone(groups[i].idx)
			if !s.UprobeMulti {
				idx = idx[:len(links)] // a perf event each, those made
			}
			s.whole = append(s.whole, &wholeLink{group: i, idx: idx, links: links})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// wholeLinks returns the links of the functions traced whole.
func (s *Session) wholeLinks() []link.Link {
	var out []link.Link
	for _, w := range s.whole {
		out = append(out, w.links...)
	}
	return out
}

// govern checks what the functions traced whole cost over d, a period of
// the run, and moves the costliest to the sampling windows when they take
// more than governTrigger of the budget, until the rest takes half the
// margin. It returns the functions moved.
func (s *Session) govern(d Overhead) ([]*Function, error) {
	cpu := max(d.TargetCPU, d.Interval)
	if cpu <= 0 || d.Interval <= 0 {
		return nil, nil
	}
	var whole float64
	var rates []CallRate
	for _, f := range d.Functions {
		if f.Func.Sampled || f.Hits == 0 {
			continue
		}
		share := float64(f.Time) / float64(cpu)
		whole += share
		// Hits at the entry and at a RET: two a call.
		rates = append(rates, CallRate{Func: f.Func, PerSecond: float64(f.Hits) / 2 / d.Interval.Seconds(), Cost: share})
	}
	budget := s.Opts.MaxOverhead
	if whole <= governTrigger*budget {
		return nil, nil
	}
	sort.SliceStable(rates, func(i, j int) bool { return rates[i].Cost > rates[j].Cost })
	var moved []CallRate
	for _, r := range rates {
		if whole <= budget*budgetMargin/2 {
			break
		}
		moved = append(moved, r)
		whole -= r.Cost
	}
	if err := s.demote(moved); err != nil {
		return nil, err
	}
	fns := make([]*Function, len(moved))
	for i, r := range moved {
		fns[i] = r.Func
	}
	return fns, nil
}

// errNoRelink says the probes cannot move between links: uprobe_multi
// links whose probes find their cookie by address.
var errNoRelink = errors.New("the probes find their cookies by address: a function traced whole cannot be moved to the sampling windows")

// demote moves the functions of rates, traced whole, to the sampling
// windows: their probes stop reporting at once (their generation flips),
// then leave the links of the functions traced whole, and the sampler
// (made if there is none) attaches them in its windows from its next. A
// uprobe_multi link is replaced by one of the rest, whose cookies carry
// the other generation: attached, then made the one that reports
// (probe_gen), then the old one closed, so that no hit of the rest is
// reported twice or lost. A perf event is closed alone.
func (s *Session) demote(rates []CallRate) error {
	if len(rates) == 0 {
		return nil
	}
	if s.UprobeMulti && s.CookieByIP {
		return errNoRelink
	}
	moving := map[*Function]bool{}
	for _, r := range rates {
		moving[r.Func] = true
	}
	genRoom := int(s.objs.ProbeGen.MaxEntries())
	for _, w := range s.whole {
		for _, i := range w.idx {
			if i >= genRoom {
				return fmt.Errorf("probe %d has no generation to move it by (room for %d)", i, genRoom)
			}
		}
	}
	// First the moving functions' probes stop reporting, all within
	// microseconds, entries first: their generation flips, which their
	// links' cookies no longer carry. A call they entered before returns
	// unseen, and is cut; one entered between the two flips has its
	// return dropped, unmatched. Their links then go at leisure.
	order := slices.Clone(s.whole)
	rank := map[int]int{entryGroup: 0, entryReturnGroup: 1, returnGroup: 2, goexitGroup: 3}
	sort.SliceStable(order, func(i, j int) bool { return rank[order[i].group] < rank[order[j].group] })
	for _, w := range order {
		for _, i := range w.idx {
			if moving[s.probes[i].fn] {
				s.probes[i].gen = 1 - w.gen
				if err := s.objs.ProbeGen.Put(uint32(i), s.probes[i].gen); err != nil {
					return fmt.Errorf("probe generation: %w", err)
				}
			}
		}
	}
	groups := newProbeGroups()
	var keep []*wholeLink
	for _, w := range order {
		var rest, gone []int
		var restLinks, goneLinks []link.Link
		for j, i := range w.idx {
			if moving[s.probes[i].fn] {
				gone = append(gone, i)
				if !s.UprobeMulti {
					goneLinks = append(goneLinks, w.links[j])
				}
			} else {
				rest = append(rest, i)
				if !s.UprobeMulti {
					restLinks = append(restLinks, w.links[j])
				}
			}
		}
		if len(gone) == 0 {
			keep = append(keep, w)
			continue
		}
		groups[w.group].idx = append(groups[w.group].idx, gone...)
		if !s.UprobeMulti {
			if err := closeLinks(goneLinks); err != nil {
				return err
			}
			if len(rest) > 0 {
				keep = append(keep, &wholeLink{group: w.group, idx: rest, links: restLinks, gen: w.gen})
			}
			continue
		}
		if len(rest) > 0 {
			gen := 1 - w.gen
			for _, i := range rest {
				s.probes[i].gen = gen
			}
			links, err := s.linksFor(s.exe, s.groupPrograms()[w.group], rest, true)
			if err != nil {
				closeLinks(links)
				for _, i := range rest {
					s.probes[i].gen = w.gen
				}
				return err
			}
			for _, i := range rest {
				if err := s.objs.ProbeGen.Put(uint32(i), gen); err != nil {
					return fmt.Errorf("probe generation: %w", err)
				}
			}
			keep = append(keep, &wholeLink{group: w.group, idx: rest, links: links, gen: gen})
		}
		if err := closeLinks(w.links); err != nil {
			return err
		}
	}
	s.whole = keep
	for _, r := range rates {
		r.Func.Sampled = true
	}
	s.sampleGroups(groups, rates, "became costly during the trace")
	return nil
}
