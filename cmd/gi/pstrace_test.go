package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
)

type psTraceDoc struct {
	TraceWindow struct {
		StartNS   int64    `json:"start_ns"`
		EndNS     int64    `json:"end_ns"`
		Functions []string `json:"functions"`
		Added     []string `json:"added"`
		Snapshots int      `json:"snapshots"`
		Lost      uint64   `json:"lost"`
	} `json:"trace_window"`
	Goroutines []struct {
		Goid       uint64            `json:"goid"`
		State      string            `json:"state"`
		WaitReason string            `json:"wait_reason"`
		Function   string            `json:"function"`
		Labels     map[string]string `json:"labels"`
		Frames     []struct {
			Function string `json:"function"`
		} `json:"frames"`
		WaitingOn []struct {
			Kind    string `json:"kind"`
			Name    string `json:"name"`
			Locked  bool   `json:"locked"`
			Waiters int    `json:"waiters"`
		} `json:"waiting_on"`
		CreatedBy *struct {
			Function string `json:"function"`
			File     string `json:"file"`
			Line     int    `json:"line"`
			Goid     uint64 `json:"goid"`
		} `json:"created_by"`
		Trace *struct {
			Function string `json:"function"`
			File     string `json:"file"`
			Line     int    `json:"line"`
			Calls    uint64 `json:"calls"`
			P50NS    int64  `json:"p50_ns"`
			P99NS    int64  `json:"p99_ns"`
			MaxNS    int64  `json:"max_ns"`
			InCallNS int64  `json:"in_call_ns"`
			Stuck    bool   `json:"stuck"`
			TracedNS int64  `json:"traced_ns"`
			Why      string `json:"why"`
			Dominant *struct {
				Part  string  `json:"part"`
				Share float64 `json:"share"`
			} `json:"dominant"`
		} `json:"trace"`
	} `json:"goroutines"`
}

func psTraceJSON(t *testing.T, pid int, d string) psTraceDoc {
	t.Helper()
	// Traced whole, for exact counts and stuck marks: under a budget a
	// handler of a service that mostly waits is sampled (TestPsTraceBudget).
	out, stderr, code := runGi(t, "ps", "--json", "--max-overhead", "none", "--trace", d, strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("gi ps --trace: %s", stderr)
	}
	var doc psTraceDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	measured := 0
	for _, g := range doc.Goroutines {
		if g.Trace == nil {
			continue
		}
		measured++
		onStack := false
		for _, f := range g.Frames {
			onStack = onStack || f.Function == g.Trace.Function
		}
		if !onStack || g.Trace.File == "" || g.Trace.Line == 0 {
			t.Errorf("goroutine %d: trace.function %s (%s:%d) is not a frame of its stack %+v", g.Goid, g.Trace.Function, g.Trace.File, g.Trace.Line, g.Frames)
		}
	}
	if measured == 0 {
		t.Errorf("gi ps --trace measured no goroutine:\n%s", out)
	}
	return doc
}

func within(got, want, abs int64, rel float64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= abs+int64(rel*float64(want))
}

// TestPsTraceLatencies: the handler's latencies gi ps --trace reports agree
// with what the target measured itself over the same window.
func TestPsTraceLatencies(t *testing.T) {
	requirePrivilege(t)
	for _, tc := range []string{"local", "go1.27.4"} {
		t.Run(tc, func(t *testing.T) { testPsTraceLatencies(t, tc) })
	}
}

