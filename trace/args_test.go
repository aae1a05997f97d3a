package trace_test

import (
	"debug/buildinfo"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/funcargs"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
	"github.com/gi-debug/gi/trace"
)

// TestArgsMatchTarget traces every function of the argfuncs target, built
// by each supported release (default and PIE, and with external linking),
// and compares the arguments
// and results gi captured with what the target printed it passed and got
// back, call by call.
func TestArgsMatchTarget(t *testing.T) {
	requirePrivilege(t)
	builds := []targets.BuildOptions{{CgoExternal: true}}
	for _, tc := range []string{"local", "go1.20.14", "go1.22.12", "go1.24.13", "go1.27.4"} {
		for _, pie := range []bool{false, true} {
			builds = append(builds, targets.BuildOptions{Toolchain: tc, PIE: pie})
		}
	}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			checkArgs(t, targets.Build(t, "argfuncs", opts))
		})
	}
	// The programs load while the arguments are planned, with a plan
	// table sized by a guess; with more plans than it holds, they are
	// loaded again: the same values must come out.
	t.Run("plans-beyond-the-loaded-table", func(t *testing.T) {
		defer trace.SetSpeculativePlans(1)()
		checkArgs(t, targets.Build(t, "argfuncs", targets.BuildOptions{}))
	})
}

// targetCall is one call as argfuncs printed it.
type targetCall struct {
	fn            string
	args, results []string
}

func checkArgs(t *testing.T, bin string) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	goMinor, _ := runtimelayout.GoMinor(info.GoVersion)
	p := targets.Start(t, bin, "-stdin")
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, targets.ArgFuncs...), Args: true})
	const rounds = 3
	for range rounds {
		if _, err := p.Do("round", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	res := stop()
	targets.CheckNotStopped(t, p.Pid)
	if res.Lost != 0 || res.Err != nil || res.UnreadFloats != 0 {
		t.Fatalf("lost %d events, %d calls' float registers unread, run error %v", res.Lost, res.UnreadFloats, res.Err)
	}

	var want []targetCall
	for _, line := range p.Lines() {
		kind, rest, _ := strings.Cut(line, " ")
		fn, vals, _ := strings.Cut(rest, " ")
		switch kind {
		case "CALL":
			want = append(want, targetCall{fn: fn, args: strings.Split(vals, " | ")})
		case "RET":
			if len(want) == 0 || want[len(want)-1].fn != fn {
				t.Fatalf("target printed RET %s without its CALL", fn)
			}
			if vals != "" { // a function without results prints none
				want[len(want)-1].results = strings.Split(vals, " | ")
			}
		}
	}
	if len(want) != rounds*(len(targets.ArgFuncs)+1) {
		t.Fatalf("target printed %d calls, want %d", len(want), rounds*(len(targets.ArgFuncs)+1))
	}
	rec.mu.Lock()
	calls := append([]call(nil), rec.calls...)
	rec.mu.Unlock()
	if len(calls) != len(want) {
		t.Fatalf("gi saw %d calls, the target made %d", len(calls), len(want))
	}
	sym := s.Symbols()
	for i, w := range want {
		c := calls[i].c
		if c.Func.Name != w.fn {
			t.Fatalf("call %d: gi saw %s, the target called %s", i, c.Func.Name, w.fn)
		}
		if c.Unwound || c.ReturnSite == 0 {
			t.Errorf("call %d of %s: not returned (unwound %v)", i, w.fn, c.Unwound)
		}
		args := sym.Values(uint32(p.Pid), c.Func.Args, c.Args)
		results := sym.Values(uint32(p.Pid), c.Func.Results, c.Results)
		if w.fn == "main.Point.Unnamed" && goMinor < 21 {
			// Go 1.20 gives unnamed parameters no DWARF entry: gi sees k
			// alone, and cannot check where the ABI puts it without the
			// receiver before it; it must say so, not guess.
			if len(args) != 1 || args[0].Name != "k" || args[0].Value != "?" {
				t.Errorf("call %d %s args: %v, want k=? (Go 1.20 DWARF lacks the unnamed receiver)", i, w.fn, args)
			}
			compareValues(t, fmt.Sprintf("call %d %s results", i, w.fn), results, w.results)
			continue
		}
		if w.fn == "main.leafFloat" && len(args) == 1 && strings.Contains(strings.Join(c.Func.Args.Unknown(), ";"), "which the probed instruction") {
			// A leaf whose first instruction (the probe's) overwrites its
			// argument's register before the signal can read it: gi
			// must say so, not show the sum.
			if args[0].Value != "?" {
				t.Errorf("call %d %s: x = %s, want ? (overwritten by the probed instruction)", i, w.fn, args[0].Value)
			}
			compareValues(t, fmt.Sprintf("call %d %s results", i, w.fn), results, w.results)
			continue
		}
		compareValues(t, fmt.Sprintf("call %d %s args", i, w.fn), args, w.args)
		compareValues(t, fmt.Sprintf("call %d %s results", i, w.fn), results, w.results)
	}
}

var elided = regexp.MustCompile(`^(\[\][^{]+)\{\.\.\.\} \(len (\d+), cap \d+\)$`)

// compareValues compares gi's values with the target's %#v of them.
func compareValues(t *testing.T, what string, got []funcargs.Value, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: gi has %d values %v, the target %d %q", what, len(got), got, len(want), want)
		return
	}
	for i, g := range got {
		w := want[i]
		switch {
		case g.Value == "nil":
			if w != "<nil>" {
				t.Errorf("%s: %s = nil, target %s", what, g.Name, w)
			}
		case elided.MatchString(g.Value):
			// Elements that are not scalars: gi shows the length only.
			m := elided.FindStringSubmatch(g.Value)
			n := strings.Count(w, ", ") + 1
			if w == m[1]+"{}" {
				n = 0
			}
			if !strings.HasPrefix(w, m[1]+"{") || fmt.Sprint(n) != m[2] {
				t.Errorf("%s: %s = %s, target %s", what, g.Name, g.Value, w)
			}
		default:
			if g.Value != w {
				t.Errorf("%s: %s = %s, target %s", what, g.Name, g.Value, w)
			}
		}
	}
}

