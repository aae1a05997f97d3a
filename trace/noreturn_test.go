package trace_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// TestTraceNeverReturns traces functions without a RET on a real target: a
// worker loop, whose tasks nest under it and which is still running when
// the trace ends, and a function that always panics, unwound each time its
// caller recovers. Counts, goroutines and times are those the target
// measured itself. Every toolchain under test, and a stripped PIE.
func TestTraceNeverReturns(t *testing.T) {
	requirePrivilege(t)
	builds := []targets.BuildOptions{{PIE: true, Stripped: true}}
	for _, tc := range targets.Toolchains() {
		builds = append(builds, targets.BuildOptions{Toolchain: tc})
	}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			checkNeverReturns(t, targets.Build(t, "tracee", opts))
		})
	}
}

func checkNeverReturns(t *testing.T, bin string) {
	p := targets.Start(t, bin)
	clock := trace.NewClock()
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t,
		"main.workerLoop", "main.workerTask", "main.doomCatcher", "main.doomed")})
	entryOnly := map[string]bool{}
	for _, f := range s.Selection.Functions {
		entryOnly[f.Name] = f.EntryOnly
		if f.EntryOnly != (len(f.Returns) == 0) {
			t.Errorf("%s: entry only %v with %d return probes", f.Name, f.EntryOnly, len(f.Returns))
		}
	}
	want := map[string]bool{"main.workerLoop": true, "main.doomed": true, "main.workerTask": false, "main.doomCatcher": false}
	if len(entryOnly) != len(want) || len(s.Selection.Untraceable) != 0 {
		t.Fatalf("selected %v, untraceable %v; want the 4 functions traceable", entryOnly, s.Selection.Untraceable)
	}
	for name, only := range want {
		if got, ok := entryOnly[name]; !ok || got != only {
			t.Errorf("%s: selected %v, entry only %v; want entry only %v", name, ok, got, only)
		}
	}

	worker, err := p.Do("worker 5", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	doom, err := p.Do("doom 7", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := uint64(trace.MonotonicNow())
	res := stop()
	after := uint64(trace.MonotonicNow())
	targets.CheckNotStopped(t, p.Pid)
	if res.Err != nil || res.Lost != 0 || res.Unmatched != 0 {
		t.Errorf("run: err %v, %d lost, %d unmatched", res.Err, res.Lost, res.Unmatched)
	}

	// The worker loop: one call, never completed, still running at the
	// end with its tasks under it.
	if n := len(rec.byFunc("main.workerLoop")); n != 0 {
		t.Errorf("main.workerLoop completed %d times; it never returns", n)
	}
	if len(rec.running) != 1 || res.Running != 1 {
		t.Fatalf("%d goroutines reported running (RunResult.Running %d), want 1: the worker", len(rec.running), res.Running)
	}
	r := rec.running[0]
	if strconv.FormatUint(r.h.Goid, 10) != worker["goid"] {
		t.Errorf("running calls on goroutine %d, the worker is goroutine %s", r.h.Goid, worker["goid"])
	}
	if r.h.CreatedBy.Function != "main.main" {
		t.Errorf("worker goroutine created by %q, want main.main", r.h.CreatedBy.Function)
	}
	if len(r.open) != 1 {
		t.Fatalf("%d open calls on the worker, want 1 (the loop, parked in select)", len(r.open))
	}
	loop := r.open[0]
	if loop.Func.Name != "main.workerLoop" || !loop.Running || loop.Unwound || loop.Depth != 0 {
		t.Fatalf("open call %s: running %v, unwound %v, depth %d", loop.Func.Name, loop.Running, loop.Unwound, loop.Depth)
	}
	// Entered just before the target read the clock at the loop's top.
	targetStart := time.Unix(0, int64(atoi(t, worker["start_unix_ns"])))
	if d := clock.Wall(loop.Start).Sub(targetStart); d > time.Millisecond || d < -20*time.Millisecond {
		t.Errorf("loop entered at %v, the target says it began at %v (%v apart)", clock.Wall(loop.Start), targetStart, d)
	}
	// Its time so far runs to the end of the trace.
	if loop.End < before || loop.End > after || loop.Duration() != loop.End-loop.Start {
		t.Errorf("loop ends at %d, the trace ended in [%d, %d]", loop.End, before, after)
	}
	tasks := atoi(t, worker["calls"])
	if len(loop.Children) != tasks {
		t.Fatalf("%d tasks under the loop, the target ran %d", len(loop.Children), tasks)
	}
	var sum time.Duration
	for _, c := range loop.Children {
		if c.Func.Name != "main.workerTask" || c.Depth != 1 || c.Unwound || c.Running || c.Start < loop.Start || c.End > loop.End {
			t.Errorf("task %s: depth %d unwound %v running %v", c.Func.Name, c.Depth, c.Unwound, c.Running)
		}
		if d := time.Duration(c.Duration()); d < time.Millisecond {
			t.Errorf("task took %v, shorter than its 1ms sleep", d)
		}
		sum += time.Duration(c.Duration())
	}
	mean, targetMean := sum/time.Duration(tasks), time.Duration(atoi(t, worker["avg_ns"]))
	if diff := mean - targetMean; diff < -time.Millisecond-targetMean/10 || diff > time.Millisecond+targetMean/10 {
		t.Errorf("mean task %v, the target measured %v", mean, targetMean)
	}
	if n := len(rec.byFunc("main.workerTask")); n != tasks {
		t.Errorf("%d workerTask calls completed, the target ran %d", n, tasks)
	}
	if n := len(rec.rootsOf("main.workerTask")); n != 0 {
		t.Errorf("%d workerTask calls reported as roots: they nest under the loop", n)
	}
	var open []string
	for _, oc := range res.Open {
		open = append(open, oc.Func.Name)
	}
	if len(open) != 1 || open[0] != "main.workerLoop" {
		t.Errorf("RunResult.Open %v, want the loop only", open)
	}

	// The always-panicking function: each call unwound when its caller
	// recovers and returns.
	calls := atoi(t, doom["calls"])
	if doom["recovered"] != doom["calls"] {
		t.Fatalf("target: %v", doom)
	}
	roots := rec.rootsOf("main.doomCatcher")
	if len(roots) != calls {
		t.Fatalf("%d doomCatcher roots, the target made %d calls", len(roots), calls)
	}
	for _, r := range roots {
		c := r.c
		if strconv.FormatUint(r.h.Goid, 10) != doom["goid"] || c.Unwound || c.Running || c.ReturnSite == 0 || len(c.Children) != 1 {
			t.Fatalf("doomCatcher on goroutine %d (target: %s): unwound %v, running %v, %d children", r.h.Goid, doom["goid"], c.Unwound, c.Running, len(c.Children))
		}
		d := c.Children[0]
		if d.Func.Name != "main.doomed" || !d.Unwound || d.Running || d.ReturnSite != 0 || d.End != c.End || d.Start < c.Start {
			t.Errorf("doomed: unwound %v running %v, ends %d (caller returned at %d)", d.Unwound, d.Running, d.End, c.End)
		}
	}
	if n := len(rec.byFunc("main.doomed")); n != calls {
		t.Errorf("%d doomed calls ended, the target made %d", n, calls)
	}
}