func testPsTraceLatencies(t *testing.T, toolchain string) {
	// No pause between a worker's calls: each worker is in main.handle
	// (waiting for the lock or holding it) nearly all the time.
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{Toolchain: toolchain}), "-pause", "0")
	doc := psTraceJSON(t, p.Pid, "2s")
	targets.CheckNotStopped(t, p.Pid)
	w := doc.TraceWindow
	if w.Lost != 0 {
		t.Errorf("%d events lost", w.Lost)
	}
	truth, n := lockserverStats(t, p, w.StartNS, w.EndNS)
	seen := 0
	for _, g := range doc.Goroutines {
		if g.Trace == nil || g.Trace.Function != "main.handle" {
			continue
		}
		seen++
		tr := g.Trace
		t.Logf("goroutine %d: gi counted %d calls, p50 %v, max %v", g.Goid, tr.Calls, time.Duration(tr.P50NS), time.Duration(tr.MaxNS))
		if !within(int64(tr.Calls), n("calls"), 3, 0.01) {
			t.Errorf("goroutine %d: %d handle calls in the window, the target counted %d", g.Goid, tr.Calls, n("calls"))
		}
		// p50 comes from a log-linear histogram (buckets 6.25% wide); the
		// max is exact.
		if !within(tr.P50NS, n("p50_ns"), 100_000, 0.1) || !within(tr.MaxNS, n("max_ns"), 500_000, 0.05) {
			t.Errorf("goroutine %d: p50 %v max %v, the target measured p50 %v max %v", g.Goid,
				time.Duration(tr.P50NS), time.Duration(tr.MaxNS), time.Duration(n("p50_ns")), time.Duration(n("max_ns")))
		}
		if tr.Stuck {
			t.Errorf("goroutine %d marked stuck with no stall", g.Goid)
		}
	}
	t.Logf("target: %v; gi saw %d goroutines in main.handle", truth, seen)
	if n("calls") < 100 {
		t.Errorf("only %d calls in the window", n("calls"))
	}
	if seen < 3 {
		t.Errorf("%d of 6 workers measured in main.handle, want at least 3 (they are in it nearly all the time)", seen)
	}
}

