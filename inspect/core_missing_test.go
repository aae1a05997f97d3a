package inspect_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// TestCoreTruncated cuts a core the kernel wrote short, as RLIMIT_CORE or
// a full disk does: inside the heap, among the g structures, gi decodes
// exactly the goroutines whose g structure the core still holds (those
// whose stack it lost listed cut short and marked so, the others as from
// the whole core), and core.Missing names the mapping cut off and where;
// cut at the allgs array, decoding is one error saying so.
func TestCoreTruncated(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	p := targets.StartToCrash(t, bin, "-park", "200", "-depth", "20")
	path := p.Crash(t)
	_, whole := decodeCore(t, path)
	var addrs []uint64
	byAddr := map[uint64]*inspect.Goroutine{}
	for _, g := range whole.Goroutines {
		addrs = append(addrs, g.Addr)
		byAddr[g.Addr] = g
	}
	cuts := targets.FindCoreCuts(t, path, bin, addrs)

	if err := os.Truncate(path, cuts.InGs); err != nil {
		t.Fatal(err)
	}
	c, snap := decodeCore(t, path)
	if len(snap.Goroutines) != len(cuts.Before) || len(snap.Goroutines) == 0 || len(snap.Goroutines) >= len(whole.Goroutines) {
		t.Errorf("cut at byte %d: %d goroutines decoded, want the %d of %d whose g structure lies before the cut",
			cuts.InGs, len(snap.Goroutines), len(cuts.Before), len(whole.Goroutines))
	}
	cutShort := 0
	for _, g := range snap.Goroutines {
		w := byAddr[g.Addr]
		switch {
		case !cuts.Before[g.Addr] || w == nil:
			t.Errorf("goroutine %d (g at %#x) decoded, its g structure past the cut", g.ID, g.Addr)
		case g.ID != w.ID || g.State != w.State:
			t.Errorf("goroutine %d [%s], want %d [%s]", g.ID, g.State, w.ID, w.State)
		case cuts.StackPast[g.Addr]:
			// Its stack lies past the cut: listed all the same, where
			// g.sched says it stopped, marked cut short as a live stop
			// marks a stack it could not read.
			cutShort++
			if !g.Truncated || !strings.Contains(g.Problem, "unreadable") || len(g.Frames) > 1 {
				t.Errorf("goroutine %d, its stack past the cut: truncated %v (%q), %d frames; want cut short, one frame at most", g.ID, g.Truncated, g.Problem, len(g.Frames))
			}
		case goroutineText(g) != goroutineText(w):
			t.Errorf("goroutine decoded from the truncated core:\n%s\nwant:\n%s", goroutineText(g), goroutineText(w))
		}
	}
	if cutShort == 0 {
		t.Errorf("no goroutine listed with its stack past the cut (%d expected)", len(cuts.StackPast))
	}
	if !warned(snap, "g structures unreadable") {
		t.Errorf("no warning of the g structures past the cut: %q", snap.Warnings)
	}
	missing := c.Missing()
	holdsCut := false
	for _, m := range missing {
		if !m.Truncated || m.CoreSize != cuts.InGs || m.Reads == 0 {
			t.Errorf("missing %+v, want cut off at byte %d", m, cuts.InGs)
		}
		holdsCut = holdsCut || m.Start <= cuts.At && cuts.At < m.End
		if want := "cut off: the core is truncated at byte " + strconv.FormatInt(cuts.InGs, 10); !strings.Contains(m.String(), want) {
			t.Errorf("missing memory %q does not say %q", m, want)
		}
	}
	if !holdsCut {
		t.Errorf("missing %v: not the heap mapping cut", missing)
	}
	t.Logf("cut at byte %d: %d of %d goroutines decoded, %d of them cut short; missing: %v",
		cuts.InGs, len(snap.Goroutines), len(whole.Goroutines), cutShort, missing)
	c.Close()

	if err := os.Truncate(path, cuts.AllGs); err != nil {
		t.Fatal(err)
	}
	c, err := core.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tgt, err := inspect.New(c.Process)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tgt.Decode(c.Threads, 0)
	if err == nil || !regexp.MustCompile(`allgs.*not in the core: mapping 0x[0-9a-f]+-0x[0-9a-f]+ \(.*\), cut off: the core is truncated at byte `+strconv.FormatInt(cuts.AllGs, 10)).MatchString(err.Error()) {
		t.Errorf("cut at the allgs array: %v, want an error naming it and the cut", err)
	}
}

// TestCoreFiltered has the kernel write cores of targets whose
// coredump_filter leaves anonymous private memory out (the Go heap, the
// runtime's variables): 0x0 (nothing but what the kernel always writes)
// and 0x36 (the executable's written data kept). Nothing can be
// decoded: opening or decoding is one error naming the mapping left out,
// and core.Missing lists it.
func TestCoreFiltered(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "psstates", targets.BuildOptions{})
	for _, filter := range []string{"0x0", "0x36"} {
		t.Run(filter, func(t *testing.T) {
			p := targets.StartToCrash(t, bin, "-park", "50")
			targets.SetCoredumpFilter(t, p.Pid, filter)
			path := p.Crash(t)
			c, err := core.Open(path, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tgt, err := inspect.New(c.Process)
			if err == nil {
				_, err = tgt.Decode(c.Threads, 0)
			}
			want := regexp.MustCompile(`not in the core: mapping 0x[0-9a-f]+-0x[0-9a-f]+ \(.*\), left out of the core \(coredump_filter\)$`)
			if err == nil || !want.MatchString(err.Error()) {
				t.Fatalf("decoding: %v, want an error naming the mapping left out", err)
			}
			missing := c.Missing()
			if len(missing) == 0 || missing[0].Truncated {
				t.Errorf("missing %v, want the mapping left out", missing)
			}
			t.Logf("%v; missing %v", err, missing)
		})
	}
}

// warned reports whether a warning of snap says what.
func warned(snap *inspect.Snapshot, what string) bool {
	for _, w := range snap.Warnings {
		if strings.Contains(w, what) {
			return true
		}
	}
	return false
}
