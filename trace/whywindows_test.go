package trace_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// TestWhyWindows checks the splits when the scheduler's probes are
// attached only in sampling windows: a call the probes never saw is not
// split (nothing invented for it), one inside a window is split whole,
// one across a window's edge has the time outside unknown, and what a
// goroutine did between two windows never counts as on CPU.
func TestWhyWindows(t *testing.T) {
	b, completed := whyBuilder()
	b.WhyWindows()
	ms := uint64(time.Millisecond)
	f := &trace.Function{Name: "main.f"}
	g := func(id uint64) trace.GoroutineKey { return trace.GoroutineKey{PID: 1, Goid: id} }

	// Goroutine 1: a call before any window, blocked 8 ms of its 10 ms:
	// not split.
	b.Entry(g(1), 0x1000, f, 0, 100, 0)
	b.Return(g(1), f, 10*ms, 100, 0)
	// Goroutine 2: entered at 15 ms, before the window opens at 20 ms,
	// returns inside it: unknown until its first event (23 ms), then a
	// wait, runnable, 1 ms CPU.
	b.Entry(g(2), 0x2000, f, 15*ms, 100, 0)
	b.SchedCoverage(20*ms, 0)
	// Goroutine 3: a call wholly in the window.
	b.Entry(g(3), 0x3000, f, 21*ms, 100, 0)
	b.Sched(g(3), trace.SchedEvent{Kind: bpf.KindPark, Time: 22 * ms, Reason: "sleep"})
	b.Sched(g(2), trace.SchedEvent{Kind: bpf.KindPark, Time: 23 * ms, Reason: "chan receive"})
	b.Sched(g(3), trace.SchedEvent{Kind: bpf.KindRun, Time: 27 * ms})
	b.Return(g(3), f, 28*ms, 100, 0)
	b.Sched(g(2), trace.SchedEvent{Kind: bpf.KindReady, Time: 29 * ms, WokenBy: 9})
	b.Sched(g(2), trace.SchedEvent{Kind: bpf.KindRun, Time: 30 * ms})
	b.Return(g(2), f, 31*ms, 100, 0)
	// Goroutine 4: enters in the window and is running when it closes
	// at 40 ms; it blocks and runs again between the windows (unseen),
	// and parks in the next one: none of that gap is CPU.
	b.Entry(g(4), 0x4000, f, 35*ms, 100, 0)
	b.Entry(g(5), 0x5000, f, 36*ms, 100, 0)
	b.SchedCoverage(20*ms, 40*ms)
	// A late event of a probe detached after the window's end.
	b.Sched(g(4), trace.SchedEvent{Kind: bpf.KindYield, Time: 41 * ms})
	b.SchedCoverage(60*ms, 0)
	b.Sched(g(4), trace.SchedEvent{Kind: bpf.KindPark, Time: 65 * ms, Reason: "sleep"})
	b.Sched(g(4), trace.SchedEvent{Kind: bpf.KindRun, Time: 70 * ms})
	b.Return(g(4), f, 72*ms, 100, 0)
	// Goroutine 5: the same without a late event.
	b.Sched(g(5), trace.SchedEvent{Kind: bpf.KindPark, Time: 66 * ms, Reason: "sleep"})
	b.Sched(g(5), trace.SchedEvent{Kind: bpf.KindRun, Time: 70 * ms})
	b.Return(g(5), f, 71*ms, 100, 0)

	done := *completed
	if len(done) != 5 {
		t.Fatalf("%d calls completed, want 5", len(done))
	}
	byG := map[uint64]*trace.Call{}
	for i, goid := range []uint64{1, 3, 2, 4, 5} {
		byG[goid] = done[i]
	}
	if c := byG[1]; c.Time != nil || b.Unsplit != 1 {
		t.Errorf("call outside the windows: split %v, %d unsplit; want none, 1", c.Time, b.Unsplit)
	}
	want := map[uint64]trace.TimeSplit{
		3: {OnCPU: 2 * ms, Blocked: []trace.BlockedTime{{Reason: "sleep", NS: 5 * ms, Count: 1}}},
		2: {OnCPU: 1 * ms, Runnable: 1 * ms, Unknown: 8 * ms, Partial: true, Blocked: []trace.BlockedTime{{Reason: "chan receive", NS: 6 * ms, Count: 1, WokenBy: 9}}},
		// 5 ms CPU up to the window's close, then unknown until its
		// first event in the next window (the park at 65 ms), asleep
		// until 70, 2 ms CPU.
		4: {OnCPU: 7 * ms, Unknown: 25 * ms, Partial: true, Blocked: []trace.BlockedTime{{Reason: "sleep", NS: 5 * ms, Count: 1}}},
		5: {OnCPU: 5 * ms, Unknown: 26 * ms, Partial: true, Blocked: []trace.BlockedTime{{Reason: "sleep", NS: 4 * ms, Count: 1}}},
	}
	// Goroutine 6 enters in the third window and is still running when
	// the trace ends (Flush at 100 ms), after that window closed at 80
	// ms: on CPU until then, unknown after. Goroutine 7 enters after the
	// window: nothing seen, no split.
	b.Entry(g(6), 0x6000, f, 61*ms, 100, 0)
	b.SchedCoverage(60*ms, 80*ms)
	b.Entry(g(7), 0x7000, f, 90*ms, 100, 0)
	running := b.Flush(100 * ms)
	if len(running) != 2 || running[0].Goroutine.Goid != 6 || running[1].Goroutine.Goid != 7 {
		t.Fatalf("running at the end: %+v", running)
	}
	byG[6], byG[7] = running[0].Calls[0], running[1].Calls[0]
	if c := byG[7]; c.Time != nil || b.Unsplit != 2 {
		t.Errorf("a call running outside the windows at the end: split %v, %d unsplit; want none, 2", c.Time, b.Unsplit)
	}
	want[6] = trace.TimeSplit{OnCPU: 19 * ms, Unknown: 20 * ms, Partial: true}
	for goid, w := range want {
		c := byG[goid]
		if c.Time == nil {
			t.Errorf("goroutine %d: no split", goid)
			continue
		}
		got := *c.Time
		got.Intervals = nil
		if got.OnCPU != w.OnCPU || got.Runnable != w.Runnable || got.Unknown != w.Unknown || got.Partial != w.Partial ||
			len(got.Blocked) != len(w.Blocked) || (len(w.Blocked) == 1 && (got.Blocked[0].Reason != w.Blocked[0].Reason || got.Blocked[0].NS != w.Blocked[0].NS || got.Blocked[0].WokenBy != w.Blocked[0].WokenBy)) {
			t.Errorf("goroutine %d: split %+v, want %+v", goid, got, w)
		}
		if c.Time.Total() != c.Duration() {
			t.Errorf("goroutine %d: parts add up to %d, duration %d", goid, c.Time.Total(), c.Duration())
		}
	}
}