// TestPsTraceStuck: a lock held for seconds shows as in-call times for the
// handlers that entered during the window, and as stuck for those blocked
// before it began. Traced whole (--max-overhead none): under a budget the
// handlers, called ~900 times a second between the stalls, are sampled,
// and no goroutine is called stuck in a sampled function. The test moves
// with what the target says (the janitor holds the lock, every worker is
// blocked on it), not with sleeps a busy machine may outlast.
func TestPsTraceStuck(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{PIE: true}))

	// The stall begins half a second into a three-second window, and
	// lasts past its end.
	cmd := exec.Command(buildGi(t), "ps", "--json", "--max-overhead", "none", "--trace", "3s", strconv.Itoa(p.Pid))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() && !strings.Contains(sc.Text(), "gi: tracing") {
	}
	time.Sleep(500 * time.Millisecond)
	sent := time.Now()
	if _, err := p.Do("stall 8s", time.Minute); err != nil {
		t.Fatal(err)
	}
	locked := time.Now() // the janitor holds the lock
	for sc.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gi ps --trace: %v", err)
	}
	var doc psTraceDoc
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	// Each worker entered the call it is blocked in between a little
	// before the janitor asked for the lock (the call it was waiting in
	// then: six workers holding it 1 ms each) and a little after it got
	// it (its 5 ms pause, and the scheduler on a busy machine); the
	// in-call time runs to the window's end, which the trace may pass by
	// a drain or two.
	end := time.Unix(0, doc.TraceWindow.EndNS)
	lo, hi := end.Sub(locked)-500*time.Millisecond, end.Sub(sent)+500*time.Millisecond
	if lo < 0 {
		t.Fatalf("the stall began %v after the window ended: the target answered too late", -end.Sub(locked))
	}
	inCall := 0
	for _, g := range doc.Goroutines {
		if g.Labels["worker"] == "" {
			continue
		}
		if g.WaitReason != "sync.Mutex.Lock" || g.Trace == nil || g.Trace.Function != "main.handle" {
			t.Errorf("worker %d: state %q, trace %+v: want blocked in main.handle", g.Goid, g.State, g.Trace)
			continue
		}
		// Entered when the stall began, within the window.
		if d := time.Duration(g.Trace.InCallNS); d < lo || d > hi || g.Trace.Stuck {
			t.Errorf("worker %d: in call %v stuck %v, want %v to %v (entered when the stall began, %v before the window ended)", g.Goid, d, g.Trace.Stuck, lo, hi, end.Sub(locked))
		} else {
			inCall++
		}
	}
	if inCall != 6 {
		t.Errorf("%d workers with an in-call time, want 6", inCall)
	}

	// Blocked before the window: stuck, in call since before it. The
	// target answers once this janitor holds the lock, that is once the
	// first stall has ended (the workers queued before it get it first);
	// it holds it for longer than the rest of the test.
	if _, err := p.Do("stall 10m", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitWorkersBlocked(t, p.Pid)
	doc = psTraceJSON(t, p.Pid, "2s")
	stuck := 0
	for _, g := range doc.Goroutines {
		if g.Labels["worker"] != "" && g.Trace != nil && g.Trace.Stuck && g.Trace.InCallNS == 0 {
			stuck++
		}
	}
	if stuck != 6 {
		t.Errorf("%d workers marked stuck, want 6", stuck)
	}
	// What they are stuck on, in the snapshot that ends the window: the
	// global mutex the janitor holds, with all six waiting.
	for _, g := range doc.Goroutines {
		if g.Labels["worker"] == "" {
			continue
		}
		if len(g.WaitingOn) != 1 || g.WaitingOn[0].Kind != "mutex" || g.WaitingOn[0].Name != "main.mu" || !g.WaitingOn[0].Locked || g.WaitingOn[0].Waiters != 6 {
			t.Errorf("worker %d waits on %+v, want main.mu locked with 6 waiters", g.Goid, g.WaitingOn)
		}
	}
	// The janitor holding the lock sleeps in time.Sleep, a runtime
	// function: its row measures and names its caller, main.janitor.
	janitor := 0
	for _, g := range doc.Goroutines {
		if len(g.Frames) > 1 && g.Frames[0].Function == "time.Sleep" && g.Frames[1].Function == "main.janitor" {
			janitor++
			if g.Trace == nil || g.Trace.Function != "main.janitor" || !g.Trace.Stuck {
				t.Errorf("janitor %d asleep in time.Sleep: trace %+v, want main.janitor, stuck", g.Goid, g.Trace)
			}
		}
	}
	if janitor != 1 {
		t.Errorf("%d janitors asleep in time.Sleep, want 1", janitor)
	}
	// The mutex may be in starvation mode: a handler woken by the unlock
	// ending the previous stall, after waiting more than a millisecond,
	// switches it into that mode, and it stays there while others wait.
	// The janitor took it without defer, between a Lock and an Unlock in
	// its code: the suspect.
	out, stderr, code := runGi(t, "ps", "--group", "--max-overhead", "none", "--trace", "1s", strconv.Itoa(p.Pid))
	if code != 0 || !regexp.MustCompile(`(?m)^\s*6\s+sync\.Mutex\.Lock .*main\.handle.*stuck >1\.0s.*mutex main\.mu \(locked, holder unknown, suspected goroutine \d+ at main\.janitor lockserver/main\.go:\d+ \(a Lock before where it is, an Unlock after, no defer\)(, starving)?, 6 waiters\)`).MatchString(out) {
		t.Errorf("--group --trace: no group of 6 stuck handlers, the janitor suspected (exit %d, %s):\n%s", code, stderr, out)
	}
	targets.CheckNotStopped(t, p.Pid)
}

