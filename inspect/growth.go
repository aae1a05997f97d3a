package inspect

import (
	"sort"
	"strconv"
	"time"
)

// Growth is how a process's goroutines changed between two snapshots:
// counts by creation site and by stack, and the goroutines that have not
// moved (the leak hunt's views when what they wait on is still
// reachable: a forgotten queue, a global).
type Growth struct {
	// Interval is the time between the snapshots (their stops).
	Interval time.Duration
	// Before and After count the goroutines of each (system ones aside).
	Before, After int
	// Sites are the go statements goroutines were created at, and
	// Stacks the states and stacks they are in (GroupGoroutines' key):
	// each with its counts, most grown first, then largest.
	Sites  []SiteGrowth
	Stacks []StackGrowth
	// Unmoved are the goroutines of the later snapshot that have not
	// moved since the earlier: the same goroutine (id and g), at the
	// same pc and stack pointer, in the same wait (reason and start).
	Unmoved []*Goroutine
}

// SiteGrowth is the goroutines created at one go statement.
type SiteGrowth struct {
	// Function, File and Line are the go statement's; Function is
	// "(runtime)" for goroutines the runtime starts without one shown.
	Function string
	File     string
	Line     int
	Counts
}

// StackGrowth is the goroutines in one state and stack.
type StackGrowth struct {
	// Representative is one of them, in the later snapshot (or the
	// earlier, when none is left).
	Representative *Goroutine
	Counts
}

// Counts are a group's goroutines in each snapshot (Before, After) and
// those of After that have not moved (Unmoved).
type Counts struct {
	Before, After, Unmoved int
}

// Delta returns how many more goroutines the later snapshot has.
func (c Counts) Delta() int { return c.After - c.Before }

// Compare returns how the goroutines of after grew since before: both
// snapshots of one process, system goroutines left out.
func Compare(before, after *Snapshot) *Growth {
	gr := &Growth{Interval: after.Taken.Sub(before.Taken)}
	prev := map[uint64]*Goroutine{}
	for _, g := range before.Goroutines {
		if !g.System {
			prev[g.ID] = g
			gr.Before++
		}
	}
	sites := map[string]*SiteGrowth{}
	stacks := map[string]*StackGrowth{}
	site := func(g *Goroutine) *SiteGrowth {
		s := SiteGrowth{Function: "(runtime)"}
		if c := g.CreatedBy; c != nil {
			s = SiteGrowth{Function: c.Function, File: c.File, Line: c.Line}
		}
		key := s.Function + " " + s.File + ":" + strconv.Itoa(s.Line)
		if p, ok := sites[key]; ok {
			return p
		}
		sites[key] = &s
		return &s
	}
	stack := func(g *Goroutine) *StackGrowth {
		key := groupKey(g, false)
		if p, ok := stacks[key]; ok {
			return p
		}
		p := &StackGrowth{Representative: g}
		stacks[key] = p
		return p
	}
	for _, g := range before.Goroutines {
		if !g.System {
			site(g).Before++
			stack(g).Before++
		}
	}
	for _, g := range after.Goroutines {
		if g.System {
			continue
		}
		gr.After++
		s, st := site(g), stack(g)
		s.After++
		st.After++
		if st.After == 1 {
			st.Representative = g
		}
		if p := prev[g.ID]; p != nil && Unmoved(p, g) {
			gr.Unmoved = append(gr.Unmoved, g)
			s.Unmoved++
			st.Unmoved++
		}
	}
	for _, s := range sites {
		gr.Sites = append(gr.Sites, *s)
	}
	sort.Slice(gr.Sites, func(i, j int) bool {
		a, b := gr.Sites[i], gr.Sites[j]
		if a.Delta() != b.Delta() {
			return a.Delta() > b.Delta()
		}
		if a.After != b.After {
			return a.After > b.After
		}
		return a.Function+a.File+strconv.Itoa(a.Line) < b.Function+b.File+strconv.Itoa(b.Line)
	})
	for _, s := range stacks {
		gr.Stacks = append(gr.Stacks, *s)
	}
	sort.Slice(gr.Stacks, func(i, j int) bool {
		a, b := gr.Stacks[i], gr.Stacks[j]
		if a.Delta() != b.Delta() {
			return a.Delta() > b.Delta()
		}
		if a.After != b.After {
			return a.After > b.After
		}
		return a.Representative.ID < b.Representative.ID
	})
	return gr
}

// Unmoved reports whether goroutine g of a later snapshot is where p,
// the same goroutine in an earlier one, was, parked all along: waiting
// in both, the same g, pc and stack pointer, the same wait (reason and
// start, once the runtime stamped it), and the same count of times it
// stopped running (g.trackingSeq, modulo 256).
func Unmoved(p, g *Goroutine) bool {
	if g.Status != "waiting" || p.Status != g.Status || p.Addr != g.Addr || p.SP != g.SP || p.SP == 0 {
		return false
	}
	if p.WaitReason != g.WaitReason || p.Transitions != g.Transitions || (p.WaitSince != 0 && p.WaitSince != g.WaitSince) {
		return false
	}
	// The innermost frame the runtime's dump shows (a saved listing
	// keeps no other).
	pf, gf := firstVisible(p), firstVisible(g)
	return pf != nil && gf != nil && pf.PC == gf.PC
}

// firstVisible returns g's innermost frame the runtime's dump shows.
func firstVisible(g *Goroutine) *Frame {
	for i := range g.Frames {
		if !g.Frames[i].Elided {
			return &g.Frames[i]
		}
	}
	return nil
}
