package trace

import (
	"sort"
	"time"
)

// MissedCalls estimates, for a call traced whole, the calls of one sampled
// function nested in it that went unseen between the sampling windows
// (Options.MaxOverhead): a traced call whose hot children were sampled
// out says how many it missed.
type MissedCalls struct {
	Func *Function
	// Seen counts its nested calls reported, all in the windows; Covered
	// is the share of the call's time the windows covered.
	Seen    uint64
	Covered float64
	// Missed estimates its nested calls not seen, at their pace in the
	// windows less what their probes took there. Floor says the probes
	// took half the windows' time in the call or more: their pace outside
	// (unprobed) is unknown, and Missed, at the probed pace, is a floor.
	// Unknown says no window covered the call (or less than minCovered of
	// it), so nothing is estimated; the function was seen nested in other
	// calls of this call's.
	Missed         uint64
	Floor, Unknown bool
}

// span is one window's open time, CLOCK_MONOTONIC ns: from when its
// probes were all attached to when it began to close (0 while open).
type span struct{ from, until uint64 }

// maxSpans bounds the windows kept for coverage: at the densest, two a
// second, over two hours.
const maxSpans = 1 << 14

// openSpan records that a window's probes are all attached at t.
func (sm *sampler) openSpan(t uint64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if len(sm.spans) == maxSpans {
		sm.spans = append(sm.spans[:0], sm.spans[maxSpans/2:]...)
	}
	sm.spans = append(sm.spans, span{from: t})
}

// closeSpan records that the open window, if any, began to close at t.
func (sm *sampler) closeSpan(t uint64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if n := len(sm.spans); n > 0 && sm.spans[n-1].until == 0 {
		sm.spans[n-1].until = t
		sm.report.Open += time.Duration(t - sm.spans[n-1].from)
	}
}

// covered returns how long windows were open between from and to.
func (sm *sampler) covered(from, to uint64) uint64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	// The first window that ends after from (or is open).
	i := sort.Search(len(sm.spans), func(i int) bool { u := sm.spans[i].until; return u == 0 || u > from })
	var c uint64
	for ; i < len(sm.spans) && sm.spans[i].from < to; i++ {
		s := sm.spans[i]
		end := to
		if s.until != 0 && s.until < end {
			end = s.until
		}
		if start := max(s.from, from); end > start {
			c += end - start
		}
	}
	return c
}

// missedBook keeps, during a run, the sampled calls seen nested in the
// open calls traced whole, and estimates what those missed when they
// complete.
type missedBook struct {
	// covered is the windows' coverage (sampler.covered); cost what a
	// sampled function's call costs in probes (Session.callCost).
	covered func(from, to uint64) uint64
	cost    func(*Function) time.Duration
	costs   map[*Function]time.Duration
	seen    map[*Call]map[*Function]uint64
	// nested are the sampled functions seen nested in calls of each
	// function traced whole.
	nested map[*Function]map[*Function]bool
	// Missed sums the estimates; Unknown counts the calls with an
	// estimate unknown, Floors the others with one a floor.
	Missed          uint64
	Floors, Unknown uint64
}

func newMissedBook(covered func(from, to uint64) uint64, cost func(*Function) time.Duration) *missedBook {
	return &missedBook{covered: covered, cost: cost, costs: map[*Function]time.Duration{},
		seen: map[*Call]map[*Function]uint64{}, nested: map[*Function]map[*Function]bool{}}
}

// completed takes a completed call: a sampled one counts in the open calls
// traced whole around it, up to the first sampled one (inside a reported
// sampled call nothing nested is missed); one traced whole gets its
// estimates (Call.Missed).
func (m *missedBook) completed(c *Call) {
	if c.Func.Sampled {
		for a := c.Parent; a != nil && !a.Func.Sampled; a = a.Parent {
			n := m.seen[a]
			if n == nil {
				n = map[*Function]uint64{}
				m.seen[a] = n
			}
			n[c.Func]++
			k := m.nested[a.Func]
			if k == nil {
				k = map[*Function]bool{}
				m.nested[a.Func] = k
			}
			k[c.Func] = true
		}
		return
	}
	seen := m.seen[c]
	delete(m.seen, c)
	known := m.nested[c.Func]
	if len(known) == 0 || c.Running {
		return
	}
	for a := c.Parent; a != nil; a = a.Parent {
		if a.Func.Sampled {
			return
		}
	}
	fns := make([]*Function, 0, len(known))
	for f := range known {
		fns = append(fns, f)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Name < fns[j].Name })
	dur := c.Duration()
	cov := min(dur, m.covered(c.Start, c.End))
	var unknown, floor bool
	for _, f := range fns {
		mc := estimateMissed(f, seen[f], dur, cov, m.costOf(f))
		if mc.Seen == 0 && mc.Missed == 0 && !mc.Unknown {
			continue
		}
		unknown, floor = unknown || mc.Unknown, floor || mc.Floor
		m.Missed += mc.Missed
		c.Missed = append(c.Missed, mc)
	}
	switch {
	case unknown:
		m.Unknown++
	case floor:
		m.Floors++
	}
}

// minCovered is the least of a call the windows must cover for its pace
// there to say anything of the rest: less, at a window's edge, a nested
// call seen would weigh as thousands.
const minCovered = uint64(time.Millisecond)

// forget drops what the book keeps of c, a call that will not complete
// (Builder.Cut).
func (m *missedBook) forget(c *Call) {
	delete(m.seen, c)
}

func (m *missedBook) costOf(f *Function) time.Duration {
	c, ok := m.costs[f]
	if !ok {
		c = m.cost(f)
		m.costs[f] = c
	}
	return c
}

// estimateMissed estimates the calls of f a call of duration dur missed,
// having seen seen of them in the cov ns the windows covered of it, each
// costing cost in probes there: at their unprobed pace in the windows
// (the covered time less the probes' time, per call seen), over the time
// not covered; at the probed pace, a floor, when the probes took half the
// covered time or more.
func estimateMissed(f *Function, seen, dur, cov uint64, cost time.Duration) MissedCalls {
	mc := MissedCalls{Func: f, Seen: seen}
	if dur > 0 {
		mc.Covered = float64(cov) / float64(dur)
	}
	switch {
	case cov < min(dur, minCovered):
		// Calls seen at a window's edge, if any: no pace to go by.
		mc.Unknown = true
	case cov >= dur:
		// Covered whole: every nested call was seen.
	default:
		uncovered := float64(dur - cov)
		probes := float64(seen) * float64(cost)
		if 2*probes >= float64(cov) {
			mc.Floor = true
			mc.Missed = uint64(float64(seen) * uncovered / float64(cov))
		} else {
			mc.Missed = uint64(float64(seen)*uncovered/(float64(cov)-probes) + 0.5)
		}
	}
	return mc
}
