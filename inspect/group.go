package inspect

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Group is a set of goroutines with the same state, the same visible stack
// and the same creator: what panicparse and `dlv goroutines -group` fold.
type Group struct {
	State      string
	Goroutines []*Goroutine
	// MinWait and MaxWait bound the members' wait durations (zero when none is known).
	MinWait, MaxWait time.Duration
}

// Representative returns the group's first goroutine.
func (g *Group) Representative() *Goroutine { return g.Goroutines[0] }

// GroupGoroutines folds goroutines by state and stack, largest group first
// (ties by the smallest goroutine id).
func GroupGoroutines(gs []*Goroutine, allFrames bool) []*Group {
	index := make(map[string]*Group)
	var groups []*Group
	var key strings.Builder
	for _, g := range gs {
		key.Reset()
		key.WriteString(g.State)
		for _, f := range g.Frames {
			if f.Elided && !allFrames {
				continue
			}
			key.WriteByte('|')
			key.WriteString(f.Function)
			key.WriteByte(' ')
			key.WriteString(f.File)
			key.WriteByte(':')
			key.WriteString(strconv.Itoa(f.Line))
		}
		if c := g.CreatedBy; c != nil {
			key.WriteString("|created by ")
			key.WriteString(c.Function)
			key.WriteString(strconv.Itoa(c.Line))
		}
		gr, ok := index[key.String()]
		if !ok {
			gr = &Group{State: g.State}
			index[key.String()] = gr
			groups = append(groups, gr)
		}
		gr.Goroutines = append(gr.Goroutines, g)
		if g.WaitKnown {
			if gr.MinWait == 0 || g.Wait < gr.MinWait {
				gr.MinWait = g.Wait
			}
			if g.Wait > gr.MaxWait {
				gr.MaxWait = g.Wait
			}
		}
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if len(groups[i].Goroutines) != len(groups[j].Goroutines) {
			return len(groups[i].Goroutines) > len(groups[j].Goroutines)
		}
		return groups[i].Representative().ID < groups[j].Representative().ID
	})
	return groups
}