// TestFloatsSignalBlocked traces main.floats while the target calls it on
// a thread that blocks SIGURG, the signal through which gi reads float
// registers: every call must still arrive, in order and returned, with
// its floats shown as unknown and counted, and the target must go on.
func TestFloatsSignalBlocked(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "argfuncs", targets.BuildOptions{}), "-stdin")
	s, rec, stop := startTrace(t, trace.Options{PID: p.Pid, Include: mustPatterns(t, "main.floats"), Args: true})
	if _, err := p.Do("blocked", time.Minute); err != nil {
		t.Fatal(err)
	}
	// A round after it, on any thread: read as usual.
	if _, err := p.Do("round", time.Minute); err != nil {
		t.Fatal(err)
	}
	res := stop()
	targets.CheckNotStopped(t, p.Pid)
	if res.Lost != 0 || res.Err != nil {
		t.Fatalf("lost %d events, run error %v", res.Lost, res.Err)
	}
	// Each probe on the blocked thread releases the call held before it
	// without its floats; the last one goes when the thread unblocks the
	// signal, which then finds it elsewhere than after the probe.
	if res.UnreadFloats != 4 {
		t.Errorf("%d calls reported with floats unread, want 4 (2 entries, 2 returns)", res.UnreadFloats)
	}
	rec.mu.Lock()
	calls := append([]call(nil), rec.calls...)
	rec.mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("gi saw %d calls of main.floats, want 3", len(calls))
	}
	// The target's own values of the last call, from what it printed.
	var printed []string
	for _, line := range p.Lines() {
		if v, ok := strings.CutPrefix(line, "CALL main.floats "); ok {
			printed = strings.Split(v, " | ")
		} else if v, ok := strings.CutPrefix(line, "RET main.floats "); ok {
			printed = append(printed, strings.Split(v, " | ")...)
		}
	}
	sym := s.Symbols()
	for i, c := range calls {
		args := sym.Values(uint32(p.Pid), c.c.Func.Args, c.c.Args)
		results := sym.Values(uint32(p.Pid), c.c.Func.Results, c.c.Results)
		if c.c.ReturnSite == 0 || len(args) != 2 || len(results) != 2 {
			t.Fatalf("call %d: returned at %#x, args %v, results %v", i, c.c.ReturnSite, args, results)
		}
		want := []string{"?", "?", "?", "?"}
		if i == 2 {
			want = printed
		}
		got := []string{args[0].Value, args[1].Value, results[0].Value, results[1].Value}
		if !slices.Equal(got, want) {
			t.Errorf("call %d: a, b, results = %q, want %q", i, got, want)
		}
	}
}
