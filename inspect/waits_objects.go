package inspect

import (
	"sort"
	"time"
)

// WaitedObject is one object goroutines wait on, with all its waiters:
// what `gi ps --objects` lists.
type WaitedObject struct {
	// Object is the object as its first waiter sees it (Dir cleared).
	Object WaitObject
	// Goroutines wait on it, by goroutine id; ByDir counts them by side
	// ("send", "recv", "read", "write", or "").
	Goroutines []*Goroutine
	ByDir      map[string]int
	// LongestWait is the longest any of them has waited (WaitKnown).
	LongestWait time.Duration
}

// WaitedObjects groups the goroutines of gs by the object they wait on,
// most waiters first. Objects without an address (sleeps, unknown ones)
// are grouped by kind and what is known; folded sleeps show the soonest
// wake-up.
func WaitedObjects(gs []*Goroutine) []*WaitedObject {
	byKey := map[string]*WaitedObject{}
	var out []*WaitedObject
	for _, g := range gs {
		for _, o := range g.WaitingOn {
			key := objectKey(o)
			wo := byKey[key]
			if wo == nil {
				obj := o
				obj.Dir = ""
				wo = &WaitedObject{Object: obj, ByDir: map[string]int{}}
				byKey[key] = wo
				out = append(out, wo)
			}
			if o.Kind == "timer" && o.Unknown == "" && o.WakeIn < wo.Object.WakeIn {
				wo.Object.WakeIn = o.WakeIn // sleeps are folded: the soonest wake-up
			}
			if n := len(wo.Goroutines); n == 0 || wo.Goroutines[n-1] != g { // a select may name a channel twice
				wo.Goroutines = append(wo.Goroutines, g)
				wo.ByDir[o.Dir]++
				if g.WaitKnown && g.Wait > wo.LongestWait {
					wo.LongestWait = g.Wait
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Goroutines) > len(out[j].Goroutines) })
	return out
}

// Facts states what plainly points at a bug about the object: nobody on
// the other side of a channel, a WaitGroup nobody will bring to zero.
func (wo *WaitedObject) Facts() []string {
	var facts []string
	o := wo.Object
	if c := o.Chan; c != nil && o.Addr != 0 {
		switch {
		case c.Closed:
		case c.Receivers > 0 && c.Senders == 0 && c.Len == 0:
			facts = append(facts, "no goroutine waits to send")
		case c.Senders > 0 && c.Receivers == 0:
			facts = append(facts, "no goroutine waits to receive")
		}
	}
	if o.Kind == "chan" && o.Addr == 0 && o.Unknown == "" {
		facts = append(facts, "a nil channel: no operation will ever wake it")
	}
	return facts
}

// AllBlocked reports whether every goroutine of the program (system ones
// aside) is blocked: none running, runnable or in a system call.
func AllBlocked(gs []*Goroutine) (blocked, total int) {
	for _, g := range gs {
		if g.System {
			continue
		}
		total++
		switch g.Status {
		case "waiting":
			blocked++
		}
	}
	return blocked, total
}
