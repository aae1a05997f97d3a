package trace_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// tinyNs runs `tiny n` in the tracee and returns its own ns per call.
func tinyNs(b *testing.B, p *targets.Process, n int) float64 { return nsPerCall(b, p, "tiny", n) }

// nsPerCall runs a tracee command making n calls and returns the ns per
// call the tracee measured.
func nsPerCall(b *testing.B, p *targets.Process, cmd string, n int) float64 {
	r, err := p.Do(cmd+" "+strconv.Itoa(n), 5*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	v, _ := strconv.ParseFloat(r["ns_per_call"], 64)
	return v
}

// BenchmarkProbeOverhead measures the per-call cost gi adds to a tiny traced
// function, against the cost of the same probe points running an empty BPF
// program, in one run on one target. Goal: ratio at most 1.1.
func BenchmarkProbeOverhead(b *testing.B) {
	requirePrivilege(b)
	p := targets.Start(b, targets.Build(b, "tracee", targets.BuildOptions{}))
	pat := []trace.Pattern{mustPattern(b, "main.tiny")}
	const calls = 100_000
	var base, empty, gi float64
	for i := 0; i < b.N; i++ {
		base += tinyNs(b, p, calls)

		s, err := trace.Open(trace.BaselineOptions(trace.Options{PID: p.Pid, Include: pat}))
		if err != nil {
			b.Fatal(err)
		}
		empty += tinyNs(b, p, calls)
		s.Close()

		s, err = trace.Open(trace.Options{PID: p.Pid, Include: pat})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan trace.RunResult)
		go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
		gi += tinyNs(b, p, calls)
		cancel()
		res := <-done
		s.Close()
		if res.Lost != 0 {
			b.Errorf("%d events lost", res.Lost)
		}
	}
	n := float64(b.N)
	base, empty, gi = base/n, empty/n, gi/n
	ratio := (gi - base) / (empty - base)
	b.ReportMetric(base, "untraced-ns/call")
	b.ReportMetric(empty-base, "empty-prog-overhead-ns/call")
	b.ReportMetric(gi-base, "gi-overhead-ns/call")
	b.ReportMetric(ratio, "gi/empty-overhead")
	fmt.Printf("probe overhead per call of main.tiny: untraced %.0f ns, empty BPF program +%.0f ns, gi +%.0f ns: ratio %.3f (goal ≤ 1.1)\n",
		base, empty-base, gi-base, ratio)
}

// BenchmarkArgsOverhead measures the per-call cost of capturing the
// arguments and results of main.withArgs (three ints and a string, an
// int result), against the same probe points running an empty BPF
// program, and against gi's probes without capture, in one run on one
// target. Goal: capture within 1.1x of the empty programs' overhead.
func BenchmarkArgsOverhead(b *testing.B) {
	base, empty, plain, args := captureOverhead(b, "main.withArgs", "args", 100_000)
	ratio := (args - base) / (empty - base)
	b.ReportMetric(empty-base, "empty-prog-overhead-ns/call")
	b.ReportMetric(plain-base, "gi-overhead-ns/call")
	b.ReportMetric(args-base, "gi-args-overhead-ns/call")
	b.ReportMetric(ratio, "gi-args/empty-overhead")
	fmt.Printf("argument capture per call of main.withArgs(a, b, c int, s string) int: untraced %.0f ns, empty BPF program +%.0f ns, "+
		"gi without arguments +%.0f ns, gi with arguments and results +%.0f ns: ratio %.3f to empty (goal ≤ 1.1)\n",
		base, empty-base, plain-base, args-base, ratio)
}

// captureOverhead measures the ns per call of fn, which the tracee's
// command cmd calls n times, in one run on one target: untraced, with
// empty BPF programs on gi's probe points, with gi's probes, and with
// gi's probes capturing arguments and results (means over b.N rounds).
func captureOverhead(b *testing.B, fn, cmd string, n int) (base, empty, plain, args float64) {
	requirePrivilege(b)
	p := targets.Start(b, targets.Build(b, "tracee", targets.BuildOptions{}))
	pat := []trace.Pattern{mustPattern(b, fn)}
	measure := func(opts *trace.Options) float64 {
		if opts == nil {
			return nsPerCall(b, p, cmd, n)
		}
		var ns float64
		res := whileTraced(b, *opts, func() {
			ns = nsPerCall(b, p, cmd, n)
			time.Sleep(3 * trace.DrainInterval)
		})
		if res.Lost != 0 || res.UnreadFloats != 0 || (!trace.IsBaseline(*opts) && res.Events < uint64(2*n)) {
			b.Errorf("%d events, %d lost, %d with floats unread", res.Events, res.Lost, res.UnreadFloats)
		}
		return ns
	}
	for i := 0; i < b.N; i++ {
		base += measure(nil)
		empty += measure(ptr(trace.BaselineOptions(trace.Options{PID: p.Pid, Include: pat})))
		plain += measure(&trace.Options{PID: p.Pid, Include: pat})
		args += measure(&trace.Options{PID: p.Pid, Include: pat, Args: true})
	}
	k := float64(b.N)
	return base / k, empty / k, plain / k, args / k
}

