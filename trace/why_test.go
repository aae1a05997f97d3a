package trace_test

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// whyBuilder returns a Builder splitting calls' time, and the calls it
// completes, in order.
func whyBuilder() (*trace.Builder, *[]*trace.Call) {
	b := trace.NewBuilder()
	b.Why = true
	var done []*trace.Call
	b.OnCall = func(_ trace.GoroutineKey, c *trace.Call) { done = append(done, c) }
	return b, &done
}

// TestWhySplit feeds a goroutine's calls and scheduler events to a
// Builder and checks each call's split: the parts are the intervals
// between events in the state each left the goroutine in, a parent's
// include its children's, and they add up to the durations.
func TestWhySplit(t *testing.T) {
	b, completed := whyBuilder()
	k := trace.GoroutineKey{PID: 1, Goid: 7}
	outer, inner := &trace.Function{Name: "main.outer"}, &trace.Function{Name: "main.inner"}
	ms := uint64(time.Millisecond)

	b.Entry(k, 0x1000, outer, 0, 100, 0)
	b.Sched(trace.GoroutineKey{PID: 1, Goid: 8}, trace.SchedEvent{Kind: bpf.KindPark, Time: 1 * ms, Reason: "sleep"}) // not traced: ignored
	b.Entry(k, 0x1000, inner, 2*ms, 150, 0)                                                                           // 2 ms on CPU in outer
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindPark, Time: 5 * ms, Reason: "chan receive", Object: 0xc000})            // 3 ms CPU
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindReady, Time: 15 * ms, WokenBy: 9, WokenByFunction: "main.producer"})    // 10 ms blocked
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindRun, Time: 16 * ms})                                                    // 1 ms runnable
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindPark, Time: 17 * ms, Reason: "chan receive", Object: 0xc000})           // 1 ms CPU
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindReady, Time: 20 * ms, WokenBy: 9, WokenByFunction: "main.producer"})    // 3 ms blocked, same wait
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindRun, Time: 20 * ms})
	b.Return(k, inner, 21*ms, 150, 0)                                                  // 1 ms CPU
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindPark, Time: 22 * ms, Reason: "IO wait"}) // 1 ms CPU
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindRun, Time: 30 * ms})                     // 8 ms blocked, no ready: the poller
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindYield, Time: 31 * ms})                   // 1 ms CPU
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindRun, Time: 33 * ms})                     // 2 ms runnable
	b.Return(k, outer, 34*ms, 100, 0)                                                  // 1 ms CPU

	done := *completed
	if len(done) != 2 {
		t.Fatalf("%d calls completed, want 2", len(done))
	}
	in, out := done[0], done[1]
	ch := trace.WaitObject{Kind: "chan", Addr: 0xc000}
	wantIn := trace.TimeSplit{OnCPU: 5 * ms, Runnable: 1 * ms, Blocked: []trace.BlockedTime{
		{Reason: "chan receive", Object: ch, WokenBy: 9, WokenByFunction: "main.producer", NS: 13 * ms, Count: 2}},
		Intervals: []trace.Interval{
			{Start: 5 * ms, End: 15 * ms, Reason: "chan receive", Object: ch, WokenBy: 9, WokenByFunction: "main.producer"},
			{Start: 15 * ms, End: 16 * ms},
			{Start: 17 * ms, End: 20 * ms, Reason: "chan receive", Object: ch, WokenBy: 9, WokenByFunction: "main.producer"}}}
	wantOut := trace.TimeSplit{OnCPU: 10 * ms, Runnable: 3 * ms, Blocked: []trace.BlockedTime{
		{Reason: "chan receive", Object: ch, WokenBy: 9, WokenByFunction: "main.producer", NS: 13 * ms, Count: 2},
		{Reason: "IO wait", NS: 8 * ms, Count: 1}},
		// Its own: the inner call's are the inner call's.
		Intervals: []trace.Interval{{Start: 22 * ms, End: 30 * ms, Reason: "IO wait"}, {Start: 31 * ms, End: 33 * ms}}}
	for _, c := range []struct {
		call *trace.Call
		want trace.TimeSplit
	}{{in, wantIn}, {out, wantOut}} {
		if c.call.Time == nil {
			t.Fatalf("%s: no split", c.call.Func.Name)
		}
		if got, want := fmt.Sprint(*c.call.Time), fmt.Sprint(c.want); got != want {
			t.Errorf("%s split\n got %s\nwant %s", c.call.Func.Name, got, want)
		}
		if c.call.Time.Total() != c.call.Duration() {
			t.Errorf("%s: parts add up to %d, duration %d", c.call.Func.Name, c.call.Time.Total(), c.call.Duration())
		}
	}
	if s := out.Time.String(); s != "cpu 10ms · runnable 3ms · chan receive 13ms (2 waits, chan 0xc000, goroutine 9 main.producer) · IO wait 8ms" {
		t.Errorf("line: %s", s)
	}
}

