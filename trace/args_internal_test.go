package trace

import (
	"os"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestArgsFunctionBound traces more functions than arguments are captured
// for: the trace goes on without them, after a warning, except for a
// function a --where filter needs.
func TestArgsFunctionBound(t *testing.T) {
	requirePrivilegeInternal(t)
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

// requirePrivilegeInternal is requirePrivilege (trace_test.go) for the
// package's internal tests.
func requirePrivilegeInternal(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("GI_REQUIRE_PRIVILEGED") == "1" {
		t.Fatal("this test needs root (eBPF uprobes) and GI_REQUIRE_PRIVILEGED=1 forbids skipping")
	}
	t.Skip("needs root for eBPF uprobes; set GI_REQUIRE_PRIVILEGED=1 to make this a failure")
}
