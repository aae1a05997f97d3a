package service_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/service"
	"github.com/gi-debug/gi/trace"
)

// TestTraceCheck: a trace request that cannot be traced is refused, in
// one line naming the flag, before any probe goes in.
func TestTraceCheck(t *testing.T) {
	ok := service.TraceRequest{PID: 1, Include: []string{"main.*"}, StringSize: trace.DefaultStringSize}
	if err := ok.Check(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	with := func(change func(*service.TraceRequest)) service.TraceRequest {
		r := ok
		change(&r)
		return r
	}
	cases := []struct {
		req  service.TraceRequest
		want string
	}{
		{with(func(r *service.TraceRequest) { r.Path = "/bin/true" }), "not both"},
		{with(func(r *service.TraceRequest) { r.PID = 0 }), "no process"},
		{with(func(r *service.TraceRequest) { r.PID = os.Getpid() }), "gi itself"},
		{with(func(r *service.TraceRequest) { r.PID, r.Path = 0, "/proc/self/exe" }), "gi's own executable"},
		{with(func(r *service.TraceRequest) { r.Include = nil }), "no pattern"},
		{with(func(r *service.TraceRequest) { r.Include = []string{"main.[a"} }), "main.[a"},
		{with(func(r *service.TraceRequest) { r.Exclude = []string{"["} }), "--exclude"},
		{with(func(r *service.TraceRequest) { r.Where = []string{"main.f: x ~ 3"} }), "--where"},
		{with(func(r *service.TraceRequest) { r.Duration = -time.Second }), "--duration -1s"},
		{with(func(r *service.TraceRequest) { r.Interval = -time.Second }), "--interval"},
		{with(func(r *service.TraceRequest) { r.MaxOverhead = 1.5 }), "--max-overhead"},
		{with(func(r *service.TraceRequest) { r.StringSize = 0 }), "--string-size 0"},
		{with(func(r *service.TraceRequest) { r.StringSize = trace.MaxStringSize + 1 }), "--string-size"},
	}
	for _, c := range cases {
		err := c.req.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.req, err, c.want)
			continue
		}
		if tr, err := service.StartTrace(c.req); err == nil {
			tr.Close()
			t.Errorf("%+v: StartTrace attached a request Check refuses", c.req)
		}
	}
	// The selection alone: no process named yet.
	if err := with(func(r *service.TraceRequest) { r.PID = 0 }).CheckSelection(); err != nil {
		t.Errorf("selection without a process: %v", err)
	}
	if err := with(func(r *service.TraceRequest) { r.Include = []string{"main.[a"} }).CheckSelection(); err == nil {
		t.Error("a bad pattern passed CheckSelection")
	}
}

// TestTraceWithoutCLI drives gi trace's operation as a second front end
// would: attach under the default budget, run while the target works,
// and read the calls, their trees and their arguments from the handlers,
// then the typed result. The target says how many calls it made, on
// which goroutine, and with what arguments.
func TestTraceWithoutCLI(t *testing.T) {
	targets.RequirePrivilege(t, "attaching uprobes")
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	tr, err := service.StartTrace(service.TraceRequest{PID: p.Pid, Include: []string{"main.chain*", "main.withArgs"}, Exclude: []string{"main.chainC"},
		Args: true, StringSize: trace.DefaultStringSize, MaxOverhead: 0.05, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st := tr.Started
	var names []string
	for _, f := range st.Functions {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if st.PID != p.Pid || st.Probes < 2*len(st.Functions) || strings.Join(names, " ") != "main.chainA main.chainB main.withArgs" {
		t.Fatalf("started: pid %d, %d probes, functions %v", st.PID, st.Probes, names)
	}
	for _, w := range st.Warnings {
		if w.Kind == service.WarnKernelFeature && (w.Feature == nil || w.Message != w.Feature.Warning()) {
			t.Errorf("kernel-feature warning without its feature: %+v", w)
		}
	}
	var mu sync.Mutex
	var roots, args []*trace.Call
	var ticks int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *service.TraceResult, 1)
	go func() {
		done <- tr.Run(ctx, trace.Handlers{
			Root: func(_ trace.Header, c *trace.Call) {
				mu.Lock()
				defer mu.Unlock()
				if c.Func.Name == "main.withArgs" {
					args = append(args, c)
				} else {
					roots = append(roots, c)
				}
			},
			Tick: func() {
				mu.Lock()
				ticks++
				mu.Unlock()
			},
		})
	}()
	chain, err := p.Do("chain 12", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	withArgs, err := p.Do("args 40", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The calls reach the handlers within a few reads of the ring buffer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n, m := len(roots), len(args)
		mu.Unlock()
		if n >= 12 && m >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	res := <-done
	if res.Err != nil || res.Exited {
		t.Fatalf("run: %v, exited %v", res.Err, res.Exited)
	}
	targets.CheckNotStopped(t, p.Pid)
	if res.Events == 0 || res.Lost != 0 || res.Took <= 0 {
		t.Errorf("result: %d events, %d lost, took %v", res.Events, res.Lost, res.Took)
	}
	if res.Overhead == nil {
		t.Error("the overhead was not measured")
	}
	mu.Lock()
	defer mu.Unlock()
	if ticks == 0 {
		t.Error("Tick never ran")
	}
	if fmt.Sprint(len(roots)) != chain["calls"] {
		t.Fatalf("%d chainA root calls, the target made %s", len(roots), chain["calls"])
	}
	for _, r := range roots {
		if r.Func.Name != "main.chainA" || len(r.Children) != 1 || r.Children[0].Func.Name != "main.chainB" || len(r.Children[0].Children) != 0 {
			t.Fatalf("not chainA → chainB (chainC excluded): %+v", r)
		}
		if time.Duration(r.Duration()) < 8*time.Millisecond {
			t.Errorf("chainA took %v, shorter than its sleeps", time.Duration(r.Duration()))
		}
	}
	if fmt.Sprint(len(args)) != withArgs["calls"] {
		t.Fatalf("%d main.withArgs calls, the target made %s", len(args), withArgs["calls"])
	}
	keys := []string{"user:7", "session:1234", "k"}
	for i, c := range args {
		got := tr.Symbols().Values(uint32(p.Pid), c.Func.Args, c.Args)
		want := fmt.Sprintf("a=%d b=%d c=%d s=%q", i, 2*i, 3*i, keys[i%3])
		var parts []string
		for _, v := range got {
			parts = append(parts, v.Name+"="+v.Value)
		}
		if strings.Join(parts, " ") != want {
			t.Fatalf("call %d: arguments %v, the target passed %s", i, parts, want)
		}
	}
	if err := tr.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestTraceTargetExits: a process that exits during the trace ends it,
// and the result says so as a value, not as an error.
func TestTraceTargetExits(t *testing.T) {
	targets.RequirePrivilege(t, "attaching uprobes")
	p := targets.Start(t, targets.Build(t, "tracee", targets.BuildOptions{}))
	tr, err := service.StartTrace(service.TraceRequest{PID: p.Pid, Include: []string{"main.chain*"}, StringSize: trace.DefaultStringSize, MaxOverhead: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := p.Do("chain 3", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := tr.Run(ctx, trace.Handlers{})
	if !res.Exited || res.Err != nil || ctx.Err() != nil {
		t.Fatalf("exited %v, err %v, the context %v", res.Exited, res.Err, ctx.Err())
	}
}