// TestWhyLostEvents checks that a call whose scheduler events contradict
// each other (one was lost) says so instead of inventing a part.
func TestWhyLostEvents(t *testing.T) {
	b, completed := whyBuilder()
	k := trace.GoroutineKey{PID: 1, Goid: 7}
	f := &trace.Function{Name: "main.f"}
	ms := uint64(time.Millisecond)
	b.Entry(k, 0x1000, f, 0, 100, 0)
	b.Sched(k, trace.SchedEvent{Kind: bpf.KindPark, Time: 1 * ms, Reason: "sleep"})
	// The ready and the run were lost: the return finds it blocked.
	b.Return(k, f, 10*ms, 100, 0)
	done := *completed
	if len(done) != 1 || done[0].Time == nil {
		t.Fatalf("calls %v", done)
	}
	s := done[0].Time
	if !s.Partial || s.Unknown != 9*ms || s.OnCPU != 1*ms || len(s.Blocked) != 0 {
		t.Errorf("split %+v, want 1 ms CPU, 9 ms unknown, partial", *s)
	}
	if s.Total() != done[0].Duration() {
		t.Errorf("parts add up to %d, duration %d", s.Total(), done[0].Duration())
	}
}

// TestWhyMatchesTarget is the ground truth of --why: whyphases's
// main.phases measures its own phases (CPU as its locked thread's CPU
// time, which leaves out what a preemption made runnable; a mutex
// another goroutine holds, a sleep, a channel another goroutine sends
// on, a socket whose peer answers late, a blocking read(2) of a pipe)
// and names the holder
// and the sender; gi's split must agree within max(3 ms, 15%) a part,
// name them and the mutex and socket waited on, and add up to the call's
// duration.
func TestWhyMatchesTarget(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		for _, o := range []targets.BuildOptions{{}, {PIE: true}} {
			opts := o
			opts.Toolchain = tc
			t.Run(opts.String(), func(t *testing.T) {
				checkWhy(t, targets.Build(t, "whyphases", opts))
			})
		}
	}
}

// whyScale lengthens whyphases's phases by GI_WHY_SCALE (1 unless set):
// the kernel grid's guests are emulated, tens of times slower, and a
// spin loop or a vCPU switch there takes milliseconds that real machines
// spend in microseconds, which the phases must dwarf for the target's
// wall-clock figures to stay its phases'.
func whyScale(t *testing.T) []string {
	scale := 1
	if s := os.Getenv("GI_WHY_SCALE"); s != "" {
		var err error
		if scale, err = strconv.Atoi(s); err != nil || scale < 1 {
			t.Fatalf("GI_WHY_SCALE=%q", s)
		}
	}
	var args []string
	for _, p := range []struct {
		flag string
		ms   int
	}{{"cpu", 30}, {"mutex", 40}, {"sleep", 20}, {"chan", 30}, {"io", 25}, {"sys", 15}} {
		args = append(args, fmt.Sprintf("-%s=%dms", p.flag, p.ms*scale))
	}
	return args
}

