package service_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/service"
)

// TestPsCheck: the parts of a request that do not go together are refused
// before any process is touched, each with one line naming the flags.
func TestPsCheck(t *testing.T) {
	cases := []struct {
		req  service.PsRequest
		want string
	}{
		{service.PsRequest{PID: 1, Why: true}, "--why splits"},
		{service.PsRequest{PID: 1, Core: "core.1"}, "not both"},
		{service.PsRequest{Core: "core.1", Trace: time.Second, TraceDepth: 1}, "--trace measures a live process"},
		{service.PsRequest{PID: 1, Binary: "./server"}, "--binary goes with a core file"},
		{service.PsRequest{Core: "core.1", CoreFile: "out"}, "a core file already"},
		{service.PsRequest{PID: 1, CoreAll: true}, "--core-all goes with --core FILE"},
		{service.PsRequest{PID: 1, Leaks: true, Trace: time.Second, TraceDepth: 1}, "one at a time"},
		{service.PsRequest{PID: 1, Trace: time.Second}, "--trace-depth must be at least 1"},
	}
	for _, c := range cases {
		err := c.req.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.req, err, c.want)
		}
		if _, err := service.Ps(context.Background(), nil, c.req); err == nil {
			t.Errorf("%+v: Ps ran a request Check refuses", c.req)
		}
	}
	for _, ok := range []service.PsRequest{{PID: 1}, {Core: "core.1", Binary: "x", Leaks: true}, {PID: 1, Trace: time.Second, TraceDepth: 2, Why: true}, {PID: 1, CoreFile: "c", CoreAll: true, Leaks: true}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	if _, err := service.Ps(context.Background(), nil, service.PsRequest{}); err == nil {
		t.Error("a request for no process ran")
	}
}

// TestPsLiveAndCore drives gi ps's operation without the command line: a
// live process's goroutines with its leaks judged and a core written in
// the same stop, then that core read back through the same call. The
// target says which of its goroutines leaked; the core's goroutines are
// the live snapshot's.
func TestPsLiveAndCore(t *testing.T) {
	targets.RequirePrivilege(t, "stopping and reading another process")
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2")
	gt := targets.ReadLeakyTruth(t, p)
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	corePath := filepath.Join(t.TempDir(), "core")
	var written *inspect.CoreWritten
	live, err := service.Ps(context.Background(), tracer, service.PsRequest{PID: p.Cmd.Process.Pid, Waits: true, Leaks: true, CoreFile: corePath,
		CoreWritten: func(w *inspect.CoreWritten, _ time.Duration) { written = w }})
	if err != nil {
		t.Fatal(err)
	}
	targets.CheckNotStopped(t, p.Cmd.Process.Pid)
	if written == nil || written.Path != corePath {
		t.Fatalf("core written: %+v", written)
	}
	if live.PID != p.Cmd.Process.Pid || live.Leaks == nil || live.Leaks.Capture == nil || live.Leaks.Undecided != "" {
		t.Fatalf("pid %d, leaks %+v", live.PID, live.Leaks)
	}
	byID := map[uint64]*inspect.Goroutine{}
	for _, g := range live.Snapshot.Goroutines {
		byID[g.ID] = g
	}
	for id := range gt.Leaked {
		if g := byID[id]; g == nil || !g.Leaked {
			t.Errorf("goroutine %d leaked (the target says), not marked: %+v", id, g)
		}
	}
	for id := range gt.Kept {
		if g := byID[id]; g == nil || g.Leaked {
			t.Errorf("goroutine %d kept (the target says), marked leaked or missing: %+v", id, g)
		}
	}

	fromCore, err := service.Ps(context.Background(), nil, service.PsRequest{Core: corePath})
	if err != nil {
		t.Fatal(err)
	}
	if fromCore.PID != live.PID || len(fromCore.Missing) != 0 || !strings.HasPrefix(fromCore.Snapshot.Origin, "core "+corePath) {
		t.Errorf("core: pid %d (live %d), missing %v, origin %q", fromCore.PID, live.PID, fromCore.Missing, fromCore.Snapshot.Origin)
	}
	ids := func(gs []*inspect.Goroutine) []uint64 {
		var out []uint64
		for _, g := range gs {
			out = append(out, g.ID)
		}
		slices.Sort(out)
		return out
	}
	if a, b := ids(live.Snapshot.Goroutines), ids(fromCore.Snapshot.Goroutines); !slices.Equal(a, b) {
		t.Errorf("the core's goroutines %v, the live snapshot's %v", b, a)
	}
	if _, err := os.Stat(corePath); err != nil {
		t.Error(err)
	}
}
