package trace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/trace"
)

// requirePrivilege skips, or under GI_REQUIRE_PRIVILEGED=1 fails, a test
// that needs root to attach eBPF uprobes.
func requirePrivilege(t testing.TB) {
	t.Helper()
	targets.RequirePrivilege(t, "eBPF uprobes")
}

// recorded is what a trace produced, collected by the handlers.
type recorded struct {
	mu      sync.Mutex
	calls   []call
	roots   []root
	running []running
}

// running is what Handlers.Running reported: a goroutine's open calls.
type running struct {
	h    trace.Header
	open []*trace.Call
}

type call struct {
	h trace.Header
	c *trace.Call
}

type root struct {
	h trace.Header
	c *trace.Call
}

func (r *recorded) byFunc(name string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.c.Func.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorded) rootsOf(name string) []root {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []root
	for _, x := range r.roots {
		if x.c.Func.Name == name {
			out = append(out, x)
		}
	}
	return out
}

// startTrace attaches to pid and collects calls until the returned stop is called.
func startTrace(t *testing.T, opts trace.Options) (*trace.Session, *recorded, func() trace.RunResult) {
	t.Helper()
	s, err := trace.Open(opts)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	rec := &recorded{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan trace.RunResult, 1)
	go func() {
		done <- s.Run(ctx, trace.RunOptions{}, trace.Handlers{
			Call: func(h trace.Header, c *trace.Call) {
				rec.mu.Lock()
				rec.calls = append(rec.calls, call{h, c})
				rec.mu.Unlock()
			},
			Root: func(h trace.Header, c *trace.Call) {
				rec.mu.Lock()
				rec.roots = append(rec.roots, root{h, c})
				rec.mu.Unlock()
			},
			Running: func(h trace.Header, open []*trace.Call) {
				rec.mu.Lock()
				rec.running = append(rec.running, running{h, open})
				rec.mu.Unlock()
			},
		})
	}()
	var once sync.Once
	var res trace.RunResult
	stop := func() trace.RunResult {
		once.Do(func() {
			time.Sleep(3 * trace.DrainInterval)
			cancel()
			res = <-done
			if err := s.Close(); err != nil {
				t.Errorf("detach: %v", err)
			}
		})
		return res
	}
	t.Cleanup(func() { stop() })
	return s, rec, stop
}

