package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/measure"
	"github.com/gi-debug/gi/proc"
)

// TestPsDocument checks the gi ps --json document built from a snapshot and
// a trace window: its keys, and the latency placed on the right goroutine.
func TestPsDocument(t *testing.T) {
	g1 := &inspect.Goroutine{ID: 1, Status: "waiting", WaitReason: "chan receive", Wait: 2 * time.Second, WaitKnown: true,
		Frames: []inspect.Frame{{Function: "runtime.gopark", Elided: true}, {Function: "main.main", File: "/m.go", Line: 9, PC: 0x10}}}
	g2 := &inspect.Goroutine{ID: 2, Status: "running", Labels: map[string]string{"k": "v"}, ThreadID: 3, HostThreadID: 4003,
		CreatedBy: &inspect.Frame{Function: "main.main", File: "/m.go", Line: 5}, ParentID: 1,
		Frames: []inspect.Frame{{Function: "main.spin", File: "/m.go", Line: 20}}}
	snap := &inspect.Snapshot{PID: 42, NSPid: 1, GoVersion: "go1.27.4", Pause: time.Millisecond, Goroutines: []*inspect.Goroutine{g1, g2}}
	res := &measure.Result{Window: measure.Window{StartNS: 1, EndNS: 2, Functions: []string{"main.spin"}, Probes: 3},
		ByGoid: map[uint64]*measure.Latency{2: {Function: "main.spin", File: "/m.go", Line: 20, Calls: 5, Stuck: true}}}

	var buf bytes.Buffer
	if err := Write(&buf, NewPs(snap, snap.Goroutines, false, res)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pid", "ns_pid", "go_version", "pause_ns", "trace_window", "goroutines"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("document lacks %q:\n%s", k, buf.String())
		}
	}
	gs := doc["goroutines"].([]any)
	first, second := gs[0].(map[string]any), gs[1].(map[string]any)
	if _, ok := first["trace"]; ok {
		t.Errorf("goroutine 1 has a trace it was not measured for")
	}
	if len(first["frames"].([]any)) != 1 || first["function"] != "main.main" || first["wait_ns"].(float64) != 2e9 {
		t.Errorf("goroutine 1: %v", first)
	}
	tr, _ := second["trace"].(map[string]any)
	if tr == nil || tr["function"] != "main.spin" || tr["calls"].(float64) != 5 || tr["stuck"] != true || second["host_thread_id"].(float64) != 4003 {
		t.Errorf("goroutine 2: %v", second)
	}
	if cb := second["created_by"].(map[string]any); cb["goid"].(float64) != 1 {
		t.Errorf("goroutine 2 created by %v", cb)
	}

	// Without a trace, no trace keys at all.
	buf.Reset()
	Write(&buf, NewPs(snap, snap.Goroutines, true, nil))
	if strings.Contains(buf.String(), `"trace`) || !strings.Contains(buf.String(), "runtime.gopark") {
		t.Errorf("untraced document with all frames:\n%s", buf.String())
	}

	groups := inspect.GroupGoroutines(snap.Goroutines, false)
	buf.Reset()
	Write(&buf, NewPsGroups(snap, groups, false, res))
	var gdoc PsGroups
	if err := json.Unmarshal(buf.Bytes(), &gdoc); err != nil || len(gdoc.Groups) != 2 || gdoc.TraceWindow == nil {
		t.Fatalf("groups document %v:\n%s", err, buf.String())
	}
	for _, g := range gdoc.Groups {
		if g.Goids[0] == 2 && (g.Goroutine.Trace == nil || !g.Goroutine.Trace.Stuck || g.Stuck != 1) {
			t.Errorf("group of goroutine 2: %+v", g)
		}
	}
}

