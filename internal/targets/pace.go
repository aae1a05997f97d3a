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
	var first, last [2]float64 // calls, CPU ns
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
		if got == from {
			first = [2]float64{calls, cpu}
		}
		last = [2]float64{calls, cpu}
	}
	if last[1] <= first[1] {
		tb.Fatalf("the %s loop's thread took no CPU time", loop)
	}
	return (last[0] - first[0]) / ((last[1] - first[1]) / 1e9)
}
