package trace

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/governor"
)

func TestBuilderCut(t *testing.T) {
	a, b, c := &Function{Name: "a"}, &Function{Name: "b", Sampled: true}, &Function{Name: "c"}
	k := GoroutineKey{PID: 1, Goid: 7}
	bl := NewBuilder()
	var roots []*Call
	var completed []string
	bl.OnCall = func(_ GoroutineKey, x *Call) { completed = append(completed, x.Func.Name) }
	bl.OnRoot = func(_ GoroutineKey, _ uint64, x *Call) { roots = append(roots, x) }
	// Frames: the distance from the top of the stack, deeper further.
	bl.Entry(k, 1, a, 10, 60, 0)
	bl.Entry(k, 1, b, 11, 80, 0)
	bl.Entry(k, 1, c, 12, 100, 0)
	bl.Return(k, c, 13, 100, 0)
	bl.Entry(k, 1, c, 14, 100, 0) // open inside b when b's window ends
	if n := bl.Cut(func(x *Call) bool { return x.Func.Sampled && x.Start <= 20 }); n != 2 {
		t.Fatalf("cut %d calls, want b and the c open in it", n)
	}
	bl.Return(k, a, 30, 60, 0)
	if len(roots) != 1 || len(roots[0].Children) != 0 {
		t.Fatalf("roots %+v: a's tree should have lost b", roots)
	}
	if want := []string{"c", "a"}; len(completed) != 2 || completed[0] != want[0] || completed[1] != want[1] {
		t.Fatalf("completed %v, want %v (the cut calls never complete)", completed, want)
	}
	// A root cut frees its goroutine.
	bl.Entry(k, 1, b, 40, 80, 0)
	if n := bl.Cut(func(x *Call) bool { return x.Func.Sampled }); n != 1 || bl.Open() != 0 {
		t.Fatalf("cut %d, %d goroutines open", n, bl.Open())
	}
	bl.Return(k, b, 41, 80, 0)
	if bl.Unmatched != 1 {
		t.Fatalf("the return of a cut call matched: unmatched %d", bl.Unmatched)
	}
}

func TestPartition(t *testing.T) {
	hot, warm, light := &Function{Name: "hot"}, &Function{Name: "warm"}, &Function{Name: "light"}
	// Busy enough: each function's probes would take a CPU share past
	// the floor.
	rates := []CallRate{{Func: light, Cost: 0.001, CPU: 0.001}, {Func: hot, Cost: 3, CPU: 0.5}, {Func: warm, Cost: 0.02, CPU: 0.01}}
	sampled := partition(rates, 0.05, 0, 0)
	if len(sampled) != 2 || sampled[0].Func != hot || sampled[1].Func != warm || !hot.Sampled || !warm.Sampled || light.Sampled {
		t.Fatalf("sampled %+v", sampled)
	}
	hot.Sampled, warm.Sampled = false, false
	// Within the budget's margin (three quarters of it), nothing is sampled.
	margin := 0.05 * governor.Margin
	if s := partition([]CallRate{{Func: light, Cost: margin / 4, CPU: 0.01}, {Func: warm, Cost: margin / 2, CPU: 0.01}}, 0.05, 0, 0); len(s) != 0 || warm.Sampled {
		t.Fatalf("sampled %+v under the budget", s)
	}
	// Functions added to a trace (Session.Add) count against what those
	// traced whole already cost: beside a quarter of the margin, half of
	// it still fits; beside the whole margin, the new ones are sampled,
	// the costliest first, even a light one.
	if s := partition([]CallRate{{Func: warm, Cost: margin / 2, CPU: 0.01}}, 0.05, margin/4, 0.01); len(s) != 0 || warm.Sampled {
		t.Fatalf("sampled %+v beside a quarter of the margin", s)
	}
	if s := partition([]CallRate{{Func: light, Cost: margin / 8, CPU: 0.0001}, {Func: warm, Cost: margin / 4, CPU: 0.0002}}, 0.05, margin, 0.01); len(s) != 2 || s[0].Func != warm || !light.Sampled {
		t.Fatalf("sampled %+v beside the whole margin", s)
	}
	light.Sampled, warm.Sampled = false, false
	// An idle process: light's calls would take 8% of its CPU time, but
	// 0.15 ms a second of one CPU, under governor.Floor with what is traced
	// whole: nothing is sampled. Past the floor, it is.
	idle := []CallRate{{Func: light, Cost: 0.08, CPU: 0.00015}}
	if s := partition(idle, 0.05, 0.01, 0.0002); len(s) != 0 || light.Sampled {
		t.Fatalf("sampled %+v in an idle process, under the floor", s)
	}
	if s := partition(idle, 0.05, 0.01, governor.Floor); len(s) != 1 || !light.Sampled {
		t.Fatalf("sampled %+v past the floor", s)
	}
}

