package recorder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/report"
)

// TestParseCondition: each form of the grammar parses; anything else is
// one line naming the --when, and conditions on traced calls are not
// yet judged.
func TestParseCondition(t *testing.T) {
	for _, ok := range []string{"goroutines > 50000", "goroutines>=10", "goroutines +20%/1m", "goroutines + 500/30s",
		"count(sync.Mutex.Lock) > 100", "count( chan receive ) >= 3", "count(select (no cases)) > 1", "blocked > 30s", "memory > 90%", "memory >= 99.5%",
		"goroutines> 10", "goroutines >10", "blocked> 30s", "memory>90%", "goroutines+ 5/1m"} {
		if _, err := ParseCondition(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "goroutines", "goroutines < 5", "goroutines > -1", "goroutines > many", "goroutines +20%", "goroutines +0/1m",
		"goroutines +5/-1s", "count() > 1", "count(x > 1", "blocked > 0s", "blocked > soon", "memory > 150%", "memory > 90", "threads > 5", "count > 3", "count>3"} {
		_, err := ParseCondition(bad)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--when") {
			t.Errorf("%q: %v, want one line naming --when", bad, err)
		}
	}
	for _, ok := range []string{"main.handle > 500ms", "main.(*Server).ServeHTTP>=1s", "p99(main.handle) > 200ms", "p999(net/http.(*conn).serve) > 1s", "p50( main.query )>1ms"} {
		c, err := ParseCondition(ok)
		if err != nil || c.Function() == "" {
			t.Errorf("%q: %v (function %q)", ok, err, c.Function())
		}
	}
	for _, bad := range []string{"p95(main.x) > 1s", "main.handle > soon", "p99() > 1s", "p99(main.x > 1s", "main.handle > 0s"} {
		if _, err := ParseCondition(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line", bad, err)
		}
	}
	if c, err := ParseCondition("leaks > 0"); err != nil || !c.OnLeaks() {
		t.Errorf("leaks > 0: %v", err)
	}
}

// summary is a RecordSummary at t seconds with n goroutines, k of them
// in state.
func summary(t float64, n int, state string, k int) report.RecordSummary {
	s := report.RecordSummary{Time: time.Unix(1e9, 0).Add(time.Duration(t * float64(time.Second))), Goroutines: n}
	if k > 0 {
		s.States = []report.StateCount{{State: state, Count: k}}
	}
	return s
}

