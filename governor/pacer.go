package governor

import "time"

// Window parameters.
const (
	// MinWindow is the shortest sampling window; BasePeriod the period
	// windows are spread over while they fit in it (short, frequent
	// windows sample more evenly); MaxPeriod the longest period.
	MinWindow  = 10 * time.Millisecond
	BasePeriod = 500 * time.Millisecond
	MaxPeriod  = 10 * time.Second
	// MaxClosing bounds how long a window's closing waits for its calls
	// to return, and MaxDurations is how many durations of sampled calls
	// are kept to choose the wait (Pacer.Closed).
	MaxClosing   = time.Second
	MaxDurations = 256
)

// Pacer sets the sampling windows' length and period from what each cost,
// and how long their closings wait, from the durations of the sampled
// calls. It is not safe for concurrent use.
type Pacer struct {
	budget float64
	// period and window are the next window's period and length; wait is
	// how long its closing may wait for its calls, from the durations of
	// the sampled calls reported lately (a ring, next its oldest once
	// full).
	period, window, wait time.Duration
	durations            []time.Duration
	next                 int
}

// NewPacer returns the pacer of windows under budget (a share of the
// process's CPU time): the shortest window every BasePeriod until one is
// measured.
func NewPacer(budget float64) *Pacer {
	return &Pacer{budget: budget, period: BasePeriod, window: MinWindow}
}

// Window is how long the next window stays open.
func (p *Pacer) Window() time.Duration { return p.window }

// Period is how long after one window opened the next opens.
func (p *Pacer) Period() time.Duration { return p.period }

// FirstDelay is how long a run's first window waits when nothing has
// measured what a window costs: as long as the budget takes to pay for
// it. The only measure before any window is the estimate from the calls
// counted (cost, what the windowed probes would take of the process's
// CPU time traced whole, all of it at most): a window and its shortest
// closing at that share, against the budget times Margin. (Opening at
// once, the first window took 0.7% of a service's CPU time over a 4.5 s
// trace under a 1% budget, for a service taking 7% of a CPU: one window
// costs a second and a half of its budget.)
func (p *Pacer) FirstDelay(cost float64) time.Duration {
	target := p.budget * Margin
	if cost <= 0 || target <= 0 {
		return 0
	}
	window := p.window + p.ClosingWait()
	return min(MaxPeriod, time.Duration(float64(window)*min(1, cost)/target))
}

// ClosingWait is how long the next closing waits at least (see Closed):
// half the window, MinWindow, or what the sampled calls take, whichever
// is longest, MaxClosing at most.
func (p *Pacer) ClosingWait() time.Duration {
	return min(MaxClosing, max(MinWindow, p.window/2, p.wait))
}

// Observe records the duration of a sampled call reported, not nested in
// another sampled call: what the closings wait for.
func (p *Pacer) Observe(d time.Duration) {
	if len(p.durations) < MaxDurations {
		p.durations = append(p.durations, d)
		return
	}
	p.durations[p.next] = d
	p.next = (p.next + 1) % MaxDurations
}

// Closed sets, after a closing, the next closing's wait from the
// durations observed lately: one and a half times their 99th percentile,
// up to MaxClosing. Calls longer than the windows (a handler taking tens
// of milliseconds, windows of ten) would otherwise be cut again and
// again, and the calls reported be the short ones (a service's handler
// under a 5% budget: 35 to 52% of its calls cut with a closing of ten
// milliseconds); calls longer than what the closings waited are never
// seen, so the wait grows past the longest seen until it covers them. A
// call that never returns (a goroutine blocked for good) is cut all the
// same. What a longer closing costs (the probes stay attached) is
// measured with the window's, and the period stretches to pay for it.
func (p *Pacer) Closed() {
	q := Quantile(p.durations, 0.99)
	p.wait = min(MaxClosing, q+q/2)
}

// Durations returns how many call durations the pacer holds.
func (p *Pacer) Durations() int { return len(p.durations) }

// WindowCost is what one window cost: the measure Pacer.Adapt paces the
// next by.
type WindowCost struct {
	// Interval is the period measured over: from the end of the window
	// before (or the opening of a run's first) to the end of this one.
	Interval time.Duration
	// Share is the probes' time over Interval as a share of the CPU time
	// of the thread they slowed most (of the process's, or of one CPU's,
	// where no thread was busy).
	Share float64
	// Length is the window's length, open to closed.
	Length time.Duration
	// Stalled is the time its probes were in the code unmeasured: each a
	// perf event attached and detached one by one, on kernels without
	// uprobe_multi links.
	Stalled time.Duration
}

