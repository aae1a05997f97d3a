package trace

import (
	"strings"
	"testing"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/internal/targets"
)

// TestArgsFunctionBound traces more functions than arguments are captured
// for: the trace goes on without them, after a warning, except for a
// function a --where filter needs.
func TestArgsFunctionBound(t *testing.T) {
	targets.RequirePrivilege(t, "eBPF uprobes")
	defer func(n int) { maxArgFunctions = n }(maxArgFunctions)
	maxArgFunctions = 3
	p := targets.Start(t, targets.Build(t, "argfuncs", targets.BuildOptions{}), "-stdin")
	include := []Pattern{}
	for _, name := range targets.ArgFuncs {
		pat, err := ParsePattern(name)
		if err != nil {
			t.Fatal(err)
		}
		include = append(include, pat)
	}
	where, err := ParseWhere("main.query: id == 42")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{PID: p.Pid, Include: include, Args: true, Where: []Where{where}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Warnings) == 0 || !strings.Contains(strings.Join(s.Warnings, "\n"), "arguments are captured for at most 3 functions") {
		t.Errorf("warnings %q", s.Warnings)
	}
	for _, fn := range s.Selection.Functions {
		if (fn.Args != nil) != (fn.Name == "main.query") {
			t.Errorf("%s: arguments captured: %v", fn.Name, fn.Args != nil)
		}
	}
}

// TestCaptureBoundsMatchProbes checks that funcargs plans within the
// bounds the probe programs enforce.
func TestCaptureBoundsMatchProbes(t *testing.T) {
	if funcargs.MaxOps != bpf.PlanOps || funcargs.MaxPayload != bpf.PlanPayloadMax || funcargs.MaxDeref != bpf.DerefMax {
		t.Errorf("funcargs bounds %d ops, %d bytes, %d per read; the probes' %d, %d, %d",
			funcargs.MaxOps, funcargs.MaxPayload, funcargs.MaxDeref, bpf.PlanOps, bpf.PlanPayloadMax, bpf.DerefMax)
	}
}
