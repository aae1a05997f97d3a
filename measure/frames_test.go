package measure

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
)

// stack builds a goroutine from innermost-first function names; a name
// ending in " inlined" is an inlined frame, " elided" one the runtime hides.
func stack(names ...string) *inspect.Goroutine {
	g := &inspect.Goroutine{}
	for _, n := range names {
		f := inspect.Frame{Function: n}
		if fn, ok := strings.CutSuffix(n, " inlined"); ok {
			f.Function, f.Inlined = fn, true
		}
		if fn, ok := strings.CutSuffix(n, " elided"); ok {
			f.Function, f.Elided = fn, true
		}
		g.Frames = append(g.Frames, f)
	}
	return g
}

func functions(fs []inspect.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Function
	}
	return out
}

// notRuntime stands for trace.Select's refusal of runtime internals.
func notRuntime(fn string) string {
	if strings.HasPrefix(fn, "runtime.") {
		return "runtime internals are not traced"
	}
	return ""
}

func TestMeasuredFrames(t *testing.T) {
	httpMain := stack("runtime.gopark elided", "runtime.netpollblock elided", "internal/poll.runtime_pollWait",
		"internal/poll.(*pollDesc).wait", "internal/poll.(*pollDesc).waitRead inlined", "internal/poll.(*FD).Accept",
		"net.(*netFD).accept", "net.(*TCPListener).accept", "net.(*TCPListener).Accept",
		"net/http.(*Server).Serve", "net/http.ListenAndServe inlined", "main.main", "runtime.main elided")
	sleeper := stack("runtime.gopark elided", "time.Sleep", "main.traceC", "main.worker", "runtime.goexit elided")
	library := stack("runtime.gopark elided", "internal/poll.runtime_pollWait", "internal/poll.(*pollDesc).wait",
		"internal/poll.(*FD).Read", "net.(*netFD).Read", "net.(*conn).Read", "bufio.(*Reader).fill",
		"net/http.(*conn).serve", "runtime.goexit elided")
	inlined := stack("runtime.gopark elided", "runtime.chanrecv elided", "runtime.chanrecv1", "main.waitOn inlined", "main.withInlined", "main.main.func3")
	module := stack("sync.runtime_SemacquireMutex", "sync.(*Mutex).lockSlow", "github.com/acme/srvlib/pool.(*P).Get",
		"github.com/acme/srv/internal/db.(*Store).Query", "github.com/acme/srv/api.handle")
	onlyRuntime := stack("runtime.gopark", "runtime.bgsweep", "runtime.gcenable.gowrap1")

	for _, c := range []struct {
		name      string
		g         *inspect.Goroutine
		module    string
		traceable func(string) string
		depth     int
		want      []string
	}{
		{"server main, not net.(*netFD).accept", httpMain, "example.com/srv", notRuntime, 1, []string{"main.main"}},
		{"server main, depth 3: nothing above main.main", httpMain, "example.com/srv", notRuntime, 3, []string{"main.main"}},
		{"asleep in time.Sleep: its caller", sleeper, "", notRuntime, 1, []string{"main.traceC"}},
		{"asleep, depth 2", sleeper, "", notRuntime, 2, []string{"main.traceC", "main.worker"}},
		{"no own code: innermost traceable", library, "example.com/srv", notRuntime, 1, []string{"net.(*netFD).Read"}},
		{"no own code, depth 2", library, "example.com/srv", notRuntime, 2, []string{"net.(*netFD).Read", "net.(*conn).Read"}},
		{"inlined call: its physical function", inlined, "", notRuntime, 1, []string{"main.withInlined"}},
		{"main module by path, not a similar prefix", module, "github.com/acme/srv", notRuntime, 1, []string{"github.com/acme/srv/internal/db.(*Store).Query"}},
		{"untraceable own frame: the next own one", module, "github.com/acme/srv", func(fn string) string {
			if strings.Contains(fn, "Store") {
				return "no RET"
			}
			return ""
		}, 2,
			[]string{"github.com/acme/srv/api.handle"}},
		{"nothing traceable", onlyRuntime, "", notRuntime, 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := functions(Program{MainModule: c.module, Untraceable: c.traceable}.MeasuredFrames(c.g, c.depth))
			if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("MeasuredFrames = %q, want %q", got, c.want)
			}
		})
	}
}

