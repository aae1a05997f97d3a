// Package governor decides how gi trace keeps its probes within an
// overhead budget: which functions to trace whole and which in sampling
// windows (Partition), which to move to the windows when their cost rises
// during a trace (Demote, and Watch, which catches a jump between two of
// the governor's periods), how long the windows are and how far apart
// (Pacer), and how long a window's closing waits for the calls it opened
// (Closing).
//
// It holds decisions only. The caller reads the hit counts and the
// clocks, attaches and detaches the probes, and passes every time and
// every measurement in: each decision is a function of its inputs, tested
// on a fake clock.
package governor

import (
	"slices"
	"sort"
	"time"
)

// Parameters of the budget's enforcement.
const (
	// Margin is the share of the budget the windows aim at, and what
	// Partition leaves the functions traced whole: the rest absorbs the
	// error of a period's estimate and what a window costs beyond its
	// probes' hits (attaching and detaching write the target's code
	// pages). With other work on the machine that rest took about 3% of
	// a hot loop's pace (1.9% of probes, 5.1% slower), more than the 2% a
	// margin of 0.6 left of a 5% budget.
	Margin = 0.4
	// Period is how often the cost of the functions traced whole is
	// checked (Demote).
	Period = time.Second
	// Trigger is the share of the budget the functions traced whole may
	// take over a Period before the costliest are sampled: above the
	// margin Partition leaves them, so that a function at the edge does
	// not move for noise.
	Trigger = 0.6
	// Floor is the probes' time, as a share of one CPU, below which
	// nothing is sampled or moved, whatever its share of the process's: a
	// burst of calls in a process otherwise idle, a millisecond a second
	// at most.
	Floor = 0.001
)

// Cost is what one function's probes (or a set of probes counted as one)
// cost, or would cost, traced whole.
type Cost struct {
	// Share is the probes' time as a share of the process's CPU time.
	Share float64
	// CPU is the probes' time as a share of one CPU.
	CPU float64
}

// Partition chooses the functions to sample, among those whose costs
// traced whole are costs, beside functions traced whole already that cost
// whole: none while tracing every function whole fits the budget's
// margin, or takes less than Floor of one CPU (the share of an idle
// process's CPU time is no measure); else the costliest, until the rest
// costs half the margin at most. It returns their indices in costs,
// costliest first.
func Partition(costs []Cost, budget float64, whole Cost) []int {
	target := budget * Margin
	total, totalCPU := whole.Share, whole.CPU
	for _, c := range costs {
		total += c.Share
		totalCPU += c.CPU
	}
	if total <= target || totalCPU < Floor {
		return nil
	}
	var sampled []int
	for _, i := range byShare(costs) {
		if total <= target/2 || costs[i].Share == 0 {
			break
		}
		sampled = append(sampled, i)
		total -= costs[i].Share
	}
	return sampled
}

// Demote chooses, from what the functions traced whole cost over a period
// of a run (costs: their shares of the process's CPU time and of one CPU
// over it), those to move to the sampling windows: none while they take
// Trigger of the budget at most, or less than Floor of one CPU; else the
// costliest, until the rest takes half the margin. It returns their
// indices in costs, costliest first.
func Demote(costs []Cost, budget float64) []int {
	var whole, cpu float64
	for _, c := range costs {
		whole += c.Share
		cpu += c.CPU
	}
	if whole <= Trigger*budget || cpu < Floor {
		return nil
	}
	var moved []int
	for _, i := range byShare(costs) {
		if whole <= budget*Margin/2 {
			break
		}
		moved = append(moved, i)
		whole -= costs[i].Share
	}
	return moved
}

// byShare returns the indices of costs, the costliest first, ties in
// their order.
func byShare(costs []Cost) []int {
	idx := make([]int, len(costs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return costs[idx[a]].Share > costs[idx[b]].Share })
	return idx
}

// Quantile returns the q quantile of ds (0 if empty), sorting a copy.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
