package trace_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// TestSamplingBurst traces a function idle when the calls are counted
// before the trace, so traced whole, that turns hot during the trace
// (hotcold -hottoggle: a loop of calls of main.hot started by SIGUSR1).
// The caller measures its own pace in 100 ms slices (calls per second of
// its thread's CPU time). Under the default 5% budget, gi takes the
// function out within tens of milliseconds of its rate's jump (the
// watch at each drain), not at the next governor.Period: from the jump,
// every 2 s window keeps a high share of the untraced pace, measured in
// the same run (the bound allows for the spread of its untraced 2 s
// windows, as the machine may be busy); gi says it moved the function
// less than 100 ms after the loop started, and the function's code, read
// from /proc/<pid>/mem, lost its breakpoints as soon.
func TestSamplingBurst(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "hotcold", targets.BuildOptions{})
	p := targets.Start(t, bin, "-hot", "-hottoggle", "-light", "200ms", "-every", "100ms")
	const budget = 0.05
	const windowSlices = 20 // 2 s windows of 100 ms slices

	// Untraced: 4 s of the hot loop, then paused for the counting.
	seen := len(p.Lines())
	toggleHot(t, p, "hot started")
	untraced := rateSlices(t, p, seen, 41)[1:] // the first slice: the paused loop's
	seen = len(p.Lines())
	toggleHot(t, p, "hot paused")
	if _, err := p.WaitLineAfter(seen, "rate hot ", 5*time.Second); err != nil {
		t.Fatal(err)
	}

	s, err := trace.Open(trace.Options{PID: p.Cmd.Process.Pid, MaxOverhead: budget,
		Include: []trace.Pattern{trace.ExactName("main.hot"), trace.ExactName("main.light")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Sampling() != nil {
		t.Fatalf("sampled before the hot loop began: %+v; rates %v", s.Sampling(), s.Rates)
	}
	var hot *trace.Function
	for _, f := range s.Selection.Functions {
		if f.Name == "main.hot" {
			hot = f
		}
	}
	if hot == nil {
		t.Fatal("main.hot not traced")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan trace.RunResult, 1)
	go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
	breakpoints := watchBreakpoints(t, p.Cmd.Process.Pid, append([]uint64{hot.EntrySite}, hot.Returns...))
	time.Sleep(300 * time.Millisecond) // the run under way, main.hot idle

	// Traced: the hot loop from its start, 6 s.
	seen = len(p.Lines())
	startedAt := toggleHot(t, p, "hot started")
	traced := rateSlices(t, p, seen, 60)
	cancel()
	res := <-done
	removed := breakpoints()

	ref := slicesPace(untraced)
	var spread float64
	for i := 0; i+windowSlices <= len(untraced); i++ {
		spread = max(spread, abs(slicesPace(untraced[i:i+windowSlices])/ref-1))
	}
	bound := max(0.85, 1-2*budget-3*spread)
	// The 2 s windows that begin in the first 2 s, the jump's reaction
	// in each; and the worst of all, for the log.
	worst, worstAt, worstAll, worstAllAt := 2.0, 0, 2.0, 0
	for i := 0; i+windowSlices <= len(traced); i++ {
		r := slicesPace(traced[i:i+windowSlices]) / ref
		if r < worst && i <= windowSlices {
			worst, worstAt = r, i
		}
		if r < worstAll {
			worstAll, worstAllAt = r, i
		}
	}
	// What the hot thread lost in the first half second: the CPU time
	// its calls took beyond their untraced pace (a thread starved of CPU
	// by the machine's load loses none).
	var lost time.Duration
	paces := make([]string, len(traced))
	for i, sl := range traced {
		if i < 5 {
			lost += time.Duration(max(0, sl.cpu-sl.calls/ref*1e9))
		}
		paces[i] = fmt.Sprintf("%.2f", slicesPace([]rateSlice{sl})/ref)
	}
	t.Logf("untraced %.0f calls/CPU-s, its 2 s windows within %.1f%%; from the jump, the worst 2 s window kept %.1f%% (from %.1f s; %.1f%% from %.1f s of all), the 6 s %.1f%%; bound %.1f%%; the thread lost %v in the first 0.5 s; 100 ms slices: %s",
		ref, 100*spread, 100*worst, float64(worstAt)/10, 100*worstAll, float64(worstAllAt)/10, 100*slicesPace(traced)/ref, 100*bound, lost.Round(time.Millisecond), strings.Join(paces, " "))
	t.Logf("warnings %q", res.Warnings)

	sm := res.Sampling
	if sm == nil || len(sm.Functions) != 1 || sm.Functions[0].Func.Name != "main.hot" {
		t.Fatalf("main.hot was not moved to the sampling windows: %+v; warnings %v", sm, res.Warnings)
	}
	f := sm.Functions[0]
	t.Logf("gi: moved %v after the loop started, %v after its cost rose; %d windows, open %v of %v, the longest closing %v",
		time.Duration(int64(f.Moved)-startedAt), f.Reaction, sm.Windows, sm.Traced, sm.Elapsed, sm.Closing)
	if f.Moved == 0 || f.Reaction <= 0 || f.Reaction > 150*time.Millisecond {
		t.Errorf("gi says it moved main.hot %v after its cost rose, want under 150ms", f.Reaction)
	}
	if lost > 150*time.Millisecond {
		t.Errorf("the hot loop's thread lost %v of CPU time to the probes in the first 0.5 s, want under 150ms", lost)
	}
	if removed != nil {
		// gi's Moved is when the probes stopped reporting; their
		// breakpoints go as the old link's close begins.
		out := time.Duration(-1)
		var long []string
		for i := 0; i+1 < len(removed); i += 2 {
			if at := removed[i+1]; at > startedAt && out < 0 {
				out = time.Duration(at - int64(f.Moved))
			}
			if d := time.Duration(removed[i+1] - removed[i]); d > 50*time.Millisecond && removed[i] > startedAt {
				long = append(long, fmt.Sprintf("%v from %.2f s", d.Round(time.Millisecond), float64(removed[i]-startedAt)/1e9))
			}
		}
		if len(long) > 0 {
			t.Logf("main.hot's breakpoints stayed in its code for more than 50ms: %s", strings.Join(long, ", "))
		}
		t.Logf("main.hot's breakpoints left its code %v after gi moved it", out)
		if out < 0 || out > 50*time.Millisecond {
			t.Errorf("main.hot's breakpoints left its code %v after gi moved it, want under 50ms", out)
		}
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "main.hot (") || !strings.Contains(res.Warnings[0], "after its cost rose") {
		t.Errorf("warnings %q", res.Warnings)
	}
	if worst < bound {
		t.Errorf("a 2 s window from the hot loop's start kept %.1f%% of its untraced pace, want %.1f%% at least", 100*worst, 100*bound)
	}
}

// watchBreakpoints reads the bytes at the link-time addresses sites of
// pid's code (a non-PIE amd64 binary) every half millisecond through
// /proc/<pid>/mem, and returns a function that stops and returns when
// (CLOCK_MONOTONIC ns) an int3 was found at one of them or more, and
// when found gone from all, in turn (the probes put in the code and
// removed). It returns nil on another architecture.
func watchBreakpoints(t *testing.T, pid int, sites []uint64) func() []int64 {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		return func() []int64 { return nil }
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	probed := func() (bool, error) {
		var b [1]byte
		for _, site := range sites {
			if _, err := mem.ReadAt(b[:], int64(site)); err != nil {
				return false, err
			}
			if b[0] == 0xcc {
				return true, nil
			}
		}
		return false, nil
	}
	stop := make(chan struct{})
	done := make(chan []int64, 1)
	go func() {
		defer mem.Close()
		var removed []int64
		was := false
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- removed
				return
			case <-tick.C:
			}
			now, err := probed()
			if err != nil {
				done <- nil
				return
			}
			if was != now {
				removed = append(removed, trace.MonotonicNow())
			}
			was = now
		}
	}()
	return func() []int64 {
		close(stop)
		return <-done
	}
}