// OverBudget says that the shortest windows at the longest period still
// took more than the budget.
type OverBudget struct {
	// Share is the share of a thread the last window's period took.
	Share float64
	// Stalled is what the window's perf events took to attach and detach
	// (0 with uprobe_multi links).
	Stalled time.Duration
}

// Adapt sets the next window from what the last one cost. The share of
// the CPU time of the thread the probes slowed most grows with the share
// of the period the window took (its duty): the next duty is this one
// scaled by how far that share was from the target, the budget times
// Margin (by a factor of four at most). The window is that duty of
// BasePeriod, less what a window takes beyond its open time (attaching,
// closing); below MinWindow the period stretches instead, up to
// MaxPeriod. At MaxPeriod over the budget, it says so.
func (p *Pacer) Adapt(c WindowCost) *OverBudget {
	if c.Interval <= 0 || c.Length <= 0 {
		return nil
	}
	target := p.budget * Margin
	share := c.Share
	if c.Stalled > 0 {
		share = min(1, share+float64(c.Stalled)/float64(c.Interval))
	}
	duty := min(1, float64(c.Length)/float64(c.Interval))
	if c.Interval < p.period {
		// A period shorter than the period aimed at: a run's first
		// window, which has no period before it (its duty near 1 would
		// hold the next window long), or a window shorter than the one
		// before. Taken as a whole period that cost nothing else: the
		// ratio of duty to share is the same, only the clamps differ.
		share *= float64(c.Interval) / float64(p.period)
		duty = float64(c.Length) / float64(p.period)
	}
	next := duty * 4
	if share > 0 {
		next = duty * min(4, max(0.25, target/share))
	}
	fixed := max(0, c.Length-p.window)
	w := time.Duration(next*float64(BasePeriod)) - fixed
	switch {
	case w >= BasePeriod-fixed && BasePeriod-fixed >= MinWindow:
		p.window, p.period = BasePeriod-fixed, BasePeriod
	case w >= MinWindow && w+fixed <= BasePeriod:
		p.window, p.period = w, BasePeriod
	default:
		// The shortest window, its period stretched to the duty; never
		// shorter than the window and its closing (a closing that waits
		// for calls of hundreds of milliseconds can outlast BasePeriod).
		p.window = MinWindow
		p.period = min(MaxPeriod, max(MinWindow+fixed, time.Duration(float64(MinWindow+fixed)/max(next, 1e-6))))
		if p.period == MaxPeriod && share > p.budget {
			return &OverBudget{Share: share, Stalled: c.Stalled}
		}
	}
	return nil
}

// Closing decides when a window's closing is over: the probes stay
// attached, taking only calls inside those the window opened, until those
// have returned or the wait is over.
type Closing struct {
	start, lastReturn time.Time
	returned          uint64
	wait, quiet       time.Duration
}

// NewClosing starts a closing at start that waits wait at least
// (Pacer.ClosingWait). Progress is a return, a nested call's too: it
// waits while calls keep returning (a loop that never returns but calls
// sampled functions holds it for MaxClosing, its cost measured like any),
// until none has returned for half the wait, not MinWindow: calls queued
// on a lock return one holder's time apart, and on a loaded machine
// threads wait their turn to run for tens of milliseconds.
func NewClosing(start time.Time, wait time.Duration) *Closing {
	return &Closing{start: start, lastReturn: start, wait: wait, quiet: max(MinWindow, wait/2)}
}

// Done says, at now, with the calls the window opened and those of them
// returned so far (counted since it opened), whether the closing is over:
// all have returned; or MaxClosing has passed; or the wait has, and none
// returned for half of it, or the run is ending (a window the end of a
// run closes would otherwise cut every call it opened, so it waits the
// wait only). A call that never returns (a goroutine blocked for good)
// does not hold it past that.
func (c *Closing) Done(now time.Time, opened, returned uint64, ending bool) bool {
	elapsed := now.Sub(c.start)
	if elapsed >= MaxClosing || elapsed >= c.wait && (now.Sub(c.lastReturn) >= c.quiet || ending) {
		return true
	}
	if opened <= returned {
		return true
	}
	if returned > c.returned {
		c.lastReturn, c.returned = now, returned
	}
	return false
}