// TestWritePsStreams checks that the streamed gi ps document is byte for
// byte what encoding/json's indenting encoder writes, with goroutines,
// waits, latencies and characters JSON escapes, and with none.
func TestWritePsStreams(t *testing.T) {
	n := 3
	g := func(i int) *inspect.Goroutine {
		return &inspect.Goroutine{ID: uint64(i), Status: "waiting", WaitReason: "chan receive", Addr: 0xc000100000 + uint64(i), SP: 0xc000200000 + uint64(i),
			WaitSince: int64(i) * 1000, Transitions: uint8(250 + i),
			Labels:    map[string]string{"k<&>": "v\"\n", "b\u2028\x01\xff": "\t\\é"},
			Frames:    []inspect.Frame{{Function: "main.f", File: "/a b/m.go", Line: i}, {Function: "main.g", Line: 2, Inlined: true}},
			Truncated: i == 2, Problem: map[bool]string{true: "stack unreadable"}[i == 3],
			ThreadID: i * 10, HostThreadID: i * 100, LockedToThread: i == 1, ParentID: 1,
			Leaked: i == 2, LeakedWhy: map[bool]string{true: "no goroutine that can run reaches chan 0xc000010000"}[i == 2],
			CreatedBy: map[bool]*inspect.Frame{true: {Function: "main.main", File: "m.go", Line: 9}}[i != 1],
			WaitingOn: []inspect.WaitObject{
				{Kind: "chan", Addr: 0xc000010000, Type: "chan main.job", Chan: &inspect.ChanState{Cap: 2, Receivers: i, Closed: true}, Unreachable: i == 2},
				{Kind: "mutex", Addr: 0x7f0000, Name: "main.mu", Sync: &inspect.SyncState{Locked: true, Waiters: 3}},
				{Kind: "rwmutex", Dir: "read", Sync: &inspect.SyncState{Readers: -2}},
				{Kind: "waitgroup", Sync: &inspect.SyncState{Counter: 4}},
				{Kind: "fd", FD: &proc.FD{FD: 7, Local: "127.0.0.1:80", Remote: "10.0.0.1:5", Path: "/x"}, Syscall: "read"},
				{Kind: "timer", WakeIn: 5},
				{Kind: "cond", Unknown: "no layout"},
			}}
	}
	for _, count := range []int{0, 1, n} {
		snap := &inspect.Snapshot{PID: 42, NSPid: 1, GoVersion: "go1.27.4", Warnings: []string{"w"}}
		for i := 1; i <= count; i++ {
			snap.Goroutines = append(snap.Goroutines, g(i))
		}
		doc := NewPs(snap, snap.Goroutines, false, &measure.Result{ByGoid: map[uint64]*measure.Latency{1: {Function: "main.f", Calls: 2, Stuck: true, InCallNS: 7, TracedNS: 8, Dominant: &measure.Part{Part: "sync.Mutex.Lock", Share: 0.8333, MeanNS: 5, P99NS: 9}},
			2: {Function: "main.g", Why: measure.WhyAppeared},
			3: {Function: "main.h", Calls: 4, Sampled: true, CallsEstimated: 40, P50NS: 3}},
			Window: measure.Window{Sampled: []string{"main.h"}, SampledShare: 0.1, Warnings: []string{"over the budget"}}})
		var want, got bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		if err := WritePs(&got, doc); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d goroutines: streamed\n%s\nencoder\n%s", count, got.String(), want.String())
		}
	}
}

// FuzzAppendString checks the hand-written string quoting against
// encoding/json on any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>\"\\\n\t\x00\x1f", "é\u2028\u2029", "\xff\xfe", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, encoding/json %s", s, got, want)
		}
	})
}

// TestObjectsGraphEmpty: a snapshot with nothing waited on has a graph of
// no nodes and no edges, [] in JSON (the schema wants arrays).
func TestObjectsGraphEmpty(t *testing.T) {
	b, err := json.Marshal(NewObjects(&inspect.Snapshot{}, []*inspect.Goroutine{{ID: 1}}).Graph)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"nodes":[],"edges":[]}` {
		t.Errorf("empty graph %s", b)
	}
}