// TestAdapt: the sampler counts each window in its report and paces the
// next by the busiest thread's share (the pacing itself is governor's,
// tested there): a window at twice the target shortens, and at the
// longest period over the budget, the warning says so once.
func TestAdapt(t *testing.T) {
	sm := &sampler{budget: 0.05, pace: governor.NewPacer(0.05)}
	target := 0.05 * governor.Margin
	thread := func(share float64) []ThreadCost {
		return []ThreadCost{{TID: 1, CPU: time.Second, Probes: time.Duration(share * float64(time.Second))}}
	}
	// Grown fourfold by a window that cost nothing, then shortened by
	// one at twice the target on its busiest thread (the process's share
	// a tenth of that: the thread's is what counts).
	sm.adapt(Overhead{Interval: governor.BasePeriod, TargetCPU: 10 * time.Second}, 20*time.Millisecond, 0)
	grown := sm.pace.Window()
	sm.adapt(Overhead{Interval: governor.BasePeriod, TargetCPU: 10 * time.Second, Threads: thread(2 * target)}, grown, 0)
	if sm.pace.Window() >= grown || sm.pace.Window() < governor.MinWindow {
		t.Fatalf("window %v after %v at twice the target", sm.pace.Window(), grown)
	}
	// Far over, again and again: the longest period, warned once.
	for range 20 {
		sm.adapt(Overhead{Interval: sm.pace.Period(), TargetCPU: time.Second, Threads: thread(0.5)}, governor.MinWindow, 0)
	}
	if sm.pace.Period() != governor.MaxPeriod || len(sm.report.Warnings) != 1 || !strings.Contains(sm.report.Warnings[0], "narrow the pattern") {
		t.Fatalf("period %v, warnings %q", sm.pace.Period(), sm.report.Warnings)
	}
	sm.adapt(Overhead{Interval: governor.MaxPeriod, TargetCPU: time.Second}, governor.MinWindow, 2*time.Second)
	if len(sm.report.Warnings) != 2 || !strings.Contains(sm.report.Warnings[1], "perf event per probe, 2s here") {
		t.Fatalf("after a stall, warnings %q", sm.report.Warnings)
	}
	if sm.report.Windows != 23 || sm.report.Stalled != 2*time.Second {
		t.Fatalf("%d windows counted, %v stalled", sm.report.Windows, sm.report.Stalled)
	}
}

// TestClosingWait: the closing's wait follows the sampled calls reported,
// counting only calls not nested in another sampled call (the wait's rule
// is governor's, tested there).
func TestClosingWait(t *testing.T) {
	handler, helper, whole := &Function{Name: "handler", Sampled: true}, &Function{Name: "helper", Sampled: true}, &Function{Name: "whole"}
	sm := &sampler{pace: governor.NewPacer(0.05)}
	sm.closed(time.Millisecond)
	if sm.pace.ClosingWait() != governor.MinWindow || sm.report.Closing != time.Millisecond {
		t.Fatalf("no call seen: wait %v, closing %v", sm.pace.ClosingWait(), sm.report.Closing)
	}
	root := &Call{Func: whole, Start: 0, End: uint64(time.Second)}
	for i := range 100 {
		d := uint64(i+1) * uint64(time.Millisecond) // 1 to 100 ms
		h := &Call{Func: handler, Parent: root, Start: 1000, End: 1000 + d}
		sm.observe(h)
		// Nested in a sampled call: not what a closing waits for.
		sm.observe(&Call{Func: helper, Parent: h, Start: 1000, End: 1000 + 10*d})
	}
	sm.closed(5 * time.Millisecond)
	if want := 150 * time.Millisecond; sm.pace.ClosingWait() != want || sm.report.Closing != 5*time.Millisecond || sm.pace.Durations() != 100 {
		t.Fatalf("wait %v for calls of 1 to 100 ms, want %v (closing %v, %d durations)", sm.pace.ClosingWait(), want, sm.report.Closing, sm.pace.Durations())
	}
	// A sampled call under a whole call under a sampled one is nested
	// all the same.
	outer := &Call{Func: handler, Start: 0, End: uint64(time.Second)}
	mid := &Call{Func: whole, Parent: outer, Start: 0, End: uint64(time.Second)}
	sm.observe(&Call{Func: helper, Parent: mid, Start: 0, End: 1})
	// A call whose end precedes its start (clocks of two CPUs) is not
	// counted.
	sm.observe(&Call{Func: handler, Start: 10, End: 5})
	if sm.pace.Durations() != 100 {
		t.Fatalf("%d durations: a nested call or one ending before it began was counted", sm.pace.Durations())
	}
}

