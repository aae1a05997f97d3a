package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/decodes"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/service"
	"github.com/gi-debug/gi/trace"
)

// TestEachFactDerivedOnce drives every operation of the service layer on
// a live process and counts what each derives from the executable and
// the process: the ELF and its pclntab, the runtime's layout and
// strings, the load bias and the DWARF at most once per operation (the
// per-process model holds them for inspect, leak, trace and measure
// alike), and each function's probe sites at most once (where the
// functions are known ahead). The counts must
// also be non-zero where the operation needs the fact, or the counting
// is broken.
func TestEachFactDerivedOnce(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process and attaching uprobes")
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{PIE: true}), "-workers", "4")
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	type op struct {
		name string
		run  func(t *testing.T) (functions int)
		need []decodes.Kind
	}
	ops := []op{
		{"Ps --leaks", func(t *testing.T) int {
			if _, err := service.Ps(context.Background(), tracer, service.PsRequest{PID: p.Pid, Waits: true, Leaks: true}); err != nil {
				t.Fatal(err)
			}
			return 0
		}, []decodes.Kind{decodes.ELF, decodes.Layout, decodes.RuntimeStrings, decodes.LoadBias}},
		{"Ps --trace --why", func(t *testing.T) int {
			if _, err := service.Ps(context.Background(), tracer, service.PsRequest{PID: p.Pid, Trace: 500 * time.Millisecond, TraceDepth: 2, Why: true, MaxOverhead: 0.05}); err != nil {
				t.Fatal(err)
			}
			return -1 // measure follows whatever functions the goroutines are in: TestMeasureReadsTheBinaryOnce
		}, []decodes.Kind{decodes.ELF, decodes.RuntimeStrings, decodes.LoadBias, decodes.ProbeSites}},
		{"StartTrace --why --args", func(t *testing.T) int {
			tr, err := service.StartTrace(service.TraceRequest{PID: p.Pid, Include: []string{"main.*"}, Args: true, Why: true,
				StringSize: trace.DefaultStringSize, MaxOverhead: 0.05, Duration: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if res := tr.Run(context.Background(), trace.Handlers{}); res.Err != nil {
				t.Fatal(res.Err)
			}
			return len(tr.Started.Functions) + 8 // and the runtime's functions --why probes
		}, []decodes.Kind{decodes.ELF, decodes.RuntimeStrings, decodes.LoadBias, decodes.ProbeSites, decodes.DWARF}},
		{"Funcs with rates", func(t *testing.T) int {
			res, err := service.Funcs(service.FuncsRequest{PID: p.Pid, Include: []string{"main.*"}, Rates: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.RatesErr != nil || len(res.Rates) == 0 {
				t.Fatalf("rates: %v", res.RatesErr)
			}
			return len(res.Selection.Functions) + len(res.Selection.Untraceable)
		}, []decodes.Kind{decodes.ELF, decodes.ProbeSites}},
		{"Watch", func(t *testing.T) int {
			w, err := service.StartWatch(tracer, service.TopRequest{PID: p.Pid, MaxOverhead: 0.05, Reattach: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for i := 0; i < 3; i++ {
				w.Groups(false)
				time.Sleep(200 * time.Millisecond)
				if err := w.Refresh(); err != nil {
					t.Fatal(err)
				}
			}
			return -1 // the functions the groups are in, as they change
		}, []decodes.Kind{decodes.ELF, decodes.RuntimeStrings, decodes.LoadBias}},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			before := decodes.Now()
			functions := o.run(t)
			got := before.Since()
			t.Logf("%v", got)
			for k := decodes.ELF; k <= decodes.ProbeSites; k++ {
				limit := int64(1)
				if k == decodes.ProbeSites {
					if functions < 0 {
						continue // not known ahead
					}
					limit = int64(functions)
				}
				if n := got.Of(k); n > limit {
					t.Errorf("%s derived %d times, at most %d expected", k, n, limit)
				}
			}
			for _, k := range o.need {
				if got.Of(k) == 0 {
					t.Errorf("%s never counted: the operation needs it, so the counting is broken", k)
				}
			}
		})
	}
	targets.CheckNotStopped(t, p.Pid)
}