func checkWhy(t *testing.T, bin string) {
	p := targets.Start(t, bin, whyScale(t)...)
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.phases"), Why: true})
	// One run first, not checked: gi's first symbolizing and reading of
	// /proc share the CPUs with it.
	if _, err := p.Do("run", time.Minute); err != nil {
		t.Fatal(err)
	}
	const runs = 3
	var answers []map[string]string
	for range runs {
		r, err := p.Do("run", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, r)
	}
	res := stop()
	targets.CheckNotStopped(t, p.Pid)
	if res.Lost != 0 {
		t.Errorf("%d events lost", res.Lost)
	}
	if n := len(s.Selection.Functions); n != 1 {
		t.Fatalf("%d functions traced", n)
	}
	roots := rec.rootsOf("main.phases")
	if len(roots) != runs+1 {
		t.Fatalf("%d calls of main.phases traced, the target made %d", len(roots), runs+1)
	}
	roots = roots[1:]
	ns := func(r map[string]string, key string) uint64 {
		n, err := strconv.ParseUint(r[key], 10, 64)
		if err != nil {
			t.Fatalf("answer %v: %s: %v", r, key, err)
		}
		return n
	}
	near := func(what string, got, want uint64) {
		t.Helper()
		tol := math.Max(3e6, 0.15*float64(want))
		if math.Abs(float64(got)-float64(want)) > tol {
			t.Errorf("%s: gi %v, the target measured %v", what, time.Duration(got), time.Duration(want))
		}
	}
	// within: got is in [lo, hi], each end with near's tolerance.
	within := func(what string, got, lo, hi uint64) {
		t.Helper()
		if float64(got) < float64(lo)-math.Max(3e6, 0.15*float64(lo)) || float64(got) > float64(hi)+math.Max(3e6, 0.15*float64(hi)) {
			t.Errorf("%s: gi %v, the target measured %v of its thread's CPU time in %v", what, time.Duration(got), time.Duration(lo), time.Duration(hi))
		}
	}
	for i, r := range answers {
		call := roots[i].c
		if goid := ns(r, "goid"); roots[i].h.Goid != goid {
			t.Errorf("run %d on goroutine %d, the target says %d", i, roots[i].h.Goid, goid)
		}
		split := call.Time
		if split == nil {
			t.Fatalf("run %d: no split", i)
		}
		t.Logf("run %d: %v (%v)", i, split, time.Duration(call.Duration()))
		if split.Partial {
			t.Errorf("run %d: partial split", i)
		}
		if total, d := split.Total(), call.Duration(); math.Abs(float64(total)-float64(d)) > 0.05*float64(d) {
			t.Errorf("run %d: parts add up to %v, the call took %v", i, time.Duration(total), time.Duration(d))
		}
		// On CPU in Go's view (the goroutine on a thread, that
		// thread's preemptions by the kernel included) lies between the
		// burn's thread CPU time and its wall clock, which also has what
		// Go's preemptions left runnable: the two agree on a quiet
		// machine. gi's figure also has the call's few other
		// instructions, microseconds here.
		within(fmt.Sprintf("run %d: on CPU", i), split.OnCPU, ns(r, "cpu"), ns(r, "cpuwall"))
		wait := func(reason string) trace.BlockedTime {
			var w trace.BlockedTime
			for _, b := range split.Blocked {
				if b.Reason == reason {
					w.NS += b.NS
					w.WokenBy, w.WokenByFunction = b.WokenBy, b.WokenByFunction
					if b.Object.Kind != "" {
						w.Object = b.Object
					}
				}
			}
			return w
		}
		mu := wait("sync.Mutex.Lock")
		near(fmt.Sprintf("run %d: sync.Mutex.Lock", i), mu.NS, ns(r, "mutex"))
		if mu.Object.Kind != "mutex" || mu.Object.Name != "main.cacheMu" {
			t.Errorf("run %d: mutex wait on %+v, want mutex main.cacheMu", i, mu.Object)
		}
		if mu.WokenBy != ns(r, "holder") || mu.WokenByFunction != "main.holdLock" {
			t.Errorf("run %d: mutex released by goroutine %d %s, the holder is %s in main.holdLock", i, mu.WokenBy, mu.WokenByFunction, r["holder"])
		}
		near(fmt.Sprintf("run %d: sleep", i), wait("sleep").NS, ns(r, "sleep"))
		ch := wait("chan receive")
		near(fmt.Sprintf("run %d: chan receive", i), ch.NS, ns(r, "chan"))
		if ch.WokenBy != ns(r, "sender") || ch.WokenByFunction != "main.sendLater" {
			t.Errorf("run %d: channel sent on by goroutine %d %s, the sender is %s in main.sendLater", i, ch.WokenBy, ch.WokenByFunction, r["sender"])
		}
		io := wait("IO wait")
		// The target's io phase holds the socket's write too, which gi
		// counts as a syscall: what gi's syscalls took beyond the pipe's
		// read (tens of milliseconds under emulation, once over the
		// tolerance on the 6.1 arm64 guest).
		write := uint64(0)
		if sys, pipe := wait("syscall").NS, ns(r, "sys"); sys > pipe {
			write = sys - pipe
		}
		if got, want := io.NS, ns(r, "io"); got > want || got+write < want {
			near(fmt.Sprintf("run %d: IO wait (with the socket's write, %v)", i, time.Duration(write)), min(got+write, max(got, want)), want)
		}
		if io.WokenBy != 0 {
			t.Errorf("run %d: IO wait ended by goroutine %d: the network poller ends it", i, io.WokenBy)
		}
		if io.Object.Kind != "fd" || io.Object.FD.Kind != "tcp" || io.Object.FD.Remote != r["peer"] {
			t.Errorf("run %d: IO wait on %+v, want the tcp socket to %s", i, io.Object, r["peer"])
		}
		// The pipe's read, and the socket's write before the IO wait.
		near(fmt.Sprintf("run %d: syscall", i), wait("syscall").NS, ns(r, "sys"))
	}
}