// TestWhySamplingKeepsBudget traces, with --why under a 5% budget, a
// service-like function beside a ping-pong of two goroutines that
// switch millions of times a second: the scheduler's probes would slow
// the pair many times over, so they are attached only in sampling
// windows; the pair keeps its untraced pace but for the budget and the noise the same run measures (passes per second
// of the process's CPU time, untraced and traced phases alternating),
// and every call of the light function is traced. Under a 50% budget
// (longer windows), calls the probes saw whole are split (a 20 ms
// sleep), and none is given on-CPU time it spent asleep.
func TestWhySamplingKeepsBudget(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "hotcold", targets.BuildOptions{})
	p := targets.Start(t, bin, "-switch", "-light", "100ms", "-lightsleep", "20ms")
	open := func(budget float64) *trace.Session {
		s, err := trace.Open(trace.Options{PID: p.Pid, MaxOverhead: budget, Why: true, Include: []trace.Pattern{trace.ExactName("main.light")}})
		if err != nil {
			t.Fatal(err)
		}
		r := s.SchedRate
		if r == nil {
			t.Fatal("the scheduler's probes were not counted")
		}
		t.Logf("budget %.0f%%: the scheduler's probes counted at %.0f hits/s, %.0f%% if kept; warnings %q", 100*budget, r.PerSecond, 100*r.Cost, s.Warnings)
		for _, r := range s.Rates {
			if r.Func.Sampled {
				t.Errorf("%s sampled (%.0f calls/s): it is called ten times a second", r.Func.Name, r.PerSecond)
			}
		}
		return s
	}
	s := open(0.05)
	defer s.Close()
	var mu sync.Mutex
	var lights []*trace.Call
	// The calls completed, and those running when a run ended without
	// a split (the reports' unsplit counts both).
	var runningUnsplit uint64
	handlers := trace.Handlers{Call: func(h trace.Header, c *trace.Call) {
		mu.Lock()
		lights = append(lights, c)
		mu.Unlock()
	}, Running: func(h trace.Header, open []*trace.Call) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			if c.Time == nil {
				runningUnsplit++
			}
		}
	}}
	var ratios, untracedPaces []float64
	firstLight := lastLight(t, p)
	var unsplit uint64
	const phases = 6
	for range phases {
		untraced := loopPace(t, p, "switch", 1, 6)
		untracedPaces = append(untracedPaces, untraced)
		seen := len(p.Lines()) // measured from before the run
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan trace.RunResult, 1)
		go func() { done <- s.Run(ctx, trace.RunOptions{}, handlers) }()
		traced := loopPaceSince(t, p, "switch", seen, 9)
		cancel()
		res := <-done
		ratios = append(ratios, traced/untraced)
		sm := res.Sampling
		if sm == nil || !sm.SchedWindowed || sm.Windows == 0 || len(sm.Functions) != 0 {
			t.Fatalf("sampling report %+v: want the scheduler's probes in windows, and no function sampled", sm)
		}
		unsplit += sm.Unsplit
		t.Logf("untraced %.0f passes/CPU-s, traced %.0f (%.2f%%); %d windows, traced %v of %v, %d light calls unsplit; warnings %v",
			untraced, traced, 100*traced/untraced, sm.Windows, sm.Traced, sm.Elapsed, sm.Unsplit, sm.Warnings)
	}
	// As samplingKeepsBudget: the budget less what the untraced
	// phases' spread moves the median by, never below twice the budget.
	sort.Float64s(ratios)
	spread := paceSpread(untracedPaces, len(ratios))
	bound := max(1-2*0.05, 1-0.05-3*spread)
	if median := (ratios[phases/2-1] + ratios[phases/2]) / 2; median < bound {
		t.Errorf("the ping-pong kept %.2f%% of its untraced pace under a 5%% budget, under %.2f%% (%v; the untraced phases' spread moves the median by %.2f%%)", 100*median, 100*bound, ratios, 100*spread)
	}
	mu.Lock()
	n := len(lights)
	var nilSplits uint64
	for _, c := range lights {
		if c.Time == nil {
			nilSplits++
		}
	}
	mu.Unlock()
	// Every call but those a run's end cut (one a run at most) and those
	// either side of the first and last edges.
	if made := lastLight(t, p) - firstLight; n < made-phases || n > made+2 {
		t.Errorf("%d calls of main.light traced, the target made %d meanwhile", n, made)
	}
	if nilSplits+runningUnsplit != unsplit {
		t.Errorf("%d calls without a split (%d running at a run's end), the reports say %d", nilSplits+runningUnsplit, runningUnsplit, unsplit)
	}
	s.Close()

	// Longer windows: some calls are seen whole.
	s = open(0.5)
	defer s.Close()
	mu.Lock()
	lights = nil
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan trace.RunResult, 1)
	go func() { done <- s.Run(ctx, trace.RunOptions{}, handlers) }()
	// Until three calls were seen whole (a window holds about one), or
	// a minute: the checks below say which.
	seenWhole := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range lights {
			if c.Time != nil && !c.Time.Partial {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); seenWhole() < 3 && time.Now().Before(deadline); {
		// The next call of main.light, by what the target says.
		if _, err := p.WaitLineAfter(len(p.Lines()), fmt.Sprintf("light %d", lastLight(t, p)+1), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	res := <-done
	if sm := res.Sampling; sm == nil || !sm.SchedWindowed {
		t.Fatalf("sampling report %+v: want the scheduler's probes in windows", sm)
	}
	t.Logf("50%%: %d windows, traced %v of %v, %d unsplit", res.Sampling.Windows, res.Sampling.Traced, res.Sampling.Elapsed, res.Sampling.Unsplit)
	mu.Lock()
	defer mu.Unlock()
	whole := 0
	ms := uint64(time.Millisecond)
	for _, c := range lights {
		sp := c.Time
		if sp == nil {
			continue
		}
		if sp.Total() != c.Duration() {
			t.Errorf("parts add up to %v, the call took %v", time.Duration(sp.Total()), time.Duration(c.Duration()))
		}
		// The sleep is never on CPU, seen or not.
		if sp.OnCPU > 5*ms {
			t.Errorf("%v on CPU in a call that sleeps 20 ms of its %v: %v", time.Duration(sp.OnCPU), time.Duration(c.Duration()), sp)
		}
		if sp.Partial {
			continue
		}
		whole++
		var sleep uint64
		for _, b := range sp.Blocked {
			if b.Reason == "sleep" {
				sleep += b.NS
			}
		}
		if sleep < 17*ms || sleep > 23*ms+c.Duration()-20*ms {
			t.Errorf("a call seen whole slept %v of its %v: %v", time.Duration(sleep), time.Duration(c.Duration()), sp)
		}
	}
	if whole < 3 {
		t.Errorf("%d of %d calls of main.light seen whole by the scheduler's probes in a minute, want 3", whole, len(lights))
	}
	t.Logf("%d calls, %d seen whole", len(lights), whole)
}