func mustPatterns(t *testing.T, ss ...string) []trace.Pattern {
	var out []trace.Pattern
	for _, s := range ss {
		p, err := trace.ParsePattern(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

// TestTraceWorkloads traces the tracee's workloads for every toolchain under
// test, PIE and not, and checks trees, durations and counts against what the
// target measured itself.
func TestTraceWorkloads(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		for _, o := range []targets.BuildOptions{{}, {PIE: true}, {Stripped: true}, {PIE: true, Stripped: true}} {
			opts := o
			opts.Toolchain = tc
			t.Run(opts.String(), func(t *testing.T) {
				checkWorkloads(t, targets.Build(t, "tracee", opts), trace.Options{})
			})
		}
	}
}

// checkWorkloads traces bin's workloads with base's attach options.
func checkWorkloads(t *testing.T, bin string, base trace.Options) {
	p := targets.Start(t, bin)
	opts := base
	opts.PID = p.Pid
	opts.Include = mustPatterns(t,
		"main.chain*", "main.par*", "main.recoverer", "main.panicky", "main.thrower",
		"main.grower", "main.multiRet", "main.churnWork", "main.exiter")
	s, rec, stop := startTrace(t, opts)
	if base.CookieByIP && !s.CookieByIP || base.PerfEvents && s.UprobeMulti {
		t.Errorf("session attached with cookies by address %v, uprobe_multi %v; forced: by address %v, perf events %v",
			s.CookieByIP, s.UprobeMulti, base.CookieByIP, base.PerfEvents)
	}
	if len(s.Selection.Functions) != 12 {
		var names []string
		for _, f := range s.Selection.Functions {
			names = append(names, f.Name)
		}
		t.Errorf("selected %d functions, want 12: %v (untraceable: %v)", len(names), names, s.Selection.Untraceable)
	}
	do := func(cmd string) map[string]string {
		r, err := p.Do(cmd, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	chain := do("chain 20")
	par := do("parallel 8 50")
	pan := do("panic 10")
	// 200 calls: enough for the arm64 double entries (about 1 call in
	// 130 under emulation before the entry moved past restartable
	// sequences) to show in every guest.
	grow := do("grow 50")
	multi := do("multi 300")
	churn := do("churn 5000")
	gexit := do("goexit 20")
	res := stop()
	targets.CheckNotStopped(t, p.Pid)
	if res.Lost != 0 {
		t.Errorf("%d events lost", res.Lost)
	}
	if res.Err != nil {
		t.Errorf("run: %v", res.Err)
	}

	// Chain: nesting and durations.
	roots := rec.rootsOf("main.chainA")
	if len(roots) != atoi(t, chain["calls"]) {
		t.Fatalf("%d chainA root calls, target made %s", len(roots), chain["calls"])
	}
	var sumA time.Duration
	for _, r := range roots {
		a := r.c
		if r.h.Goid != uint64(atoi(t, chain["goid"])) {
			t.Errorf("chainA on goroutine %d, target says %s", r.h.Goid, chain["goid"])
		}
		if len(a.Children) != 1 || a.Children[0].Func.Name != "main.chainB" ||
			len(a.Children[0].Children) != 1 || a.Children[0].Children[0].Func.Name != "main.chainC" {
			t.Fatalf("chain tree is not A→B→C: %+v", a)
		}
		b := a.Children[0]
		c := b.Children[0]
		dA, dB, dC := time.Duration(a.Duration()), time.Duration(b.Duration()), time.Duration(c.Duration())
		if dC < 5*time.Millisecond || dB < 7*time.Millisecond || dA < 8*time.Millisecond {
			t.Errorf("durations shorter than the sleeps: A %v B %v C %v", dA, dB, dC)
		}
		if !(dA >= dB && dB >= dC) || a.Start > b.Start || b.Start > c.Start || c.End > b.End || b.End > a.End {
			t.Errorf("nesting violated: A %v B %v C %v", dA, dB, dC)
		}
		if a.Depth != 0 || b.Depth != 1 || c.Depth != 2 || a.Unwound || b.Unwound || c.Unwound {
			t.Errorf("depths %d %d %d, unwound %v %v %v", a.Depth, b.Depth, c.Depth, a.Unwound, b.Unwound, c.Unwound)
		}
		sumA += dA
	}
	meanA := sumA / time.Duration(len(roots))
	targetA := time.Duration(atoi(t, chain["avg_ns"]))
	if diff := meanA - targetA; diff < -time.Millisecond-targetA/10 || diff > time.Millisecond+targetA/10 {
		t.Errorf("mean chainA duration %v, the target measured %v", meanA, targetA)
	}
	t.Logf("chainA mean %v (target measured %v)", meanA, targetA)
	if h := roots[0].h; !h.Known || h.CreatedBy.Function == "" && h.Goid != 1 {
		t.Errorf("goroutine header unknown: %+v", h)
	}

	// Parallel: every worker's tree holds its own 50 leaves.
	goids := map[uint64]bool{}
	for _, g := range strings.Split(par["goids"], ",") {
		goids[uint64(atoi(t, g))] = true
	}
	workers := rec.rootsOf("main.parWorker")
	if len(workers) != atoi(t, par["goroutines"]) {
		t.Errorf("%d parWorker roots, want %s", len(workers), par["goroutines"])
	}
	for _, w := range workers {
		if !goids[w.h.Goid] {
			t.Errorf("parWorker root on goroutine %d, not one of the workers %s", w.h.Goid, par["goids"])
		}
		delete(goids, w.h.Goid)
		if len(w.c.Children) != atoi(t, par["calls"]) {
			t.Errorf("goroutine %d: %d parLeaf children, want %s", w.h.Goid, len(w.c.Children), par["calls"])
		}
		for _, c := range w.c.Children {
			if c.Func.Name != "main.parLeaf" || c.Depth != 1 || c.Start < w.c.Start || c.End > w.c.End {
				t.Errorf("goroutine %d: bad child %s depth %d", w.h.Goid, c.Func.Name, c.Depth)
				break
			}
		}
		if w.h.CreatedBy.Function == "" {
			t.Errorf("goroutine %d: no creator in header", w.h.Goid)
		}
	}

	// Panic: recoverer returns, the frames the panic crossed are unwound.
	recs := rec.rootsOf("main.recoverer")
	if len(recs) != atoi(t, pan["calls"]) || pan["recovered"] != pan["calls"] {
		t.Errorf("%d recoverer roots, target: %v", len(recs), pan)
	}
	for _, r := range recs {
		if r.c.Unwound || len(r.c.Children) != 1 {
			t.Fatalf("recoverer: unwound %v, %d children", r.c.Unwound, len(r.c.Children))
		}
		pk := r.c.Children[0]
		if pk.Func.Name != "main.panicky" || !pk.Unwound || len(pk.Children) != 1 || !pk.Children[0].Unwound || pk.Children[0].Func.Name != "main.thrower" {
			t.Errorf("panic tree wrong: panicky unwound=%v children=%d", pk.Unwound, len(pk.Children))
		}
	}

	// Counts equal the target's own.
	for fn, want := range map[string]string{
		"main.grower": grow["calls"], "main.multiRet": multi["calls"], "main.churnWork": churn["calls"], "main.exiter": gexit["calls"],
	} {
		if got := len(rec.byFunc(fn)); got != atoi(t, want) {
			t.Errorf("%s: %d calls traced, the target made %s", fn, got, want)
		}
	}
	for _, c := range rec.byFunc("main.grower") {
		if c.c.Unwound {
			t.Errorf("grower call unwound: morestack confused the frame matching")
			break
		}
	}
	sites := map[uint64]bool{}
	for _, c := range rec.byFunc("main.multiRet") {
		if c.c.Unwound {
			t.Errorf("multiRet call unwound")
			break
		}
		sites[c.c.ReturnSite] = true
	}
	if len(sites) < 3 {
		t.Errorf("multiRet returned through %d distinct RETs, want at least 3", len(sites))
	}
	for _, c := range rec.byFunc("main.exiter") {
		if !c.c.Unwound {
			t.Errorf("exiter call not marked unwound after runtime.Goexit")
			break
		}
	}
	if res.OpenGoroutines != 0 {
		t.Errorf("%d goroutines still have state after churn and exits", res.OpenGoroutines)
	}
	if res.Unmatched != 0 {
		t.Errorf("%d returns without entry", res.Unmatched)
	}
	t.Logf("%d events, %d probes, attach %v", res.Events, s.Probes, s.AttachTime)
}

// TestTraceGoidFilter checks that --goid filtering happens in BPF: only the
// chosen goroutine's calls arrive.
func TestTraceGoidFilter(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	_, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.chain*", "main.par*"), Goids: []uint64{1}})
	if _, err := p.Do("parallel 4 10", time.Minute); err != nil {
		t.Fatal(err)
	}
	chain, err := p.Do("chain 3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := stop()
	if chain["goid"] != "1" {
		t.Fatalf("tracee's commands run on goroutine %s, not 1", chain["goid"])
	}
	if n := len(rec.byFunc("main.parLeaf")); n != 0 {
		t.Errorf("%d parLeaf calls from other goroutines got through the filter", n)
	}
	if n := len(rec.rootsOf("main.chainA")); n != 3 {
		t.Errorf("%d chainA calls, want 3", n)
	}
	if res.Events != 3*3*2 {
		t.Errorf("%d events, want %d (only goroutine 1's)", res.Events, 3*3*2)
	}
}

// TestTraceCookieByIP runs the workloads with probes that find their
// cookie by address, as on kernels before 5.15, default and PIE (whose
// addresses carry the load bias), through uprobe_multi and per-probe perf
// events (the pair older kernels get).
func TestTraceCookieByIP(t *testing.T) {
	requirePrivilege(t)
	for _, c := range []struct {
		name  string
		build targets.BuildOptions
		opts  trace.Options
	}{
		{"default", targets.BuildOptions{}, trace.Options{CookieByIP: true}},
		{"pie", targets.BuildOptions{PIE: true}, trace.Options{CookieByIP: true}},
		{"pie/perf-events", targets.BuildOptions{PIE: true}, trace.Options{CookieByIP: true, PerfEvents: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkWorkloads(t, targets.Build(t, "tracee", c.build), c.opts)
		})
	}
	// Without a pid, a PIE's addresses are unknown: refused in one line.
	bin := targets.Build(t, "tracee", targets.BuildOptions{PIE: true})
	if s, err := trace.Open(trace.Options{Path: bin, Include: mustPatterns(t, "main.chainA"), CookieByIP: true}); err == nil {
		s.Close()
		t.Error("PIE traced by path with cookies by address: no error")
	} else if !strings.Contains(err.Error(), "5.15") || strings.Contains(err.Error(), "\n") {
		t.Errorf("PIE traced by path with cookies by address: %q, want one line naming 5.15", err)
	}
	// A non-PIE by path: every process has the same addresses.
	checkTwoProcesses(t, targets.Build(t, "tracee", targets.BuildOptions{}), true)
}

// TestTraceBinaryPath traces every process running a binary.
func TestTraceBinaryPath(t *testing.T) {
	requirePrivilege(t)
	checkTwoProcesses(t, targets.Build(t, "tracee", targets.BuildOptions{PIE: true}), false)
}

// checkTwoProcesses traces bin by path while two processes run it, and
// checks each one's calls arrive with its pid.
func checkTwoProcesses(t *testing.T, bin string, byIP bool) {
	p1, p2 := targets.Start(t, bin), targets.Start(t, bin)
	_, rec, stop := startTrace(t, trace.Options{Path: bin, Include: mustPatterns(t, "main.chainA"), CookieByIP: byIP})
	for _, p := range []*targets.Process{p1, p2} {
		if _, err := p.Do("chain 2", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	pids := map[uint32]int{}
	for _, c := range rec.byFunc("main.chainA") {
		pids[c.h.PID]++
	}
	if pids[uint32(p1.Pid)] != 2 || pids[uint32(p2.Pid)] != 2 || len(pids) != 2 {
		t.Errorf("calls per pid %v, want 2 from each of %d and %d", pids, p1.Pid, p2.Pid)
	}
}

// TestTracePerfEventFallback attaches one perf event per probe, the path for
// kernels without uprobe_multi, and checks it sees the same calls.
func TestTracePerfEventFallback(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.chain*", "main.multiRet"), PerfEvents: true})
	if _, err := p.Do("chain 3", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Do("multi 30", time.Minute); err != nil {
		t.Fatal(err)
	}
	stop()
	if s.UprobeMulti {
		t.Errorf("PerfEvents forced, but the session reports uprobe_multi links")
	}
	if n := len(rec.rootsOf("main.chainA")); n != 3 {
		t.Errorf("%d chainA roots through perf events, want 3", n)
	}
	if n := len(rec.byFunc("main.multiRet")); n != 30 {
		t.Errorf("%d multiRet calls through perf events, want 30", n)
	}
	t.Logf("%d probes attached as perf events in %v, detached in %v", s.Probes, s.AttachTime, s.DetachTime)
}

// TestTraceKernelFeatures: gi must attach through uprobe_multi links
// where the kernel has them (6.6+) and through attach cookies where it has
// them (5.15+): a silent fall back (seconds to detach a few thousand
// probes) fails here; where the kernel lacks one, the session says so in
// its one-line warning. The kernel's release is the oracle, independent of
// gi's probing of the kernel.
func TestTraceKernelFeatures(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.chain*")})
	if _, err := p.Do("chain 3", time.Minute); err != nil {
		t.Fatal(err)
	}
	stop()
	release, atLeast := kernelRelease(t)
	haveMulti, haveCookies := atLeast(6, 6), atLeast(5, 15)
	t.Logf("kernel %s; session: %d probes, uprobe_multi %v, cookies by address %v; warnings %q", release, s.Probes, s.UprobeMulti, s.CookieByIP, s.Warnings)
	if s.UprobeMulti != haveMulti || slices.Contains(s.Warnings, trace.WarnNoUprobeMulti) == haveMulti {
		t.Errorf("kernel %s: uprobe_multi links used %v, want %v (warnings %q)", release, s.UprobeMulti, haveMulti, s.Warnings)
	}
	if s.CookieByIP == haveCookies || slices.Contains(s.Warnings, trace.WarnNoAttachCookies) == haveCookies {
		t.Errorf("kernel %s: probes found by address %v, want %v (warnings %q)", release, s.CookieByIP, !haveCookies, s.Warnings)
	}
	if n := len(rec.rootsOf("main.chainA")); n != 3 {
		t.Errorf("%d chainA roots, want 3", n)
	}
	if haveMulti != (features.HaveBPFLinkUprobeMulti() == nil) {
		t.Errorf("kernel %s: cilium/ebpf's probe for uprobe_multi says %v", release, features.HaveBPFLinkUprobeMulti())
	}
}

// kernelRelease returns the running kernel's release and a function that
// tells whether it is at least major.minor.
func kernelRelease(t *testing.T) (string, func(major, minor int) bool) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", release, err)
	}
	return release, func(ma, mi int) bool { return major > ma || major == ma && minor >= mi }
}

func TestTraceErrors(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	_, err := trace.Open(trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.nothingLikeThis*")})
	if err == nil || !strings.Contains(err.Error(), "matches no function") {
		t.Errorf("pattern matching nothing: %v", err)
	}
	_, err = trace.Open(trace.Options{PID: p.Pid, Include: mustPatterns(t, "runtime.mallocgc")})
	if err == nil || !strings.Contains(err.Error(), "cannot be traced") {
		t.Errorf("runtime function: %v", err)
	}
	_, err = trace.Open(trace.Options{PID: 999999999, Include: mustPatterns(t, "main.*")})
	if err == nil {
		t.Errorf("no error for a missing pid")
	}
}

// TestTraceGFromTLS reads g through the thread pointer (CO-RE) and the
// binary's TLS offset instead of r14, on an internally linked binary and on
// a cgo binary linked externally (where g's TLS slot moves).
func TestTraceGFromTLS(t *testing.T) {
	requirePrivilege(t)
	for _, opts := range []targets.BuildOptions{{}, {CgoExternal: true}, {CgoExternal: true, PIE: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "tracee", opts))
			_, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.chain*", "main.par*"), GFromTLS: true})
			chain, err := p.Do("chain 3", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			par, err := p.Do("parallel 4 5", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			stop()
			roots := rec.rootsOf("main.chainA")
			if len(roots) != 3 {
				t.Fatalf("%d chainA roots, want 3", len(roots))
			}
			for _, r := range roots {
				if strconv.FormatUint(r.h.Goid, 10) != chain["goid"] || len(r.c.Children) != 1 {
					t.Errorf("chainA on goroutine %d (target says %s), %d children", r.h.Goid, chain["goid"], len(r.c.Children))
				}
			}
			workers := map[string]bool{}
			for _, w := range rec.rootsOf("main.parWorker") {
				workers[strconv.FormatUint(w.h.Goid, 10)] = true
				if len(w.c.Children) != 5 {
					t.Errorf("worker %d has %d leaves, want 5", w.h.Goid, len(w.c.Children))
				}
			}
			for _, id := range strings.Split(par["goids"], ",") {
				if !workers[id] {
					t.Errorf("worker goroutine %s not seen through TLS (saw %v)", id, workers)
				}
			}
		})
	}
}

// TestMatrixTrace runs the traced workloads on every cell of the
// compatibility matrix (GI_TEST_MATRIX=1, `make test-matrix`) and prints
// the grid.
func TestMatrixTrace(t *testing.T) {
	if !targets.MatrixEnabled() {
		t.Skip("the compatibility matrix runs with GI_TEST_MATRIX=1 (make test-matrix)")
	}
	requirePrivilege(t)
	targets.PrebuildMatrix(t, "tracee")
	var grid targets.Grid
	t.Cleanup(func() { grid.Print(os.Stdout, "gi trace: call trees and counts (Go release × build)") })
	for _, c := range targets.MatrixCells() {
		c := c
		t.Run(c.Opts.String(), func(t *testing.T) {
			grid.Set(c, "FAIL")
			checkWorkloads(t, targets.Build(t, "tracee", c.Opts), trace.Options{})
			if !t.Failed() {
				grid.Set(c, "ok")
			}
		})
	}
}

// TestMemlockLimit runs gi's attach in a child without CAP_SYS_RESOURCE
// and with RLIMIT_MEMLOCK at 64 KiB. Kernels from 5.11 charge BPF memory
// to the memory cgroup instead: the trace must work. Before 5.11 gi
// cannot raise the limit, and must say so in one line, not blame
// capabilities it has.
func TestMemlockLimit(t *testing.T) {
	if pid := os.Getenv("GI_TEST_MEMLOCK_PID"); pid != "" {
		memlockChild(t, atoi(t, pid))
		return
	}
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	// The bounding set is per thread and inherited through fork from the
	// forking thread: drop CAP_SYS_RESOURCE in a thread of its own, which
	// then starts the child and is never used again. That goroutine never
	// returns: a locked thread whose goroutine exits is killed, and with it
	// every process forked from it with a parent-death signal (the target,
	// if the runtime had started it from that thread).
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, never returns
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_RESOURCE, 0, 0, 0); err != nil {
			done <- result{nil, fmt.Errorf("drop CAP_SYS_RESOURCE: %w", err)}
			select {}
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMemlockLimit$", "-test.v")
		cmd.Env = append(os.Environ(), "GI_TEST_MEMLOCK_PID="+strconv.Itoa(p.Pid))
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
		select {} // keeps the thread, and whatever it forked, alive
	}()
	r := <-done
	if r.err != nil || !strings.Contains(string(r.out), "--- PASS: TestMemlockLimit") {
		t.Errorf("child without CAP_SYS_RESOURCE: %v\n%s", r.err, r.out)
	}
	t.Logf("child:\n%s", r.out)
	targets.CheckNotStopped(t, p.Pid)
}

func memlockChild(t *testing.T, pid int) {
	if has, _ := proc.HasCapabilities(unix.CAP_SYS_RESOURCE); has {
		t.Fatal("the child still has CAP_SYS_RESOURCE")
	}
	limit := unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &limit); err != nil {
		t.Fatal(err)
	}
	release, atLeast := kernelRelease(t)
	charged := !atLeast(5, 11)
	s, err := trace.Open(trace.Options{PID: pid, Include: mustPatterns(t, "main.chainA")})
	if err == nil {
		defer s.Close()
	}
	t.Logf("kernel %s: %v", release, err)
	switch {
	case charged && !errors.Is(err, trace.ErrMemlock):
		t.Errorf("kernel %s charges BPF memory to RLIMIT_MEMLOCK: got %v, want %v", release, err, trace.ErrMemlock)
	case charged && strings.Contains(err.Error(), "\n"):
		t.Errorf("not one line: %q", err)
	case !charged && err != nil:
		t.Errorf("kernel %s charges BPF memory to the memory cgroup, yet with a 64 KiB memlock limit: %v", release, err)
	}
}

// TestTraceAdd: a growable session takes more functions while it runs
// (Session.Add, called between two reads of the ring buffer): calls of
// the functions added are traced from then on, under those of the first,
// through uprobe_multi links, one perf event per probe, and probes found
// by address (a PIE). Adding what is traced already adds nothing; a
// session that is not growable, or captures arguments, refuses.
func TestTraceAdd(t *testing.T) {
	requirePrivilege(t)
	for _, c := range []struct {
		name  string
		build targets.BuildOptions
		opts  trace.Options
	}{
		{"default", targets.BuildOptions{}, trace.Options{}},
		{"perf-events", targets.BuildOptions{}, trace.Options{PerfEvents: true}},
		{"pie/cookie-by-ip", targets.BuildOptions{PIE: true}, trace.Options{CookieByIP: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "tracee", c.build))
			opts := c.opts
			opts.PID, opts.Include, opts.Growable = p.Pid, mustPatterns(t, "main.chainA"), true
			s, err := trace.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			type added struct {
				fns []*trace.Function
				err error
			}
			requests, replies := make(chan []trace.Pattern), make(chan added)
			rec := &recorded{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan trace.RunResult, 1)
			go func() {
				done <- s.Run(ctx, trace.RunOptions{Interval: 20 * time.Millisecond}, trace.Handlers{
					Root: func(h trace.Header, c *trace.Call) {
						rec.mu.Lock()
						rec.roots = append(rec.roots, root{h, c})
						rec.mu.Unlock()
					},
					Tick: func() {
						select {
						case pats := <-requests:
							fns, _, err := s.Add(pats)
							replies <- added{fns, err}
						default:
						}
					},
				})
			}()
			add := func(pats ...string) added {
				requests <- mustPatterns(t, pats...)
				return <-replies
			}
			if _, err := p.Do("chain 2", time.Minute); err != nil {
				t.Fatal(err)
			}
			a := add("main.chain*")
			var names []string
			for _, f := range a.fns {
				names = append(names, f.Name)
			}
			slices.Sort(names)
			if a.err != nil || !slices.Equal(names, []string{"main.chainB", "main.chainC"}) {
				t.Fatalf("Add(main.chain*) = %q, %v; want main.chainB and main.chainC", names, a.err)
			}
			if a = add("main.chainB"); a.err != nil || len(a.fns) != 0 {
				t.Errorf("Add of a traced function: %v, %v; want nothing added", a.fns, a.err)
			}
			if _, err := p.Do("chain 3", time.Minute); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * trace.DrainInterval)
			cancel()
			res := <-done
			roots := rec.rootsOf("main.chainA")
			if len(roots) != 5 {
				t.Fatalf("%d chainA roots, want 5 (2 before the Add, 3 after)", len(roots))
			}
			for i, r := range roots {
				kids := 0
				if i >= 2 {
					kids = 1
					if len(r.c.Children) == 1 && (r.c.Children[0].Func.Name != "main.chainB" || len(r.c.Children[0].Children) != 1 ||
						r.c.Children[0].Children[0].Func.Name != "main.chainC") {
						t.Errorf("chainA call %d after the Add: children %v, want chainB → chainC", i, r.c.Children[0])
					}
				}
				if len(r.c.Children) != kids {
					t.Errorf("chainA call %d: %d children, want %d", i, len(r.c.Children), kids)
				}
			}
			if s.Probes < 3 || len(s.Selection.Functions) != 3 || res.Lost != 0 || res.Unmatched != 0 {
				t.Errorf("after the Add: %d probes, functions %v, %d lost, %d unmatched", s.Probes, s.Selection.Functions, res.Lost, res.Unmatched)
			}
		})
	}
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	for _, opts := range []trace.Options{{PID: p.Pid}, {PID: p.Pid, Growable: true, Args: true}} {
		opts.Include = mustPatterns(t, "main.chainA")
		s, err := trace.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if fns, _, err := s.Add(mustPatterns(t, "main.chainB")); err == nil {
			t.Errorf("Add to a session with %+v: added %v, want an error", opts, fns)
		}
		s.Close()
	}
}
