package measure

import (
	"context"
	"testing"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
)

// TestMeasureReadsTheBinaryOnce: gi ps --trace opens the process once. The
// measurement traces, follows the goroutines into new functions and
// attaches them without parsing the executable again: the trace, the
// traceability of frames and what is added share the binary inspect read
// and one decoding of its probe sites.
func TestMeasureReadsTheBinaryOnce(t *testing.T) {
	targets.RequirePrivilege(t, "ptrace, eBPF")
	p := targets.Start(t, targets.Build(t, "fanout", targets.BuildOptions{}), "-clients", "4")
	tr := ptrace.NewTracer()
	defer tr.Close()
	tgt, err := inspect.Open(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	first, err := tgt.Snapshot(tr)
	if err != nil {
		t.Fatal(err)
	}
	parses := elfbin.Parses()
	res, err := Run(context.Background(), tgt, tr, first, Options{Duration: time.Second, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := elfbin.Parses() - parses; n != 0 {
		t.Errorf("gi ps --trace parsed the executable %d more times after inspect opened it", n)
	}
	if res.Window.Snapshots == 0 || len(res.ByGoid) == 0 {
		t.Errorf("the measurement followed nothing: %+v", res.Window)
	}
	targets.CheckNotStopped(t, p.Pid)
}
