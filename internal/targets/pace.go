package targets

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// LoopPace measures the pace of one of hotcold's loops from its "rate
// <loop> <rate> <cpu rate> <calls> <cpu ns>" lines: from the from-th such
// line printed after the first seen lines, through n more, the loop's
// calls per second of its thread's CPU time (the pace probes slow and
// nothing else does: other processes taking the CPU do not).
func (p *Process) LoopPace(tb testing.TB, loop string, seen, from, n int) float64 {
	tb.Helper()
	counts, _ := p.loopCounts(tb, loop, seen, from, n)
	first, last := counts[0], counts[len(counts)-1]
	if last[1] <= first[1] {
		tb.Fatalf("the %s loop's thread took no CPU time", loop)
	}
	return (last[0] - first[0]) / ((last[1] - first[1]) / 1e9)
}

// LoopPaces is LoopPace interval by interval: the pace over each of the n
// intervals between the from-th "rate <loop>" line printed after the
// first seen lines and the n that follow it, and the number of lines p
// had printed at the last of them.
func (p *Process) LoopPaces(tb testing.TB, loop string, seen, from, n int) ([]float64, int) {
	tb.Helper()
	counts, end := p.loopCounts(tb, loop, seen, from, n)
	paces := make([]float64, 0, n)
	for i := 1; i < len(counts); i++ {
		cpu := counts[i][1] - counts[i-1][1]
		if cpu <= 0 {
			tb.Fatalf("the %s loop's thread took no CPU time between two rate lines", loop)
		}
		paces = append(paces, (counts[i][0]-counts[i-1][0])/(cpu/1e9))
	}
	return paces, end
}

// loopCounts reads the calls and CPU ns of the from-th through the
// (from+n)-th "rate <loop>" lines after the first seen lines, and the
// index just past the last.
func (p *Process) loopCounts(tb testing.TB, loop string, seen, from, n int) ([][2]float64, int) {
	tb.Helper()
	counts := make([][2]float64, 0, n+1) // calls, CPU ns
	for got := 1; got <= from+n; got++ {
		line, err := p.WaitLineAfter(seen, "rate "+loop+" ", 10*time.Second)
		if err != nil {
			tb.Fatalf("target's %s rate: %v", loop, err)
		}
		seen = line.Index + 1
		f := strings.Fields(line.Text)
		if len(f) != 6 {
			tb.Fatalf("rate line %q", line.Text)
		}
		calls, err1 := strconv.ParseFloat(f[4], 64)
		cpu, err2 := strconv.ParseFloat(f[5], 64)
		if err1 != nil || err2 != nil {
			tb.Fatalf("rate line %q", line.Text)
		}
		if got >= from {
			counts = append(counts, [2]float64{calls, cpu})
		}
	}
	return counts, seen
}
