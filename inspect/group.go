package inspect

import (
	"fmt"
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

// GroupGoroutines folds goroutines by state and stack (leaked ones apart:
// gi ps --leaks), largest group first
// (ties by the smallest goroutine id).
func GroupGoroutines(gs []*Goroutine, allFrames bool) []*Group {
	index := make(map[string]*Group)
	var groups []*Group
	for _, g := range gs {
		key := groupKey(g, allFrames)
		gr, ok := index[key]
		if !ok {
			gr = &Group{State: g.State}
			index[key] = gr
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

// GroupWaitingOn says what the goroutines of gs, folded into one row,
// wait on. When every one waits on the same objects (the same addresses;
// sleeps and objects without an address compared by what is known of
// them, not by their text, which differs from sleeper to sleeper), it is
// those objects as a goroutine's WAITING ON says them, a sleep with the
// soonest wake-up, and shared is true; "" when none waits on anything
// known. Else it is how many objects they wait on ("2 objects").
func GroupWaitingOn(gs []*Goroutine) (text string, shared bool) {
	if len(gs) == 0 {
		return "", true
	}
	first := waitKey(gs[0])
	for _, g := range gs[1:] {
		if waitKey(g) != first {
			n := len(WaitedObjects(gs))
			if n == 1 {
				return "1 object", false
			}
			return fmt.Sprintf("%d objects", n), false
		}
	}
	objs := append([]WaitObject(nil), gs[0].WaitingOn...)
	for i := range objs {
		if objs[i].Kind != "timer" {
			continue
		}
		for _, g := range gs[1:] {
			objs[i].WakeIn = min(objs[i].WakeIn, g.WaitingOn[i].WakeIn)
		}
	}
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; "), true
}

// waitKey identifies the objects g waits on, in order: by kind and
// address, or for an object without an address by what is known of it.
func waitKey(g *Goroutine) string {
	var b strings.Builder
	for _, o := range g.WaitingOn {
		b.WriteString(objectKey(o))
		b.WriteByte(';')
	}
	return b.String()
}

// objectKey identifies one object goroutines wait on: its kind and
// address, or for one without an address (a sleep, an object gi could not
// read) its kind and what is known of it.
func objectKey(o WaitObject) string {
	if o.Addr == 0 {
		return o.Kind + "/" + o.Type + "/" + o.Unknown
	}
	return fmt.Sprintf("%s/%#x", o.Kind, o.Addr)
}

// groupKey is what goroutines folded into one group share: their state
// (leaked or not), frames and creator.
func groupKey(g *Goroutine, allFrames bool) string {
	var key strings.Builder
	key.WriteString(g.State)
	if g.Leaked {
		key.WriteString(" (leaked)") // apart from the same stack not leaked
	}
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
	return key.String()
}