// TestStatsParts checks the --stats table's parts: means and the 99th
// percentile over every split call (a call without a part counting
// zero), shares of the total, the largest first.
func TestStatsParts(t *testing.T) {
	st := trace.NewStats()
	f := &trace.Function{Name: "main.f"}
	ms := uint64(time.Millisecond)
	for i := range 100 {
		split := &trace.TimeSplit{OnCPU: 1 * ms}
		if i < 2 {
			// Two calls in a hundred wait 90 ms for the mutex.
			split.Blocked = []trace.BlockedTime{{Reason: "sync.Mutex.Lock", NS: 90 * ms, Count: 1}}
		}
		st.Add(&trace.Call{Func: f, Start: 0, End: split.Total(), Time: split})
	}
	parts := st.Parts(f)
	if len(parts) != 2 {
		t.Fatalf("parts %+v", parts)
	}
	mu, cpu := parts[0], parts[1]
	if cpu.Name != trace.PartOnCPU || cpu.Mean != time.Millisecond || cpu.Share < 0.35 || cpu.Share > 0.36 {
		t.Errorf("on CPU %+v: mean 1ms, share 100/280", cpu)
	}
	if mu.Name != "sync.Mutex.Lock" || mu.Mean != 1800*time.Microsecond || mu.Share < 0.64 || mu.Share > 0.65 {
		t.Errorf("mutex %+v: mean 1.8ms, share 180/280", mu)
	}
	// 98 calls of 100 without the wait: the 99th percentile is a call
	// with it.
	if mu.P99 < 85*time.Millisecond || mu.P99 > 95*time.Millisecond {
		t.Errorf("mutex p99 %v, want about 90ms", mu.P99)
	}
	if st.Parts(&trace.Function{Name: "main.g"}) != nil {
		t.Error("parts of a function never seen")
	}
}

// TestWhyMarkPartial checks that the calls open when events were lost
// say their split may be incomplete, and those after do not.
func TestWhyMarkPartial(t *testing.T) {
	b, completed := whyBuilder()
	k := trace.GoroutineKey{PID: 1, Goid: 7}
	f := &trace.Function{Name: "main.f"}
	b.Entry(k, 0x1000, f, 0, 100, 0)
	b.MarkPartial()
	b.Return(k, f, 10, 100, 0)
	b.Entry(k, 0x1000, f, 20, 100, 0)
	b.Return(k, f, 30, 100, 0)
	done := *completed
	if len(done) != 2 || !done[0].Time.Partial || done[1].Time.Partial {
		t.Fatalf("partial: %v, %v; want the first call only", done[0].Time.Partial, done[1].Time.Partial)
	}
	if s := done[0].Time.String(); s != "cpu 10ns · runnable 0ns · unknown 0ns (partial)" {
		t.Errorf("line %q", s)
	}
}
