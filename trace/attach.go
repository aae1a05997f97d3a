package trace

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/proc"
)

// probeGroup is the probes of the table one program serves.
type probeGroup struct {
	name string // the program
	idx  []int  // indices into the probe table
}

// The groups appendProbes returns, in this order.
const (
	entryGroup = iota
	entryReturnGroup
	returnGroup
	goexitGroup
)

// newProbeGroups returns the groups, empty, in their order.
func newProbeGroups() []probeGroup {
	return []probeGroup{{name: "gi_entry"}, {name: "gi_entry_return"}, {name: "gi_return"}, {name: "gi_goexit"}}
}

// appendProbes adds the probes of fns to the table: an entry probe each
// (reporting the return too for a leaf whose entry is its RET) and one on
// every RET, right after it (see callCostAt). It returns the new probes by
// the program that serves them.
func (s *Session) appendProbes(fns []*Function) []probeGroup {
	groups := newProbeGroups()
	ret := s.returnClass()
	if s.entryProbe == nil {
		s.entryProbe = make(map[*Function]int, len(fns))
	}
	for _, fn := range fns {
		s.entryProbe[fn] = len(s.probes)
		both := s.entryIsReturn(fn)
		entry := probe{fn: fn, kind: bpf.KindEntry, site: fn.EntrySite, class: s.siteClassAt(fn.EntrySite), costKind: costEntry}
		if both {
			// One probe reports the entry and the return, the return's
			// plan right after the entry's.
			groups[entryReturnGroup].idx = append(groups[entryReturnGroup].idx, len(s.probes))
			entry.costKind = costEntryReturn
		} else {
			groups[entryGroup].idx = append(groups[entryGroup].idx, len(s.probes))
		}
		s.probes = append(s.probes, entry)
		for _, r := range fn.Returns {
			if s.Opts.entryOnly {
				break
			}
			if both && r == fn.EntrySite {
				continue
			}
			groups[returnGroup].idx = append(groups[returnGroup].idx, len(s.probes))
			s.probes = append(s.probes, probe{fn: fn, kind: bpf.KindReturn, site: r, class: ret, costKind: costReturn})
		}
	}
	return groups
}

// Add extends the running session with the functions include matches
// (besides Options.Exclude) that it does not trace yet, attaching their
// probes at once: a trace that follows a program as new functions become
// of interest (gi ps --trace, gi top) without reloading anything. The
// session must be opened with Options.Growable and capture no arguments.
// Add must not run beside Run's reading (call it from a Tick handler, or
// between runs). Under Options.MaxOverhead it first counts the new
// functions' calls (for 50 ms), and traces in sampling windows the
// costliest of those that would take the trace over the budget. It returns
// the functions added and those that matched but cannot be traced; a
// pattern that matches nothing new adds nothing.
func (s *Session) Add(include []Pattern) ([]*Function, []Untraceable, error) {
	if !s.Opts.Growable || s.closed {
		return nil, nil, errors.New("trace: functions are added only to an open session made growable")
	}
	if s.Opts.Args || len(s.Opts.Where) > 0 {
		return nil, nil, errors.New("trace: functions are not added to a session capturing arguments")
	}
	traced := make(map[string]bool, len(s.Selection.Functions))
	for _, f := range s.Selection.Functions {
		traced[f.Name] = true
	}
	var matched []*pclntab.Func
	for _, f := range s.sites.match(include, s.Opts.Exclude) {
		if !traced[f.Name] {
			matched = append(matched, f)
		}
	}
	if len(matched) == 0 {
		return nil, nil, nil
	}
	sel, err := s.sites.selectMatched(matched, include)
	if err != nil {
		return nil, nil, err
	}
	s.probesMu.Lock()
	first := len(s.probes)
	groups := s.appendProbes(sel.Functions)
	s.probesMu.Unlock()
	if s.CookieByIP {
		bias, err := s.probeBias()
		if err != nil {
			return nil, nil, err
		}
		for i := first; i < len(s.probes); i++ {
			if err := s.objs.Cookies.Put(s.probes[i].site+bias, s.cookie(i)); err != nil {
				return nil, nil, fmt.Errorf("probe table by address (room for %d probes): %w", s.objs.Cookies.MaxEntries(), err)
			}
		}
	}
	if s.Opts.MaxOverhead > 0 {
		groups = s.sampleAdded(groups, first, len(sel.Functions))
	}
	if err := s.attachGroups(groups); err != nil {
		return nil, nil, err
	}
	s.probesMu.Lock()
	for _, f := range sel.Functions {
		f.Index = len(s.Selection.Functions)
		s.Selection.Functions = append(s.Selection.Functions, f)
	}
	s.probesMu.Unlock()
	s.Selection.Untraceable = append(s.Selection.Untraceable, sel.Untraceable...)
	s.Probes = len(s.probes)
	return sel.Functions, sel.Untraceable, nil
}