// TestBuilderSampledUnwound: a call of a sampled function is never
// reported unwound (its return may have gone with its window's probes):
// a goroutine exit or a later call at its frame drops it, as Cut does,
// counted in UnwoundCut; a call traced whole is still reported unwound.
func TestBuilderSampledUnwound(t *testing.T) {
	whole, sampled := &Function{Name: "whole"}, &Function{Name: "sampled", Sampled: true}
	k := GoroutineKey{PID: 1, Goid: 9}
	bl := NewBuilder()
	var completed, cut []string
	var unwound []bool
	bl.OnCall = func(_ GoroutineKey, x *Call) {
		completed = append(completed, x.Func.Name)
		unwound = append(unwound, x.Unwound)
	}
	bl.OnCut = func(x *Call) { cut = append(cut, x.Func.Name) }
	bl.Entry(k, 1, whole, 10, 60, 0)
	bl.Entry(k, 1, sampled, 11, 80, 0)
	bl.GoroutineExit(k, 20)
	if want := []string{"whole"}; !slices.Equal(completed, want) || !unwound[0] {
		t.Fatalf("completed %v (unwound %v), want %v unwound", completed, unwound, want)
	}
	if want := []string{"sampled"}; !slices.Equal(cut, want) || bl.UnwoundCut != 1 {
		t.Fatalf("cut %v (UnwoundCut %d), want %v", cut, bl.UnwoundCut, want)
	}
	// A new call at the sampled call's frame: the open one is dropped,
	// the new one returns whole.
	bl.Entry(k, 1, sampled, 30, 80, 0)
	bl.Entry(k, 1, sampled, 40, 80, 0)
	bl.Return(k, sampled, 50, 80, 0x1234)
	if bl.UnwoundCut != 2 || len(completed) != 2 || completed[1] != "sampled" || unwound[1] {
		t.Fatalf("UnwoundCut %d, completed %v (unwound %v): want the first sampled call dropped, the second whole", bl.UnwoundCut, completed, unwound)
	}
	if len(bl.gs) != 0 {
		t.Fatalf("%d goroutine states left", len(bl.gs))
	}
}

// TestTraceWholeHint: with functions sampled, the hint names how many are
// traced whole and a budget above what tracing all of them whole costs.
func TestTraceWholeHint(t *testing.T) {
	hot, warm, light := &Function{Sampled: true}, &Function{Sampled: true}, &Function{}
	rates := []CallRate{{Func: hot, Cost: 0.10}, {Func: warm, Cost: 0.05}, {Func: light, Cost: 0.05}, {Func: &Function{}, Cost: 0.036}}
	got := traceWholeHint(rates, 0.01)
	want := "2 of 4 functions traced whole; to trace every call whole: --max-overhead 30% (the probes would take about 25% of the process's CPU time)"
	if got != want {
		t.Errorf("hint %q, want %q", got, want)
	}
	hot.Sampled, warm.Sampled = false, false
	if h := traceWholeHint(rates, 0.01); h != "" {
		t.Errorf("nothing sampled: hint %q", h)
	}
}
