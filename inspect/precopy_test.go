package inspect_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/targets"
)

// TestStacksCopiedBeforeStop checks the stacks a snapshot copies before
// its stop. Goroutines of the reparker target wait in main.parkA; between
// the copy and the stop they are woken and park again in main.parkB, at the
// same sp and pc and in the same wait, under other callers. The snapshot
// must show them where the target's own dump, taken after they parked
// again, shows them: had gi kept the stacks it copied before, it would show
// main.parkA. A snapshot of the same goroutines left alone must take their
// stacks from the copy; goroutines started between the copy and the stop
// must be listed, their stacks copied in the stop.
func TestStacksCopiedBeforeStop(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range targets.Toolchains() {
		t.Run(tc, func(t *testing.T) {
			const hoppers = 1000
			bin := targets.Build(t, "reparker", targets.BuildOptions{Toolchain: tc})
			p := targets.Start(t, bin, "-n", "1000")
			tgt, err := inspect.Open(p.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()

			snap, err := tgt.Snapshot(sharedTracer())
			if err != nil {
				t.Fatal(err)
			}
			if snap.StacksBeforeStop < hoppers {
				t.Errorf("left alone: %d stacks taken from the copy made before the stop, want at least %d", snap.StacksBeforeStop, hoppers)
			}
			checkHoppers(t, snap, "main.parkA", nil, hoppers)

			for _, step := range []struct{ command, in string }{{"spawn 500", "main.parkA"}, {"hop", "main.parkB"}, {"hop", "main.parkA"}} {
				var dump string
				copied := 0
				inspect.SetBeforeStop(tgt, func(n int) {
					copied = n
					fields, err := p.Do(step.command, time.Minute)
					if err != nil {
						t.Error(err)
					}
					dump = fields["dump"]
				})
				snap, err := tgt.Snapshot(sharedTracer())
				inspect.SetBeforeStop(tgt, nil)
				if err != nil {
					t.Fatal(err)
				}
				targets.CheckNotStopped(t, p.Pid)
				if copied < hoppers {
					t.Fatalf("the copy before the stop held %d stacks, want at least %d: the test would prove nothing", copied, hoppers)
				}
				raw, err := os.ReadFile(dump)
				if err != nil {
					t.Fatal(err)
				}
				os.Remove(dump)
				checkHoppers(t, snap, step.in, raw, hoppers+500)
				t.Logf("%s: %d stacks copied before the stop, %d kept, pause %v", step.command, copied, snap.StacksBeforeStop, snap.Pause)
			}
		})
	}
}

// checkHoppers checks that snap lists want hoppers, each blocked in fn
// and, given the target's own dump, with the dump's frames.
func checkHoppers(t *testing.T, snap *inspect.Snapshot, fn string, dump []byte, want int) {
	t.Helper()
	got := parsedDump(t, snap)
	byID := map[int64]targets.Goroutine{}
	hoppers := 0
	for _, g := range got {
		keys := frameKeys(g.Frames)
		if !strings.Contains(strings.Join(keys, " "), "main.hopper") {
			continue
		}
		hoppers++
		byID[g.ID] = g
		first := slices.IndexFunc(keys, func(k string) bool { return strings.HasPrefix(k, "main.") })
		if g.State != "chan receive" || first < 0 || !strings.HasPrefix(keys[first], fn+" ") {
			t.Errorf("goroutine %d [%s] is not blocked in %s:\n\t%s", g.ID, g.State, fn, strings.Join(keys, "\n\t"))
		}
	}
	if hoppers != want {
		t.Errorf("gi lists %d hoppers, want %d", hoppers, want)
	}
	if dump == nil {
		return
	}
	runtime, err := targets.ParseDump(bytes.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, w := range runtime {
		wf := frameKeys(w.Frames)
		if !strings.Contains(strings.Join(wf, " "), "main.hopper") {
			continue
		}
		g, ok := byID[w.ID]
		if !ok {
			t.Errorf("goroutine %d is in the target's dump but not in gi's", w.ID)
			continue
		}
		compared++
		if gf := frameKeys(g.Frames); strings.Join(gf, "\n") != strings.Join(wf, "\n") {
			t.Errorf("goroutine %d frames differ:\ngi:\n\t%s\nruntime:\n\t%s", w.ID, strings.Join(gf, "\n\t"), strings.Join(wf, "\n\t"))
		}
	}
	if compared != hoppers {
		t.Errorf("compared %d hoppers with the target's dump, gi lists %d", compared, hoppers)
	}
}
