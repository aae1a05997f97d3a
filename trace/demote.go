package trace

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/governor"
)

// Choosing again. The functions to sample are chosen from the calls
// counted before the trace; a function idle then and hot later would be
// traced whole at any cost. So while a run goes, the measured cost of the
// functions traced whole is checked every governor.Period; past the
// budget's trigger, the costliest are moved to the sampling windows
// (governor.Demote chooses them, demote moves them). A jump past the
// budget itself is caught sooner, at the drains between (watch.go).

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
		if s.Opts.empty {
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
// the run, and moves those governor.Demote chooses to the sampling
// windows. It returns the functions moved, and when they stopped
// reporting (see demote); rose, if set, is when their cost rose past the
// budget (the watch's last check within it).
func (s *Session) govern(d Overhead, rose time.Time) ([]*Function, uint64, error) {
	cpu := d.TargetCPU
	if cpu <= 0 {
		cpu = d.Interval // one CPU's worth
	}
	if cpu <= 0 || d.Interval <= 0 {
		return nil, 0, nil
	}
	var rates []CallRate
	var costs []governor.Cost
	functions := d.Functions
	if d.Exit.Func != nil {
		functions = append(slices.Clip(functions), d.Exit)
	}
	for _, f := range functions {
		if f.Func.Sampled || f.Hits == 0 {
			continue
		}
		share := float64(f.Time) / float64(cpu)
		ofCPU := f.Time.Seconds() / d.Interval.Seconds()
		// Hits at the entry and at a RET: two a call (one a goroutine
		// exit).
		perCall := 2.0
		if f.Func == s.exitFunc {
			perCall = 1
		}
		rates = append(rates, CallRate{Func: f.Func, PerSecond: float64(f.Hits) / perCall / d.Interval.Seconds(), Cost: share, CPU: ofCPU})
		costs = append(costs, governor.Cost{Share: share, CPU: ofCPU})
	}
	var moved []CallRate
	for _, i := range governor.Demote(costs, s.Opts.MaxOverhead) {
		moved = append(moved, rates[i])
	}
	stopped, err := s.demote(moved, rose)
	if stopped == 0 {
		return nil, 0, err
	}
	fns := make([]*Function, len(moved))
	for i, r := range moved {
		fns[i] = r.Func
	}
	return fns, stopped, err
}

// errNoRelink says the probes cannot move between links: uprobe_multi
// links whose probes find their cookie by address.
var errNoRelink = errors.New("the probes find their cookies by address: a function traced whole cannot be moved to the sampling windows")

// demote moves the functions of rates, traced whole, to the sampling
// windows, in three steps that leave the session whole if the first fails
// and committed once the second began:
//   - the links of the rest: a uprobe_multi link that holds probes of the
//     moving functions is replaced by one of the others, whose cookies
//     carry the other generation, attached first (perf events stay);
//   - the flips: in probe_gen the moving functions' probes take the
//     generation their links do not carry, so they stop reporting, and the
//     rest take their new links', which report from then on (for a moment
//     both links of a probe fire, one reporting; a hit whose two program
//     runs straddle the flip is reported twice or not at all);
//   - the old links closed (a perf event alone) in the background: their
//     breakpoints leave the code as the close begins, which then waits
//     for the kernel's grace periods (closeLater); and the moving
//     functions handed to the sampler (made if there is none), marked
//     Sampled.
//
// It returns when the moving functions stopped reporting (CLOCK_MONOTONIC
// ns): their calls open since are unseen, and cut. An error after the
// first step is returned with that time. rose, if set, is when their cost
// rose past the budget, for the report (SampledFunction.Reaction).
func (s *Session) demote(rates []CallRate, rose time.Time) (uint64, error) {
	if len(rates) == 0 {
		return 0, nil
	}
	if s.UprobeMulti && s.CookieByIP {
		return 0, errNoRelink
	}
	moving := map[*Function]bool{}
	for _, r := range rates {
		moving[r.Func] = true
	}
	type change struct {
		old        *wholeLink
		rest, gone []int
		restLinks  []link.Link // perf events: those kept
		goneLinks  []link.Link // perf events: those closed
		relinked   *wholeLink  // uprobe_multi: the rest's new link
	}
	genRoom := int(s.objs.ProbeGen.MaxEntries())
	var changes []*change
	var keep []*wholeLink
	for _, w := range s.whole {
		c := &change{old: w}
		for j, i := range w.idx {
			if moving[s.probeFunc(i)] {
				c.gone = append(c.gone, i)
				if !s.UprobeMulti {
					c.goneLinks = append(c.goneLinks, w.links[j])
				}
			} else {
				c.rest = append(c.rest, i)
				if !s.UprobeMulti {
					c.restLinks = append(c.restLinks, w.links[j])
				}
			}
		}
		if len(c.gone) == 0 {
			keep = append(keep, w)
			continue
		}
		for _, i := range w.idx {
			if i >= genRoom {
				return 0, fmt.Errorf("probe %d has no generation to move it by (room for %d)", i, genRoom)
			}
		}
		changes = append(changes, c)
	}
	// The rest's new links, of the other generation.
	undo := func() {
		for _, c := range changes {
			if c.relinked != nil {
				closeLinks(c.relinked.links)
				s.setGen(c.rest, c.old.gen)
			}
		}
	}
	if s.UprobeMulti {
		for _, c := range changes {
			if len(c.rest) == 0 {
				continue
			}
			gen := 1 - c.old.gen
			s.setGen(c.rest, gen)
			links, err := s.linksFor(s.exe, s.groupPrograms()[c.old.group], c.rest, true)
			c.relinked = &wholeLink{group: c.old.group, idx: c.rest, links: links, gen: gen}
			if err != nil {
				undo()
				return 0, err
			}
		}
	}
	// The flips, the moving entries first: a call entered before them
	// returns unseen, and is cut; one entered between the flips (a batch
	// each, microseconds apart) has its return dropped, unmatched.
	var entries, rets, rest []int
	for _, c := range changes {
		for _, i := range c.gone {
			if s.probes[i].kind == bpf.KindEntry {
				entries = append(entries, i)
			} else {
				rets = append(rets, i)
			}
		}
		if c.relinked != nil {
			rest = append(rest, c.rest...)
		}
	}
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, c := range changes {
		s.setGen(c.gone, 1-c.old.gen)
	}
	note(s.flipGens(entries))
	note(s.flipGens(rets))
	stopped := uint64(monotonicNow())
	note(s.flipGens(rest))
	var reaction time.Duration
	if !rose.IsZero() {
		reaction = time.Since(rose)
	}
	// The old links, and the hand-over.
	groups := newProbeGroups()
	var old []link.Link
	for _, c := range changes {
		groups[c.old.group].idx = append(groups[c.old.group].idx, c.gone...)
		if s.UprobeMulti {
			old = append(old, c.old.links...)
			if c.relinked != nil {
				keep = append(keep, c.relinked)
			}
			continue
		}
		old = append(old, c.goneLinks...)
		if len(c.rest) > 0 {
			keep = append(keep, &wholeLink{group: c.old.group, idx: c.rest, links: c.restLinks, gen: c.old.gen})
		}
	}
	s.whole = keep
	s.closeLater(old)
	counted := s.Rates
	if s.ExitRate != nil {
		counted = append(slices.Clip(counted), *s.ExitRate)
	}
	for _, r := range rates {
		r.Func.Sampled = true
		for _, counted := range counted {
			if counted.Func == r.Func {
				s.wholeCost = max(0, s.wholeCost-counted.Cost)
				s.wholeCPU = max(0, s.wholeCPU-counted.CPU)
			}
		}
	}
	s.sampleGroups(groups, rates, &movedNote{at: stopped, reaction: reaction})
	return stopped, first
}

// closeLater closes links in the background: a link's close removes its
// probes from the code at once, then waits for the kernel's grace periods
// (tens of milliseconds for a uprobe_multi link, 0.1-0.2 s per perf
// event), which Run's loop need not wait for. Close waits for them.
func (s *Session) closeLater(links []link.Link) {
	if len(links) == 0 {
		return
	}
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		if err := closeLinks(links); err != nil {
			s.closeMu.Lock()
			if s.closeErr == nil {
				s.closeErr = err
			}
			s.closeMu.Unlock()
		}
	}()
}

// setGen sets the generation the cookies of probes idx carry.
func (s *Session) setGen(idx []int, gen uint8) {
	s.probesMu.Lock()
	defer s.probesMu.Unlock()
	for _, i := range idx {
		s.probes[i].gen = gen
	}
}

// flipGens makes probes idx report with the generation their cookies
// carry (s.probes[i].gen), in one update where the kernel allows.
func (s *Session) flipGens(idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	keys := make([]uint32, len(idx))
	gens := make([]uint8, len(idx))
	s.probesMu.RLock()
	for j, i := range idx {
		keys[j], gens[j] = uint32(i), s.probes[i].gen
	}
	s.probesMu.RUnlock()
	if _, err := s.objs.ProbeGen.BatchUpdate(keys, gens, nil); err == nil {
		return nil
	}
	for j := range keys { // batches need 5.6
		if err := s.objs.ProbeGen.Put(keys[j], gens[j]); err != nil {
			return fmt.Errorf("probe generation: %w", err)
		}
	}
	return nil
}