func TestOwn(t *testing.T) {
	p := Program{MainModule: "github.com/acme/srv"}
	for fn, want := range map[string]bool{
		"main.main":                              true,
		"main.(*server).handle.func1":            true,
		"github.com/acme/srv.Run":                true,
		"github.com/acme/srv/api.(*H).Serve":     true,
		"github.com/acme/srvlib.F":               false,
		"github.com/acme/other/srv.F":            false,
		"net/http.(*conn).serve":                 false,
		"github.com/acme/srv/vendor/x.(*T).M-fm": true,
	} {
		if got := p.Own(fn); got != want {
			t.Errorf("Own(%q) = %v, want %v", fn, got, want)
		}
	}
	if (Program{MainModule: "command-line-arguments"}).Own("command-line-arguments.F") {
		t.Error("command-line-arguments is not a module path to match by prefix")
	}
}

func TestGroup(t *testing.T) {
	mk := func(id uint64, state string, wait time.Duration, names ...string) *inspect.Goroutine {
		g := stack(names...)
		g.ID, g.State, g.Wait, g.WaitKnown = id, state, wait, wait > 0
		return g
	}
	gs := []*inspect.Goroutine{
		mk(1, "sleep", 2*time.Second, "runtime.gopark elided", "time.Sleep", "main.traceC", "main.worker"),
		mk(2, "sleep", 5*time.Second, "runtime.gopark elided", "time.Sleep", "main.traceC", "main.other"),
		mk(3, "sync.Mutex.Lock", 0, "sync.runtime_SemacquireMutex", "main.traceC", "main.worker"),
		mk(4, "chan receive", 0, "runtime.gopark elided", "runtime.chanrecv1", "runtime.bgsweep"),
		{ID: 5, State: "running", System: true, Frames: stack("runtime.gcBgMarkWorker").Frames},
	}
	// Each sleeper's own text differs ("wakes in 3.0s", "wakes in 1.0s"): the
	// group still shares the sleep, with the soonest wake-up.
	gs[0].WaitingOn = []inspect.WaitObject{{Kind: "timer", WakeIn: int64(3 * time.Second)}}
	gs[1].WaitingOn = []inspect.WaitObject{{Kind: "timer", WakeIn: int64(time.Second)}}
	got := Program{Untraceable: notRuntime}.Group(gs)
	if len(got) != 3 {
		t.Fatalf("%d groups, want 3 (sleep in main.traceC, Mutex in main.traceC, the untraceable one): %+v", len(got), got)
	}
	if g := got[0]; g.State != "sleep" || g.Function != "main.traceC" || len(g.Goroutines) != 2 || g.MaxWait != 5*time.Second || g.WaitingOn != "sleep, wakes in 1.0s" {
		t.Errorf("first group: %+v", g)
	}
	if g := got[1]; g.State != "sync.Mutex.Lock" || g.Function != "main.traceC" || len(g.Goroutines) != 1 {
		t.Errorf("second group: %+v", g)
	}
	if g := got[2]; g.Function != "" || g.At.Function == "" || len(g.Goroutines) != 1 {
		t.Errorf("untraceable group: %+v", g)
	}
}

// TestGroupByObject folds goroutines by the object they wait on, whatever
// their function, and keeps the others by state and function; a group by
// function whose members wait on different objects says how many.
func TestGroupByObject(t *testing.T) {
	ch := func(addr uint64) []inspect.WaitObject {
		return []inspect.WaitObject{{Kind: "chan", Addr: addr, Chan: &inspect.ChanState{Receivers: 2}}}
	}
	mk := func(id uint64, fn string, waits []inspect.WaitObject) *inspect.Goroutine {
		g := stack("runtime.gopark elided", "runtime.chanrecv1", fn)
		g.ID, g.State, g.WaitingOn = id, "chan receive", waits
		return g
	}
	gs := []*inspect.Goroutine{
		mk(1, "main.a", ch(0xc000010000)),
		mk(2, "main.b", ch(0xc000010000)),
		mk(3, "main.a", ch(0xc000020000)),
		mk(4, "main.c", nil),
	}
	p := Program{Untraceable: notRuntime}
	byObj := p.GroupByObject(gs)
	if len(byObj) != 3 || len(byObj[0].Goroutines) != 2 || byObj[0].Goroutines[1].ID != 2 ||
		!strings.HasPrefix(byObj[0].WaitingOn, "chan 0xc000010000") || byObj[2].Function != "main.c" || byObj[2].WaitingOn != "" {
		t.Errorf("by object: %+v", byObj)
	}
	byFn := p.Group(gs)
	if len(byFn) != 3 || byFn[0].Function != "main.a" || byFn[0].WaitingOn != "2 objects" {
		t.Errorf("by function: %+v", byFn)
	}
}