// waitWorkersBlocked waits until a snapshot of lockserver pid finds its six
// workers blocked on the mutex in main.handle (a stall's janitor holds it).
func waitWorkersBlocked(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, stderr, code := runGi(t, "ps", "--json", strconv.Itoa(pid))
		if code != 0 {
			t.Fatalf("gi ps: %s", stderr)
		}
		var doc psTraceDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		blocked := 0
		for _, g := range doc.Goroutines {
			inHandle := false
			for _, f := range g.Frames {
				inHandle = inHandle || f.Function == "main.handle"
			}
			if g.Labels["worker"] != "" && g.WaitReason == "sync.Mutex.Lock" && inHandle {
				blocked++
			}
		}
		if blocked == 6 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 6 workers blocked on the mutex a minute into the stall:\n%s", blocked, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTraceHeadersMatchPs: the goroutine headers of gi trace name their
// goroutines as gi ps does: id, created by (function, file:line, parent), labels.
func TestTraceHeadersMatchPs(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}))
	out, stderr, code := runGi(t, "ps", "--json", strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatal(stderr)
	}
	var doc psTraceDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// Every worker must show within the window: no sampling.
	cmd := exec.Command(buildGi(t), "trace", "--duration", "500ms", "--max-overhead", "none", strconv.Itoa(p.Pid), "main.handle")
	tr, err := cmd.Output()
	if err != nil {
		t.Fatalf("gi trace: %v", err)
	}
	header := regexp.MustCompile(`(?m)^goroutine (\d+) \(created by (\S+) at (\S+):(\d+) in goroutine (\d+)\)(?: \{(.*)\})?$`)
	matched := 0
	for _, m := range header.FindAllStringSubmatch(string(tr), -1) {
		id, _ := strconv.ParseUint(m[1], 10, 64)
		for _, g := range doc.Goroutines {
			if g.Goid != id {
				continue
			}
			matched++
			c := g.CreatedBy
			line, _ := strconv.Atoi(m[4])
			parent, _ := strconv.ParseUint(m[5], 10, 64)
			if c == nil || c.Function != m[2] || filepath.Base(c.File) != m[3] || c.Line != line || c.Goid != parent {
				t.Errorf("goroutine %d: trace says created by %s at %s:%s in %s; ps says %+v", id, m[2], m[3], m[4], m[5], c)
			}
			if want := formatLabelsBraces(g.Labels); want != m[6] {
				t.Errorf("goroutine %d: trace labels {%s}, ps labels {%s}", id, m[6], want)
			}
		}
	}
	if matched < 6 {
		t.Errorf("compared %d trace headers with ps, want the 6 workers:\n%s", matched, tr)
	}
}

func formatLabelsBraces(l map[string]string) string {
	return strings.ReplaceAll(formatLabels(l), ",", ", ")
}

