package main

import (
	"fmt"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
)

// psLatency renders a measure.Result in gi ps's tables; a nil *psLatency (no
// --trace) renders nothing.
type psLatency struct {
	*measure.Result
	// why adds the MOSTLY column: the part that dominates the calls.
	why bool
}

// location renders the FUNCTION and LOCATION columns of a goroutine's row:
// with a trace, the measured function, whose latency the row gives.
func (pl *psLatency) location(g *inspect.Goroutine) (fn, loc string) {
	if pl != nil {
		if l := pl.ByGoid[g.ID]; l != nil {
			return l.Function, fmt.Sprintf("%s:%d", inspect.ShortPath(l.File), l.Line)
		}
	}
	return location(g)
}

// stuckText renders a stuck mark for the window's length.
func (pl *psLatency) stuckText() string {
	return "stuck >" + formatWait(pl.Duration, true)
}

// columns renders CALLS, P50, P99, MAX, IN CALL (and MOSTLY) for one
// latency.
func (pl *psLatency) columns(l *measure.Latency) []string {
	cols := pl.latencyColumns(l)
	if pl.why {
		mostly := ""
		if l != nil && l.Dominant != nil && l.Calls > 0 {
			mostly = l.Dominant.String()
		}
		cols = append(cols, mostly)
	}
	return cols
}

func (pl *psLatency) latencyColumns(l *measure.Latency) []string {
	switch {
	case l == nil:
		return []string{"", "", "", "", ""}
	case l.Why == measure.WhyNoCall || l.Why == measure.WhyNoSampledCall || l.Why == measure.WhyNoReturn:
		return []string{"0", "", "", "", l.Why}
	case l.Why != "":
		return []string{"-", "", "", "", l.Why}
	}
	inCall := ""
	switch {
	case l.Stuck:
		inCall = pl.stuckText()
	case l.InCallNS > 0:
		inCall = formatWait(time.Duration(l.InCallNS), true)
	}
	if l.Calls == 0 {
		return []string{"0", "", "", "", inCall}
	}
	calls := fmt.Sprint(l.Calls)
	if l.Sampled {
		// Seen in the sampling windows; the estimate for the window.
		calls = fmt.Sprintf("~%d", l.CallsEstimated)
	}
	return []string{calls, formatLatency(time.Duration(l.P50NS)), formatLatency(time.Duration(l.P99NS)), formatLatency(time.Duration(l.MaxNS)), inCall}
}

// groupColumns renders the same for a group: the function's statistics,
// the longest in-call time and how many members are stuck.
func (pl *psLatency) groupColumns(gr *inspect.Group) []string {
	l, stuck, ok := pl.GroupLatency(gr.Representative(), gr.Goroutines)
	if !ok {
		return pl.columns(nil)
	}
	cols := pl.columns(&l)
	if l.Why != "" {
		return cols
	}
	switch {
	case l.Stuck:
		cols[4] = pl.stuckText()
	case stuck > 0:
		cols[4] = fmt.Sprintf("%d stuck %s", stuck, pl.stuckText()[len("stuck "):])
	case l.InCallNS > 0:
		cols[4] = "max " + formatWait(time.Duration(l.InCallNS), true)
	default:
		cols[4] = ""
	}
	return cols
}
