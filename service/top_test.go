package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/service"
)

// TestWatchWithoutCLI drives gi top's operation as a second front end
// would: the groups of the first snapshot hold the target's workers, and
// refreshed, the trace the groups start on main.handle measures calls no
// shorter than the lock hold the target sleeps through.
func TestWatchWithoutCLI(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process and attaching uprobes")
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "5", "-hold", "2ms")
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	w, err := service.StartWatch(tracer, service.TopRequest{PID: p.Pid, MaxOverhead: 0.05, Reattach: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	targets.CheckNotStopped(t, p.Pid)
	workers := 0
	for _, g := range w.Groups(false) {
		for _, m := range g.Goroutines {
			if strings.HasPrefix(m.Labels["worker"], "w") {
				workers++
			}
		}
	}
	if workers != 5 {
		t.Fatalf("the groups hold %d of the target's 5 workers", workers)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := w.Refresh(); err != nil {
			t.Fatal(err)
		}
		w.Groups(false)
		if h := w.Latency().Histogram("main.handle"); h != nil && h.Count() >= 20 {
			if q := h.Quantile(0.5); q < 2*time.Millisecond {
				t.Errorf("main.handle's median %v, shorter than the 2ms the target holds its lock", q)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no latency of main.handle after 30s (trace error %q, warnings %v)", w.Latency().Err(), w.Latency().Warnings())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
	targets.CheckNotStopped(t, p.Pid)
	if _, err := p.Do("calls", time.Minute); err != nil {
		t.Errorf("target broken after the watch: %v", err)
	}
}