// TestPsTraceFreshGoroutines: on a server whose requests each run on a
// fresh goroutine (a connection per request) and pass through
// main.stageA → stageB → stageC, every goroutine found in a stage when the
// window ends shows that stage's latency, though the goroutines of the
// first snapshot are long gone: gi follows the goroutines into the
// functions they move into during the window. With the traffic starting
// only after gi attached, no stage is in the first snapshot at all: a
// stage the window's snapshots all missed says so, and two of the three at
// least are found. Traced whole (--max-overhead none). From
// the host and from inside the target's PID namespace. Every other row has
// a latency or says why not.
func TestPsTraceFreshGoroutines(t *testing.T) {
	requirePrivilege(t)
	bin := targets.Build(t, "fanout", targets.BuildOptions{})
	for _, c := range []struct {
		name             string
		container, burst bool
	}{
		{"host", false, false},
		{"host/traffic after attach", false, true},
		{"PID namespace/traffic after attach", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-stage", "20ms"}
			if !c.burst {
				args = append(args, "-clients", "6")
			}
			var p *targets.Process
			var cmd *exec.Cmd
			if c.container {
				p = targets.StartInContainer(t, bin, targets.ContainerOptions{}, args...)
				cmd = exec.Command("nsenter", "--target", strconv.Itoa(p.Pid), "--pid", "--",
					"unshare", "--mount", "--fork", "--kill-child", "--mount-proc", buildGi(t), "ps", "--json", "--max-overhead", "none", "--trace", "3s", "1")
			} else {
				p = targets.Start(t, bin, args...)
				cmd = exec.Command(buildGi(t), "ps", "--json", "--max-overhead", "none", "--trace", "3s", strconv.Itoa(p.Pid))
			}
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			errPipe, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			sc := bufio.NewScanner(errPipe)
			for sc.Scan() {
				stderr.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "gi: tracing") {
					break
				}
			}
			if c.burst {
				if _, err := p.Do("clients 6", time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			for sc.Scan() {
				stderr.WriteString(sc.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("gi ps --trace: %v\n%s", err, stderr.String())
			}
			targets.CheckNotStopped(t, p.Pid)
			var doc psTraceDoc
			if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
				t.Fatalf("%v\n%s", err, stdout.String())
			}
			w := doc.TraceWindow
			window := w.EndNS - w.StartNS
			truth, err := p.Do(fmt.Sprintf("stats %d %d", w.StartNS, w.EndNS), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("window: %d functions, added %v in %d snapshots, %d lost; the target counted %v", len(w.Functions), w.Added, w.Snapshots, w.Lost, truth)
			// A stage no snapshot found a goroutine in before the window
			// ended was never attached, and its rows say so: the
			// snapshots are 250 ms apart at least (more on a busy machine,
			// 20 times their pause), and with the traffic beginning after
			// the attach a stage can be missed by the few that follow.
			// The rows of the stages attached have their latency.
			traced := map[string]bool{}
			for _, fn := range w.Functions {
				traced[fn] = true
			}
			attached := 0
			for _, stage := range []string{"main.stageA", "main.stageB", "main.stageC"} {
				if traced[stage] {
					attached++
				}
			}
			inStages := 0
			for _, g := range doc.Goroutines {
				tr := g.Trace
				if tr == nil {
					t.Errorf("goroutine %d (%s in %s): no latency and no reason", g.Goid, g.State, g.Function)
					continue
				}
				stage := strings.TrimPrefix(tr.Function, "main.")
				if stage != "stageA" && stage != "stageB" && stage != "stageC" {
					if tr.Calls == 0 && tr.InCallNS == 0 && !tr.Stuck && tr.Why != "not traced: appeared during the window" &&
						tr.Why != "no call completed in the window" && tr.Why != "never returns (no RET)" && !strings.HasPrefix(tr.Why, "untraceable: ") {
						t.Errorf("goroutine %d in %s: no latency, and why %q", g.Goid, tr.Function, tr.Why)
					}
					continue
				}
				inStages++
				n, _ := strconv.ParseInt(truth[stage], 10, 64)
				switch {
				case !traced[tr.Function] && tr.Why == "not traced: appeared during the window":
					t.Logf("goroutine %d in %s: no snapshot found a goroutine in it before the window ended (%d snapshots)", g.Goid, tr.Function, w.Snapshots)
				case tr.Why != "" || (tr.Calls == 0 && tr.InCallNS == 0):
					t.Errorf("goroutine %d in %s: no latency (why %q): %+v", g.Goid, tr.Function, tr.Why, tr)
				case int64(tr.Calls) > n+3:
					t.Errorf("goroutine %d in %s: %d calls, the target counted %d in the window", g.Goid, tr.Function, tr.Calls, n)
				case tr.TracedNS >= window && !within(int64(tr.Calls), n, 3, 0.01):
					t.Errorf("goroutine %d in %s, traced the whole window: %d calls, the target counted %d", g.Goid, tr.Function, tr.Calls, n)
				case tr.TracedNS <= 0 || tr.TracedNS > window+int64(time.Second):
					t.Errorf("goroutine %d in %s: traced %v of a %v window", g.Goid, tr.Function, time.Duration(tr.TracedNS), time.Duration(window))
				}
			}
			if inStages < 3 {
				t.Errorf("%d goroutines in a stage when the window ended, want at least 3 of the 6 requests", inStages)
			}
			if c.burst && len(w.Added) == 0 {
				t.Errorf("traffic began after the attach, yet no function was added during the window: %+v", w)
			}
			if attached < 2 {
				t.Errorf("%d of the 3 stages traced by the window's end (%d snapshots): %v", attached, w.Snapshots, w.Functions)
			}
		})
	}
}

// TestPsTraceWhy checks gi ps --trace --why: lockserver's six workers
// call main.handle back to back, each waiting for the one mutex about
// five times as long as it holds it (a 1 ms sleep), so the time of their
// handle calls is mostly sync.Mutex.Lock, about five sixths of it. Traced
// whole (--max-overhead none): under a budget main.handle and the
// scheduler's probes are sampled (TestPsTraceBudget, TestTraceWhyBudgetCLI).
func TestPsTraceWhy(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-pause", "0")
	out, stderr, code := runGi(t, "ps", "--json", "--max-overhead", "none", "--trace", "2s", "--why", strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatalf("gi ps --trace --why: %s", stderr)
	}
	targets.CheckNotStopped(t, p.Pid)
	validate(t, compileSchema(t, "ps"), "gi ps --trace --why --json", out)
	var doc psTraceDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range doc.Goroutines {
		if g.Trace == nil || g.Trace.Function != "main.handle" || g.Trace.Calls == 0 {
			continue
		}
		seen++
		d := g.Trace.Dominant
		if d == nil || d.Part != "sync.Mutex.Lock" || d.Share < 0.6 || d.Share > 0.95 {
			t.Errorf("goroutine %d: main.handle mostly %+v, want sync.Mutex.Lock, about 5/6", g.Goid, d)
		}
	}
	if seen < 4 {
		t.Errorf("%d workers measured in main.handle:\n%s", seen, out)
	}
	table, stderr, code := runGi(t, "ps", "--max-overhead", "none", "--trace", "1s", "--why", strconv.Itoa(p.Pid))
	if code != 0 || !strings.Contains(table, "MOSTLY") || !strings.Contains(table, "sync.Mutex.Lock ") {
		t.Errorf("gi ps --trace --why table (exit %d, %s):\n%s", code, stderr, table)
	}
	if _, stderr, code := runGi(t, "ps", "--why", strconv.Itoa(p.Pid)); code == 0 || !strings.Contains(stderr, "--trace") {
		t.Errorf("--why without --trace: exit %d, %s", code, stderr)
	}
}

// TestPsTraceBudget: under a budget main.handle's calls do not fit
// (lockserver's workers call it about 900 times a second, their probes
// taking a quarter of its CPU time here, over the 2% a 5% budget leaves
// them even where traps cost a tenth), gi ps --trace traces it in sampling
// windows, says so, and reports per goroutine the calls it saw whole, their
// estimated number and their latencies, against what the target counted
// over the same window; no goroutine is called stuck for calls that went
// between the windows. Under 0.2% a window costs more than a second's
// trace can pay for: none opens, and gi says so.
func TestPsTraceBudget(t *testing.T) {
	requirePrivilege(t)
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-pause", "0")
	out, stderr, code := runGi(t, "ps", "--json", "--trace", "2s", "--max-overhead", "5%", strconv.Itoa(p.Pid))
	if code != 0 {
		t.Fatalf("gi ps --trace --max-overhead 5%%: %s", stderr)
	}
	targets.CheckNotStopped(t, p.Pid)
	if !strings.Contains(stderr, "traced in sampling windows: main.handle (") {
		t.Errorf("no warning naming main.handle sampled:\n%s", stderr)
	}
	validate(t, compileSchema(t, "ps"), "gi ps --trace --max-overhead --json", out)
	var doc struct {
		TraceWindow struct {
			StartNS      int64    `json:"start_ns"`
			EndNS        int64    `json:"end_ns"`
			Sampled      []string `json:"sampled"`
			SampledShare float64  `json:"sampled_share"`
		} `json:"trace_window"`
		Goroutines []struct {
			Goid  uint64 `json:"goid"`
			Trace *struct {
				Function       string `json:"function"`
				Calls          int64  `json:"calls"`
				Sampled        bool   `json:"sampled"`
				CallsEstimated int64  `json:"calls_estimated"`
				P50NS          int64  `json:"p50_ns"`
				Stuck          bool   `json:"stuck"`
				Why            string `json:"why"`
			} `json:"trace"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	w := doc.TraceWindow
	if !slices.Contains(w.Sampled, "main.handle") || w.SampledShare <= 0 || w.SampledShare >= 1 {
		t.Fatalf("trace window: sampled %v covering %.4f of it", w.Sampled, w.SampledShare)
	}
	truth, n := lockserverStats(t, p, w.StartNS, w.EndNS)
	seen := 0
	for _, g := range doc.Goroutines {
		tr := g.Trace
		if tr == nil || tr.Function != "main.handle" {
			continue
		}
		seen++
		t.Logf("goroutine %d: %d calls seen, ~%d estimated, p50 %v; the windows took calls %.2f%% of the trace; the target: %v", g.Goid, tr.Calls, tr.CallsEstimated, time.Duration(tr.P50NS), 100*w.SampledShare, truth)
		if !tr.Sampled || tr.Stuck {
			t.Errorf("goroutine %d: sampled %v, stuck %v", g.Goid, tr.Sampled, tr.Stuck)
			continue
		}
		if tr.Calls == 0 {
			if tr.Why != "no call completed in the sampling windows" {
				t.Errorf("goroutine %d: no call, why %q", g.Goid, tr.Why)
			}
			continue
		}
		if tr.Calls > n("calls") {
			t.Errorf("goroutine %d: %d calls seen, the target made %d", g.Goid, tr.Calls, n("calls"))
		}
		// The calls seen are those the windows took: about the target's
		// calls times the share of the trace the windows took calls in,
		// give or take its Poisson spread (the estimate is the calls
		// seen over that share).
		if lambda := float64(n("calls")) * w.SampledShare; math.Abs(float64(tr.Calls)-lambda) > 4*math.Sqrt(lambda)+2 {
			t.Errorf("goroutine %d: %d calls seen (~%d estimated) where the windows, taking calls %.2f%% of the trace, would see %.0f ± %.0f of the target's %d",
				g.Goid, tr.Calls, tr.CallsEstimated, 100*w.SampledShare, lambda, 4*math.Sqrt(lambda)+2, n("calls"))
		}
		// The median of the calls seen is that of a sample of them: with
		// k calls seen it lies, but once in thousands, between the
		// target's quantiles 0.5 ± 3.3·0.5/√k (a binomial bound on its
		// rank), widened to the quantiles the target reports and by a
		// bucket of gi's histograms (6.25%) and 200 µs.
		lo, hi := sampleMedianBounds(n, tr.Calls)
		if float64(tr.P50NS) < float64(lo)*(1-0.0625)-200e3 || float64(tr.P50NS) > float64(hi)*(1+0.0625)+200e3 {
			t.Errorf("goroutine %d: p50 %v of %d calls seen, the target measured %v, its median's spread for %d calls %v to %v",
				g.Goid, time.Duration(tr.P50NS), tr.Calls, time.Duration(n("p50_ns")), tr.Calls, time.Duration(lo), time.Duration(hi))
		}
	}
	if seen < 3 {
		t.Errorf("%d of 6 workers measured in main.handle:\n%s", seen, out)
	}
	table, stderr, code := runGi(t, "ps", "--trace", "2s", "--max-overhead", "5%", strconv.Itoa(p.Pid))
	if code != 0 || !regexp.MustCompile(`(?m)\s~\d+\s`).MatchString(table) || !strings.Contains(table, "sampled to keep the 5% overhead budget") {
		t.Errorf("gi ps --trace --max-overhead 5%% table (exit %d, %s):\n%s", code, stderr, table)
	}
	table, stderr, code = runGi(t, "ps", "--trace", "1s", "--max-overhead", "0.2%", strconv.Itoa(p.Pid))
	if code != 0 || !strings.Contains(table, "warning: no sampling window opened: under the 0.2% budget the first was to open") {
		t.Errorf("gi ps --trace --max-overhead 0.2%% table (exit %d, %s):\n%s", code, stderr, table)
	}
	targets.CheckNotStopped(t, p.Pid)
}

// sampleMedianBounds returns where the median of k calls drawn from those
// the target measured lies, but once in thousands: between its quantiles
// 0.5 ± 3.3·0.5/√k, each rounded outwards to one the target reports (the
// quickest call's duration is unknown: 0).
func sampleMedianBounds(n func(string) int64, k int64) (lo, hi int64) {
	d := 3.3 * 0.5 / math.Sqrt(float64(max(k, 1)))
	lo, hi = 0, n("max_ns")
	for _, q := range []struct {
		at  float64
		key string
	}{{0.05, "p05_ns"}, {0.10, "p10_ns"}, {0.25, "p25_ns"}} {
		if q.at <= 0.5-d {
			lo = n(q.key)
		}
	}
	for _, q := range []struct {
		at  float64
		key string
	}{{0.99, "p99_ns"}, {0.95, "p95_ns"}, {0.90, "p90_ns"}, {0.75, "p75_ns"}} {
		if q.at >= 0.5+d {
			hi = n(q.key)
		}
	}
	return lo, hi
}

// lockserverStats asks lockserver p for its handle calls' statistics
// between start and end (Unix ns): all of them, and a reader of one.
func lockserverStats(t *testing.T, p *targets.Process, start, end int64) (map[string]string, func(string) int64) {
	t.Helper()
	truth, err := p.Do(fmt.Sprintf("stats %d %d", start, end), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return truth, func(k string) int64 { v, _ := strconv.ParseInt(truth[k], 10, 64); return v }
}