// TestConditionEval judges each form on summaries made up for it,
// either side of its threshold.
func TestConditionEval(t *testing.T) {
	parse := func(s string) *Condition {
		c, err := ParseCondition(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		cond    string
		history []report.RecordSummary
		holds   bool
	}{
		{"goroutines > 100", []report.RecordSummary{summary(0, 100, "", 0)}, false},
		{"goroutines > 100", []report.RecordSummary{summary(0, 101, "", 0)}, true},
		{"goroutines >= 100", []report.RecordSummary{summary(0, 100, "", 0)}, true},
		{"count(sync.Mutex.Lock) > 3", []report.RecordSummary{summary(0, 10, "sync.Mutex.Lock", 3)}, false},
		{"count(sync.Mutex.Lock) > 3", []report.RecordSummary{summary(0, 10, "sync.Mutex.Lock", 4)}, true},
		{"count(sync.Mutex.Lock) > 3", []report.RecordSummary{summary(0, 10, "chan receive", 9)}, false},
		// Growth: against the latest summary at least the span old.
		{"goroutines +20%/1m", []report.RecordSummary{summary(0, 100, "", 0), summary(30, 200, "", 0)}, false},
		{"goroutines +20%/1m", []report.RecordSummary{summary(0, 100, "", 0), summary(30, 110, "", 0), summary(61, 121, "", 0)}, true},
		{"goroutines +20%/1m", []report.RecordSummary{summary(0, 100, "", 0), summary(61, 119, "", 0)}, false},
		{"goroutines +500/1m", []report.RecordSummary{summary(0, 100, "", 0), summary(60, 601, "", 0)}, true},
		{"goroutines +500/1m", []report.RecordSummary{summary(0, 100, "", 0), summary(60, 600, "", 0)}, false},
	}
	for _, c := range cases {
		if got, value := parse(c.cond).Eval(c.history); got != c.holds || value == "" {
			t.Errorf("%s on %+v: %v (%s), want %v", c.cond, c.history, got, value, c.holds)
		}
	}
	blocked := summary(0, 3, "", 0)
	blocked.Longest = []report.LongWait{{Goid: 7, State: "chan receive", WaitNS: int64(31 * time.Second), Function: "main.wait"}}
	if holds, value := parse("blocked > 30s").Eval([]report.RecordSummary{blocked}); !holds || !strings.Contains(value, "goroutine 7") {
		t.Errorf("blocked 31s: %v %s", holds, value)
	}
	if holds, _ := parse("blocked > 1m").Eval([]report.RecordSummary{blocked}); holds {
		t.Error("blocked 31s held as over a minute")
	}
	lat := summary(0, 3, "", 0)
	lat.Latencies = []report.FunctionLatency{{Function: "main.handle", Calls: 100, P50NS: int64(time.Millisecond), P99NS: int64(300 * time.Millisecond)}}
	if holds, value := parse("p99(main.handle) > 200ms").Eval([]report.RecordSummary{lat}); !holds || !strings.Contains(value, "p99 of main.handle 300ms over 100 calls") {
		t.Errorf("p99 300ms over 200ms: %v %q", holds, value)
	}
	if holds, _ := parse("p50(main.handle) > 200ms").Eval([]report.RecordSummary{lat}); holds {
		t.Error("p50 1ms held over 200ms")
	}
	if holds, _ := parse("p99(main.query) > 1ms").Eval([]report.RecordSummary{lat}); holds {
		t.Error("a function with no call held")
	}
	if over, _ := parse("main.handle > 500ms").SlowCall(501 * time.Millisecond); !over {
		t.Error("a call of 501ms not over 500ms")
	}
	if over, _ := parse("main.handle > 500ms").SlowCall(500 * time.Millisecond); over {
		t.Error("a call of 500ms over 500ms")
	}
	mem := summary(0, 3, "", 0)
	mem.MemoryBytes, mem.MemoryLimit = 95<<20, 100<<20
	if holds, _ := parse("memory > 90%").Eval([]report.RecordSummary{mem}); !holds {
		t.Error("memory at 95% of its limit not over 90%")
	}
	if holds, _ := parse("memory > 96%").Eval([]report.RecordSummary{mem}); holds {
		t.Error("memory at 95% of its limit over 96%")
	}
	mem.MemoryLimit = 0
	if holds, _ := parse("memory > 1%").Eval([]report.RecordSummary{mem}); holds {
		t.Error("no limit, yet memory held over it")
	}
}

// snapshotAt is a snapshot at t seconds with n goroutines blocked on a
// mutex.
func snapshotAt(t float64, n int) *inspect.Snapshot {
	s := &inspect.Snapshot{PID: 4242, Taken: time.Unix(1e9, 0).Add(time.Duration(t * float64(time.Second))), Pause: time.Millisecond}
	for i := 0; i < n; i++ {
		s.Goroutines = append(s.Goroutines, &inspect.Goroutine{ID: uint64(10 + i), Status: "waiting", WaitReason: "sync.Mutex.Lock", State: "sync.Mutex.Lock", SP: uint64(0xc000100000 + i*0x1000),
			Frames: []inspect.Frame{{Function: "main.handle", File: "/src/main.go", Line: 40}}})
	}
	s.Goroutines = append(s.Goroutines, &inspect.Goroutine{ID: 1, Status: "running", State: "running", Frames: []inspect.Frame{{Function: "main.main"}}})
	return s
}

// TestRecordsOncePerIncident feeds a recording's judgement snapshots of
// two pile-ups and checks that the condition writes one record per
// pile-up (not one per snapshot while it holds), none while it does not
// hold, none within the cool-down, and that each record holds the
// snapshot, the window of summaries and what fired.
func TestRecordsOncePerIncident(t *testing.T) {
	c, err := ParseCondition("count(sync.Mutex.Lock) > 3")
	if err != nil {
		t.Fatal(err)
	}
	blocked, err := ParseCondition("blocked > 1500ms")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	o := Options{PID: 4242, Out: out, Interval: time.Second, Keep: 10 * time.Second, MaxSummaries: 100, MaxOverhead: 0.05,
		When: []*Condition{c, blocked}, Cooldown: 6 * time.Second}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	r := &run{o: o, res: &Result{}, active: make([]bool, 2), last: make([]time.Time, 2)}
	// Quiet, a pile-up (t=2..4), quiet, a short one inside the
	// cool-down (t=7), quiet, one after it (t=12..13).
	piled := map[int]int{2: 5, 3: 6, 4: 5, 7: 4, 12: 8, 13: 8}
	for sec := 0; sec <= 15; sec++ {
		snap := snapshotAt(float64(sec), piled[sec])
		r.observe(snap)
		if err := r.judge(snap); err != nil {
			t.Fatal(err)
		}
	}
	var fired []string
	for _, rec := range r.res.Records {
		fired = append(fired, rec.Trigger.Condition+"@"+rec.Trigger.Time.Sub(time.Unix(1e9, 0)).String())
	}
	// The mutex count at 2s and 12s (7s is in its cool-down); the
	// goroutines blocked past 1.5s, as the recorder saw them, at 4s (the
	// same wait since 2s: same stack pointer, not run since), and not at
	// 13s (blocked since 12s).
	want := []string{"count(sync.Mutex.Lock) > 3@2s", "blocked > 1500ms@4s", "count(sync.Mutex.Lock) > 3@12s"}
	if strings.Join(fired, " ") != strings.Join(want, " ") {
		t.Fatalf("records %v, want %v", fired, want)
	}
	if r.res.Dropped == 0 || len(r.history) > 11 {
		t.Errorf("%d summaries kept, %d dropped: the 10s window not applied", len(r.history), r.res.Dropped)
	}
	first := r.res.Records[0]
	var ps struct {
		PID        int `json:"pid"`
		Goroutines []struct {
			Goid       uint64 `json:"goid"`
			WaitReason string `json:"wait_reason"`
		} `json:"goroutines"`
	}
	readJSON(t, filepath.Join(first.Dir, "ps.json"), &ps)
	n := 0
	for _, g := range ps.Goroutines {
		if g.WaitReason == "sync.Mutex.Lock" {
			n++
		}
	}
	if ps.PID != 4242 || n != 5 {
		t.Errorf("ps.json: pid %d, %d goroutines in sync.Mutex.Lock, want 5", ps.PID, n)
	}
	var trig report.RecordTrigger
	readJSON(t, filepath.Join(first.Dir, "trigger.json"), &trig)
	if trig.Condition != c.Text || trig.Value != "5 goroutines in sync.Mutex.Lock" || trig.Summaries != 3 {
		t.Errorf("trigger.json: %+v", trig)
	}
	lines, err := os.ReadFile(filepath.Join(first.Dir, "summaries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lines), "\n"); n != 3 {
		t.Errorf("summaries.jsonl holds %d lines, want the 3 snapshots so far", n)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestSlug: a condition becomes a file name's part.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"count(sync.Mutex.Lock) > 100": "count-sync.Mutex.Lock-gt-100",
		"goroutines +20%/1m":           "goroutines-20pct-1m",
		"on demand":                    "on-demand",
		"../../etc/passwd":             "..-..-etc-passwd",
		"":                             "record",
	} {
		if got := slug(in); got != want || strings.Contains(got, "/") {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// runOn feeds a recording's judgement the snapshots at the given seconds,
// n(sec) goroutines blocked on a mutex in each, and returns when the
// records were written (seconds).
func runOn(t *testing.T, o Options, secs []float64, n func(float64) int) []float64 {
	t.Helper()
	o.PID, o.Out, o.MaxOverhead = 4242, t.TempDir(), 0.05
	if o.MaxSummaries == 0 {
		o.MaxSummaries = 1000
	}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	r := &run{o: o, res: &Result{}, active: make([]bool, len(o.When)), last: make([]time.Time, len(o.When))}
	for _, sec := range secs {
		snap := snapshotAt(sec, n(sec))
		r.observe(snap)
		if err := r.judge(snap); err != nil {
			t.Fatal(err)
		}
	}
	var at []float64
	for _, rec := range r.res.Records {
		at = append(at, rec.Trigger.Time.Sub(time.Unix(1e9, 0)).Seconds())
	}
	return at
}

// TestGrowthOverTheWindow: a growth over as long as the window kept
// fires (the window keeps the newest summary at least that old), once.
func TestGrowthOverTheWindow(t *testing.T) {
	c, err := ParseCondition("goroutines +5/10s")
	if err != nil {
		t.Fatal(err)
	}
	var secs []float64
	for i := 0; i < 30; i++ {
		secs = append(secs, 1.003*float64(i))
	}
	// One goroutine more per snapshot (about a second apart).
	at := runOn(t, Options{Interval: time.Second, Keep: 10 * time.Second, When: []*Condition{c}}, secs, func(s float64) int { return int(s / 1.003) })
	if len(at) != 1 || at[0] < 10 || at[0] > 11.5 {
		t.Errorf("records at %vs, want one about 10s in", at)
	}
}

// TestCooldownDelays: a condition that starts to hold within the
// cool-down of its last record, and goes on holding, is written once the
// cool-down is over.
func TestCooldownDelays(t *testing.T) {
	c, err := ParseCondition("count(sync.Mutex.Lock) > 3")
	if err != nil {
		t.Fatal(err)
	}
	var secs []float64
	for i := 0; i <= 30; i++ {
		secs = append(secs, float64(i))
	}
	piled := func(s float64) int {
		if s == 1 || s >= 3 {
			return 5
		}
		return 0
	}
	at := runOn(t, Options{Interval: time.Second, Keep: 10 * time.Second, When: []*Condition{c}, Cooldown: 10 * time.Second}, secs, piled)
	if len(at) != 2 || at[0] != 1 || at[1] != 11 {
		t.Errorf("records at %vs, want 1s and 11s (the second pile-up, from 3s, after the cool-down)", at)
	}
}

// TestSpanBeyondTheWindow: a growth over longer than the summaries kept
// can span is refused in one line.
func TestSpanBeyondTheWindow(t *testing.T) {
	c, err := ParseCondition("goroutines +10%/2h")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{PID: 1, Out: t.TempDir(), Interval: time.Second, Keep: time.Minute, MaxSummaries: 3600, MaxOverhead: 0.05, When: []*Condition{c}}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "looks back 2h0m0s") {
		t.Errorf("Check: %v", err)
	}
}

// TestDiskBounds: past --max-disk records are counted, not written, said
// once; a record the disk refuses is said and lost, and the recording
// goes on.
func TestDiskBounds(t *testing.T) {
	c, err := ParseCondition("count(sync.Mutex.Lock) > 3")
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	o := Options{PID: 4242, Out: t.TempDir(), Interval: time.Second, Keep: 10 * time.Second, MaxSummaries: 100, MaxOverhead: 0.05,
		When: []*Condition{c}, MaxDisk: 1, Warned: func(w string) { warned = append(warned, w) }}
	r := &run{o: o, res: &Result{}, active: make([]bool, 1), last: make([]time.Time, 1)}
	feed := func(from, to int) {
		for sec := from; sec < to; sec++ {
			n := 0
			if sec%2 == 1 {
				n = 5 // a pile-up every other second
			}
			snap := snapshotAt(float64(sec), n)
			r.observe(snap)
			if err := r.judge(snap); err != nil {
				t.Fatalf("judge at %ds: %v", sec, err)
			}
		}
	}
	feed(0, 6) // pile-ups at 1, 3, 5: the first written, then past 1 byte
	if len(r.res.Records) != 1 || r.res.Skipped != 2 || r.res.Written == 0 || len(warned) != 1 || !strings.Contains(warned[0], "--max-disk") {
		t.Fatalf("records %d, skipped %d, written %d bytes, warned %q", len(r.res.Records), r.res.Skipped, r.res.Written, warned)
	}
	// A disk that refuses: the output directory gone.
	r.o.MaxDisk, r.res.Written, warned = 1<<30, 0, nil
	if err := os.RemoveAll(o.Out); err != nil {
		t.Fatal(err)
	}
	feed(6, 10) // pile-ups at 7, 9
	if r.res.Failed != 2 || len(warned) != 2 || !strings.Contains(warned[0], "not written") || strings.Contains(warned[0], "\n") {
		t.Errorf("failed %d, warned %q", r.res.Failed, warned)
	}
}
