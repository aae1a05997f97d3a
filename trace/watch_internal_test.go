package trace

import (
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// BenchmarkWatch measures what Run's watch costs gi: a check at every
// drain (the summed cost of the probes of the functions traced whole,
// one per-CPU counter, and the process's CPU-time clock), and the read
// of every function's hits it does when the sum is past the budget, with
// every function of hotcold it can trace (540 functions, 1,599 probes)
// traced whole under a budget.
func BenchmarkWatch(b *testing.B) {
	targets.RequirePrivilege(b, "eBPF uprobes")
	bin := targets.Build(b, "hotcold", targets.BuildOptions{})
	p := targets.Start(b, bin, "-light", "200ms")
	s, err := Open(Options{PID: p.Cmd.Process.Pid, MaxOverhead: 1, Args: false, Include: []Pattern{mustGlob(b, "*")}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := s.newWatch()
	if w == nil || !w.cpuKnown {
		b.Fatalf("no watch, or the process's CPU time unknown: %+v", w)
	}
	probes := 0
	for _, wl := range s.whole {
		probes += len(wl.idx)
	}
	b.Logf("%d functions, %d probes traced whole", len(s.Selection.Functions), probes)
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			w.check()
		}
	})
	b.Run("functions", func(b *testing.B) {
		ws, err := w.sample()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			s.wholeOverhead(ws)
		}
	})
}

func mustGlob(tb testing.TB, s string) Pattern {
	tb.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