// BenchmarkFloatArgsOverhead measures the per-call cost of reading
// arguments and results passed in float registers (main.withFloats: two
// floats and an int; a float result), which takes a signal per probe,
// against the same probe points running an empty BPF program and gi's
// probes without capture, in one run on one target. It has no goal: it
// states what reading floats costs a traced call.
func BenchmarkFloatArgsOverhead(b *testing.B) {
	base, empty, plain, args := captureOverhead(b, "main.withFloats", "floatargs", 20_000)
	b.ReportMetric(empty-base, "empty-prog-overhead-ns/call")
	b.ReportMetric(plain-base, "gi-overhead-ns/call")
	b.ReportMetric(args-base, "gi-float-args-overhead-ns/call")
	b.ReportMetric((args-base)/(empty-base), "gi-float-args/empty-overhead")
	fmt.Printf("float argument capture per call of main.withFloats(x float64, k float32, n int) float64: untraced %.0f ns, empty BPF program +%.0f ns, "+
		"gi without arguments +%.0f ns, gi with arguments and results (a signal per probe) +%.0f ns: ratio %.2f to empty\n",
		base, empty-base, plain-base, args-base, (args-base)/(empty-base))
}

// BenchmarkAttachDetach measures attaching and detaching 1,000 and 10,000
// probes (uprobe_multi links). Goal: 10,000 probes in under 0.5 s in all.
func BenchmarkAttachDetach(b *testing.B) {
	requirePrivilege(b)
	bin := targets.Build(b, "demo", targets.BuildOptions{})
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("probes=%d", n), func(b *testing.B) {
			var open, attach, detach time.Duration
			probes := 0
			for i := 0; i < b.N; i++ {
				start := time.Now()
				s, err := trace.Open(trace.Options{Path: bin, Include: []trace.Pattern{mustPattern(b, "*")}, MaxProbes: n})
				if err != nil {
					b.Fatal(err)
				}
				open += time.Since(start) - s.AttachTime
				attach += s.AttachTime
				probes = s.Probes
				start = time.Now()
				s.Close()
				detach += time.Since(start)
			}
			if probes < n*9/10 {
				b.Fatalf("only %d probes in the demo binary, want about %d", probes, n)
			}
			o, a, d := open/time.Duration(b.N), attach/time.Duration(b.N), detach/time.Duration(b.N)
			b.ReportMetric(float64(o.Microseconds())/1000, "select+load-ms")
			b.ReportMetric(float64(a.Microseconds())/1000, "attach-ms")
			b.ReportMetric(float64(d.Microseconds())/1000, "detach-ms")
			fmt.Printf("%d probes: attach %v, detach %v, attach+detach %v (goal for 10,000: < 500ms); before that, selecting functions and loading BPF %v\n",
				probes, a, d, a+d, o)
		})
	}
}

// BenchmarkEventRate measures events per second delivered to user space
// while two goroutines call a traced function as fast as they can, and
// checks that none is lost. Goal: at least 1 M events/s. Two runs: gi's
// usual probes (entry and every RET: the kernel single-steps RET, which
// caps how fast a thread can produce events), and entry probes only on
// PUSHQ BP (emulated), which measures the transport itself.
func BenchmarkEventRate(b *testing.B) {
	requirePrivilege(b)
	p := targets.Start(b, targets.Build(b, "tracee", targets.BuildOptions{}))
	for _, mode := range []struct {
		name, fn, cmd string
		entryOnly     bool
	}{
		{"entry+return", "main.tiny", "tinypar 2 200000", false},
		{"entry-only", "main.framed", "framedpar 2 2000000", true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, err := trace.Open(entryOnlyIf(mode.entryOnly, trace.Options{PID: p.Pid, Include: []trace.Pattern{mustPattern(b, mode.fn)}}))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan trace.RunResult)
				cpu0 := selfCPU()
				go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
				r, err := p.Do(mode.cmd, 5*time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(3 * trace.DrainInterval)
				cancel()
				res := <-done
				cpu := selfCPU() - cpu0
				s.Close()
				wall, _ := strconv.ParseInt(r["wall_ns"], 10, 64)
				rate := float64(res.Events) / (float64(wall) / 1e9)
				perEvent := cpu / time.Duration(max(res.Events, 1))
				b.ReportMetric(rate/1e6, "M-events/s")
				b.ReportMetric(float64(res.Lost), "lost")
				b.ReportMetric(float64(perEvent.Nanoseconds()), "gi-cpu-ns/event")
				fmt.Printf("event rate (%s probes on %s): %d events in %v = %.2f M/s delivered, %d lost (goal ≥ 1 M/s, 0 lost); "+
					"gi spent %v of CPU on them, %v per event: its side would keep up with %.1f M/s, the kernel's uprobe hits are what limit the rate here\n",
					mode.name, mode.fn, res.Events, time.Duration(wall), rate/1e6, res.Lost, cpu.Round(time.Millisecond), perEvent, 1e3/float64(max(perEvent.Nanoseconds(), 1)))
				if res.Lost != 0 {
					b.Errorf("%d events lost", res.Lost)
				}
			}
		})
	}
}

