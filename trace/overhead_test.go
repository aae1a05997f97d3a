package trace_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// loopRates reads the next n "rate <loop> ..." lines of loop from p after
// skipping skip, and returns the mean of their rates per second of the
// loop thread's CPU time: the pace probes slow and nothing else does.
func loopRates(t *testing.T, p *targets.Process, loop string, skip, n int) float64 {
	t.Helper()
	var sum float64
	seen := len(p.Lines())
	for got := 0; got < skip+n; {
		line, err := p.WaitLineAfter(seen, "rate "+loop+" ", 10*time.Second)
		if err != nil {
			t.Fatalf("target's %s rate: %v", loop, err)
		}
		seen = line.Index + 1
		f := strings.Fields(line.Text)
		if len(f) != 5 {
			t.Fatalf("rate line %q", line.Text)
		}
		cpuRate, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			t.Fatalf("rate line %q: %v", line.Text, err)
		}
		if got++; got > skip {
			sum += cpuRate
		}
	}
	return sum / float64(n)
}

// TestOverheadMatchesSlowdown traces a CPU-bound loop of calls long enough
// that the probes slow it by several percent, and compares the overhead
// gi estimates (hits counted in the kernel times the calibrated cost of
// each, plus the programs' own time, against the target's CPU time) with
// the slowdown the target measures itself, in calls per second of its
// thread's CPU time, untraced and traced, in the same run.
func TestOverheadMatchesSlowdown(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "hotcold", targets.BuildOptions{})
	p := targets.Start(t, bin, "-work", "100000", "-every", "200ms")
	untraced := loopRates(t, p, "work", 1, 5)

	s, err := trace.Open(trace.Options{PID: p.Cmd.Process.Pid, Include: []trace.Pattern{trace.ExactName("main.work")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan trace.RunResult, 1)
	go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
	defer func() { cancel(); <-done }()

	loopRates(t, p, "work", 1, 0) // the interval the probes were attached in
	before, err := s.Overhead()
	if err != nil {
		t.Fatal(err)
	}
	traced := loopRates(t, p, "work", 0, 5)
	after, err := s.Overhead()
	if err != nil {
		t.Fatal(err)
	}
	o := after.Sub(before)
	slowdown := 1 - traced/untraced
	t.Logf("untraced %.0f calls/CPU-s, traced %.0f: slowdown %.2f%%; gi: %v; costs %v", untraced, traced, 100*slowdown, o, o.Costs)
	if !o.Costs.Measured {
		t.Errorf("probe costs not measured: %v", o.Costs)
	}
	if slowdown < 0.03 {
		t.Fatalf("the probes slowed the loop by %.2f%% only: the test needs a measurable slowdown", 100*slowdown)
	}
	if len(o.Functions) != 1 || o.Functions[0].Hits == 0 || o.Functions[0].Hits != o.Hits-goexitHits(o) {
		t.Errorf("per-function costs %+v of %d hits", o.Functions, o.Hits)
	}
	if d := math.Abs(o.Share() - slowdown); d > max(0.02, 0.25*slowdown) {
		t.Errorf("gi estimates an overhead of %.2f%%, the target slowed by %.2f%%", 100*o.Share(), 100*slowdown)
	}
}

// goexitHits is the hits of the goroutine-exit probe, which belongs to no
// function.
func goexitHits(o trace.Overhead) uint64 {
	var n uint64
	for _, f := range o.Functions {
		n += f.Hits
	}
	return o.Hits - n
}