// attach attaches prog at the probes idx: one uprobe_multi link, or one
// perf event per probe.
func (s *Session) attach(ex *link.Executable, prog *ebpf.Program, idx []int, multi bool) error {
	links, err := s.linksFor(ex, prog, idx, multi)
	s.links = append(s.links, links...)
	return err
}

// linksFor attaches prog at the probes idx and returns the links, for the
// caller to close (those made so far on error too).
func (s *Session) linksFor(ex *link.Executable, prog *ebpf.Program, idx []int, multi bool) ([]link.Link, error) {
	offsets := make([]uint64, len(idx))
	cookies := make([]uint64, len(idx))
	s.probesMu.RLock()
	for i, pi := range idx {
		off, err := s.Binary.FileOffset(s.probes[pi].site)
		if err != nil {
			s.probesMu.RUnlock()
			return nil, fmt.Errorf("probe at %#x: %w", s.probes[pi].site, err)
		}
		offsets[i], cookies[i] = off, s.cookie(pi)
	}
	s.probesMu.RUnlock()
	return s.linksAt(ex, prog, offsets, cookies, multi)
}

// attachAt attaches prog at file offsets with cookies: one uprobe_multi
// link, or one perf event per offset.
func (s *Session) attachAt(ex *link.Executable, prog *ebpf.Program, offsets, cookies []uint64, multi bool) error {
	links, err := s.linksAt(ex, prog, offsets, cookies, multi)
	s.links = append(s.links, links...)
	return err
}

// linksAt attaches prog at file offsets with cookies and returns the
// links, for the caller to close: one uprobe_multi link, or one perf
// event per offset. On error the links made so far are returned too.
func (s *Session) linksAt(ex *link.Executable, prog *ebpf.Program, offsets, cookies []uint64, multi bool) ([]link.Link, error) {
	if multi {
		l, err := ex.UprobeMulti(nil, prog, &link.UprobeMultiOptions{Addresses: offsets, Cookies: cookies, PID: uint32(s.Opts.PID)})
		if err != nil {
			return nil, s.attachError(err)
		}
		return []link.Link{l}, nil
	}
	var links []link.Link
	for i := range offsets {
		opts := &link.UprobeOptions{Address: offsets[i], PID: s.Opts.PID, Cookie: cookies[i]}
		if s.CookieByIP {
			opts.Cookie = 0 // found by address; kernels before 5.15 refuse any other
		}
		l, err := ex.Uprobe("", prog, opts)
		if err != nil {
			return links, s.attachError(err)
		}
		links = append(links, l)
	}
	return links, nil
}

// closeLinks detaches links, several at once (each waits for the
// kernel's grace periods), and returns the first error.
func closeLinks(links []link.Link) error {
	return parallel(len(links), func(i int) error {
		if err := links[i].Close(); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
		return nil
	})
}

// cookie is the BPF cookie of probe i: its index, its capture plan, and
// where the program finds g.
func (s *Session) cookie(i int) uint64 {
	c := uint64(i) | uint64(s.probes[i].plan)<<bpf.CookiePlanShift | uint64(s.probes[i].sched)<<bpf.CookiePlanShift
	if s.Opts.GFromTLS {
		c |= bpf.CookieTLS
	}
	if fn := s.probes[i].fn; fn != nil && fn.Sampled {
		c |= bpf.CookieSampled
	}
	if s.probes[i].class == classStepped {
		c |= bpf.CookieStepped
	}
	if s.probes[i].gen != 0 {
		c |= bpf.CookieGen
	}
	return c
}

// probeBias is what to add to a link-time address to get the address the
// probes fire at, when probes are found by address: the load bias of the
// traced process for a PIE.
func (s *Session) probeBias() (uint64, error) {
	if s.Binary.PIE && s.Opts.PID <= 0 {
		return 0, errors.New("kernel lacks BPF attach cookies (5.15+): probes are found by address, so tracing a PIE binary needs the pid of the process to trace")
	}
	if p := s.Opts.Process; p != nil {
		return p.Bias, nil
	}
	bias, err := proc.LoadBias(s.Opts.PID, s.Binary)
	if err != nil {
		return 0, fmt.Errorf("load address: %w", err)
	}
	return bias, nil
}