// selfCPU returns the CPU time this process has used (user and system):
// in these benchmarks, what gi's side of the trace costs.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mustPattern(tb testing.TB, s string) trace.Pattern {
	p, err := trace.ParsePattern(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkWhyOverhead measures what --why costs, in one run on one
// target (testdata/pingpong): the switch rate of two goroutines passing a
// value over unbuffered channels (a goroutine switch per pass, every
// one through the probed park, ready and run paths) untraced, under a
// plain trace, under --why while no traced call is open on them (the
// scheduler probes fire and filter: what every other goroutine of a
// process pays), and under --why with the rally itself traced (every
// switch reported); and the per-call cost of --why against plain tracing
// for a call that does not switch (main.tiny: the kernel's books of
// goroutines with calls open), and of a system call outside traced calls.
func BenchmarkWhyOverhead(b *testing.B) {
	requirePrivilege(b)
	p := targets.Start(b, targets.Build(b, "pingpong", targets.BuildOptions{}))
	do := func(cmd string, key string) float64 {
		r, err := p.Do(cmd, 5*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		v, err := strconv.ParseFloat(r[key], 64)
		if err != nil {
			b.Fatalf("%s: %v", cmd, r)
		}
		return v
	}
	const rally, tiny, sys = "rally 500000", "tiny 200000", "sys 200000"
	measure := func(opts *trace.Options) (rate, perCall, perSyscall float64) {
		if opts == nil {
			return do(rally, "switches_per_sec"), do(tiny, "ns_per_call"), do(sys, "ns_per_syscall")
		}
		opts.PID = p.Pid
		res := whileTraced(b, *opts, func() {
			rate, perCall, perSyscall = do(rally, "switches_per_sec"), do(tiny, "ns_per_call"), do(sys, "ns_per_syscall")
		})
		if res.Lost != 0 {
			b.Logf("%d events lost", res.Lost)
		}
		return rate, perCall, perSyscall
	}
	both := []trace.Pattern{mustPattern(b, "main.rally"), mustPattern(b, "main.tiny")}
	onlyTiny := []trace.Pattern{mustPattern(b, "main.tiny")}
	var r0, r1, r2, r3, t0, t1, t2, s0, s2 float64
	for i := 0; i < b.N; i++ {
		r, t, sc := measure(nil)
		r0, t0, s0 = r0+r, t0+t, s0+sc
		r, t, _ = measure(&trace.Options{Include: both})
		r1, t1 = r1+r, t1+t
		r, t, sc = measure(&trace.Options{Include: onlyTiny, Why: true})
		r2, t2, s2 = r2+r, t2+t, s2+sc
		r, _, _ = measure(&trace.Options{Include: both, Why: true})
		r3 += r
	}
	n := float64(b.N)
	r0, r1, r2, r3, t0, t1, t2, s0, s2 = r0/n, r1/n, r2/n, r3/n, t0/n, t1/n, t2/n, s0/n, s2/n
	b.ReportMetric(r0, "untraced-switches/s")
	b.ReportMetric(r0/r1, "plain-slowdown")
	b.ReportMetric(r0/r2, "why-filtered-slowdown")
	b.ReportMetric(r0/r3, "why-reported-slowdown")
	b.ReportMetric(1e9/r2-1e9/r0, "why-filtered-ns/switch")
	b.ReportMetric(1e9/r3-1e9/r0, "why-reported-ns/switch")
	b.ReportMetric(t2-t1, "why-ns/call")
	b.ReportMetric(s2-s0, "why-ns/syscall")
	fmt.Printf("--why: switches/s untraced %.0f, plain trace %.0f (%.2fx), --why filtered %.0f (%.2fx, +%.0f ns/switch), --why reported %.0f (%.2fx, +%.0f ns/switch); main.tiny per call untraced %.0f ns, plain +%.0f ns, --why +%.0f ns (%.0f ns more); a system call untraced %.0f ns, under --why +%.0f ns\n",
		r0, r1, r0/r1, r2, r0/r2, 1e9/r2-1e9/r0, r3, r0/r3, 1e9/r3-1e9/r0, t0, t1-t0, t2-t0, t2-t1, s0, s2-s0)
}

// whileTraced runs fn while a trace opened with opts runs, and returns
// the run's result once the trace is detached.
func whileTraced(b *testing.B, opts trace.Options, fn func()) trace.RunResult {
	s, err := trace.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan trace.RunResult)
	go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
	fn()
	cancel()
	return <-done
}

// BenchmarkBudget measures what --max-overhead achieves: a target's pace
// traced against its untraced pace measured just before, in work per
// second of its own CPU time (what probes take from it), under budgets of
// 1%, 5% and 20% and none, on hotcold (main.hot called hundreds of
// millions of times a second from one goroutine, main.light five times a
// second) and on the demo service under its own clients' load (requests
// per second of its CPU time, 'main.*' traced). It prints, per budget,
// the slowdown, the share of the target's CPU time gi measured its probes
// taking, and the functions sampled. Under a budget the traced phase is
// measured from the last rate line before gi opened the trace: the
// counting before it, the attach and the first window's wait are all in
// (what a trace of that length costs); under none, from the first line
// after the probes went in (its steady slowdown: a prefix untraced would
// be most of the calls).
func BenchmarkBudget(b *testing.B) {
	requirePrivilege(b)
	// intervals is how many of the target's 250 ms rate lines a phase
	// spans: the demo's CPU time per request varies with its random keys
	// and sleeps, and takes longer phases to average; hotcold's is steady,
	// but its first window under 1% waits 5 s for the budget to pay for
	// it, and a phase spans a few windows.
	workloads := []struct {
		name, target string
		args         []string
		loop         string
		patterns     []string
		intervals    int
	}{
		{"hot", "hotcold", []string{"-hot", "-light", "200ms"}, "hot", []string{"main.hot", "main.light"}, 40},
		{"demo", "demo", []string{"-report", "250ms"}, "requests", []string{"main.*"}, 16},
	}
	budgets := []struct {
		name  string
		value float64
	}{{"1pct", 0.01}, {"5pct", 0.05}, {"20pct", 0.2}, {"none", 0}}
	for _, w := range workloads {
		p := targets.Start(b, targets.Build(b, w.target, targets.BuildOptions{}), w.args...)
		var include []trace.Pattern
		for _, s := range w.patterns {
			include = append(include, mustPattern(b, s))
		}
		// Warmed up first: a service's first seconds (connections,
		// caches, the heap growing) cost more CPU per request.
		loopPace(b, p, w.loop, 1, w.intervals)
		for _, bu := range budgets {
			var paces, probes []float64
			var sampled []string
			for i := 0; i < b.N; i++ {
				untraced := loopPace(b, p, w.loop, 1, w.intervals)
				seen := len(p.Lines())
				s, err := trace.Open(trace.Options{PID: p.Pid, Include: include, MaxOverhead: bu.value})
				if err != nil {
					b.Fatal(err)
				}
				// The probes' cost over the run: the counting window
				// before it (every call of a hot function counted) is not
				// the budget's.
				before, err := s.Overhead()
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan trace.RunResult, 1)
				go func() { done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{}) }()
				var traced float64
				if bu.value > 0 {
					traced = loopPaceSince(b, p, w.loop, seen, w.intervals+3)
				} else {
					traced = loopPace(b, p, w.loop, 1, w.intervals+2)
				}
				cancel()
				res := <-done
				after, err := s.Overhead()
				s.Close()
				if err != nil {
					b.Fatal(err)
				}
				paces = append(paces, traced/untraced)
				probes = append(probes, after.Sub(before).Share())
				sampled = sampled[:0]
				if sm := res.Sampling; sm != nil {
					for _, f := range sm.Functions {
						sampled = append(sampled, f.Func.Name)
					}
				}
			}
			// Medians: one phase the machine disturbs does not move them.
			pace, probe := median(paces), median(probes)
			b.ReportMetric(100*(1-pace), w.name+"-"+bu.name+"-slowdown-%")
			b.ReportMetric(100*probe, w.name+"-"+bu.name+"-probes-%")
			fmt.Printf("--max-overhead %s on %s: %.1f%% slower (median pace %.4g of untraced, %.3gx; each run %.4g), probes %.2f%% of its CPU time as gi measured them; sampled %v\n",
				bu.name, w.name, 100*(1-pace), pace, 1/pace, paces, 100*probe, sampled)
		}
	}
}

// median returns the median of v (v is sorted in place).
func median(v []float64) float64 {
	sort.Float64s(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

func ptr[T any](v T) *T { return &v }

// entryOnlyIf is o with entry probes only, if entryOnly.
func entryOnlyIf(entryOnly bool, o trace.Options) trace.Options {
	if entryOnly {
		return trace.EntryOnlyOptions(o)
	}
	return o
}