// toggleHot sends p (hotcold -hottoggle) SIGUSR1 and waits for the line
// it prints, "hot started <ns>" or "hot paused <ns>", returning the
// CLOCK_MONOTONIC ns in it.
func toggleHot(t *testing.T, p *targets.Process, want string) int64 {
	t.Helper()
	seen := len(p.Lines())
	if err := p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	line, err := p.WaitLineAfter(seen, want+" ", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimPrefix(line.Text, want+" "), 10, 64)
	if err != nil {
		t.Fatalf("line %q", line.Text)
	}
	return ns
}

// rateSlice is the hot loop's progress over one interval of hotcold's
// rate lines: calls made, and its thread's CPU time.
type rateSlice struct {
	calls, cpu float64
}

// rateSlices returns the n intervals between the hot loop's rate lines
// from the last one among p's first seen lines (or the first after them).
func rateSlices(t *testing.T, p *targets.Process, seen, n int) []rateSlice {
	t.Helper()
	parse := func(text string) [2]float64 {
		f := strings.Fields(text)
		if len(f) != 6 {
			t.Fatalf("rate line %q", text)
		}
		calls, err1 := strconv.ParseFloat(f[4], 64)
		cpu, err2 := strconv.ParseFloat(f[5], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("rate line %q", text)
		}
		return [2]float64{calls, cpu}
	}
	var prev [2]float64
	from, have := seen, false
	lines := p.Lines()[:seen]
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "rate hot ") {
			prev, have = parse(lines[i]), true
			break
		}
	}
	var out []rateSlice
	for len(out) < n {
		line, err := p.WaitLineAfter(from, "rate hot ", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		from = line.Index + 1
		cur := parse(line.Text)
		if have {
			out = append(out, rateSlice{calls: cur[0] - prev[0], cpu: cur[1] - prev[1]})
		}
		prev, have = cur, true
	}
	return out
}

// slicesPace is the loop's calls per second of its thread's CPU time over
// slices.
func slicesPace(slices []rateSlice) float64 {
	var calls, cpu float64
	for _, s := range slices {
		calls += s.calls
		cpu += s.cpu
	}
	if cpu <= 0 {
		return 0
	}
	return calls / (cpu / 1e9)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
