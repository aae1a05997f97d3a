package recorder_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/recorder"
	"github.com/gi-debug/gi/report"
)

// TestRecordPileUps records a service whose four workers take a shared
// mutex, and makes its janitor hold the mutex twice: each pile-up writes
// exactly one record, whose snapshot holds the four workers blocked on
// main.mu, and nothing is written while the service is quiet (four
// workers alone can never be four waiting). A record on demand, then the
// service's exit, end the recording; the pauses stay within the budget
// and the service is never left stopped.
func TestRecordPileUps(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process")
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "4", "-pause", "20ms")
	c, err := recorder.ParseCondition("count(sync.Mutex.Lock) > 3")
	if err != nil {
		t.Fatal(err)
	}
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	written := make(chan recorder.Record, 16)
	observed := make(chan report.RecordSummary, 1024)
	demand := make(chan struct{}, 1)
	o := recorder.Options{PID: p.Pid, Out: t.TempDir(), Interval: 100 * time.Millisecond, Keep: 10 * time.Second, MaxSummaries: 1000,
		MaxOverhead: 0.05, When: []*recorder.Condition{c}, Demand: demand,
		Written:  func(r recorder.Record) { written <- r },
		Observed: func(s report.RecordSummary) { observed <- s }}
	type outcome struct {
		res *recorder.Result
		err error
	}
	done := make(chan outcome, 1)
	started := time.Now()
	go func() {
		res, err := recorder.Run(context.Background(), tracer, o)
		done <- outcome{res, err}
	}()
	// waitSnapshots waits for n more snapshots, failing on a record.
	waitSnapshots := func(n int, until func(report.RecordSummary) bool) {
		t.Helper()
		deadline := time.After(time.Minute)
		for seen := 0; seen < n || (until != nil && seen < 1000); {
			select {
			case s := <-observed:
				seen++
				if until != nil && seen >= n && until(s) {
					return
				}
			case r := <-written:
				t.Fatalf("a record while quiet: %+v", r.Trigger)
			case out := <-done:
				t.Fatalf("the recording ended: %+v %v", out.res, out.err)
			case <-deadline:
				t.Fatalf("fewer than %d snapshots in a minute", n)
			}
		}
	}
	waitSnapshots(15, nil)
	for incident := 1; incident <= 2; incident++ {
		if _, err := p.Do("stall 1500ms", time.Minute); err != nil {
			t.Fatal(err)
		}
		var rec recorder.Record
		select {
		case rec = <-written:
		case <-time.After(30 * time.Second):
			t.Fatalf("pile-up %d: no record", incident)
		}
		if rec.Trigger.Condition != c.Text || rec.Trigger.Value != "4 goroutines in sync.Mutex.Lock" {
			t.Errorf("pile-up %d: trigger %+v", incident, rec.Trigger)
		}
		if cost := rec.Trigger.Cost; cost.Snapshots < 15 || cost.PausedNS <= 0 || cost.PauseShare <= 0 || cost.PauseShare > o.MaxOverhead || cost.ProbesNS != 0 {
			t.Errorf("pile-up %d: cost %+v", incident, cost)
		}
		checkBlockedWorkers(t, rec.Dir)
		// Drained: a snapshot with the workers back at work, and none
		// written meanwhile (the same pile-up writes once).
		waitSnapshots(1, func(s report.RecordSummary) bool { return s.Count("sync.Mutex.Lock") < 4 })
	}
	waitSnapshots(5, nil)
	demand <- struct{}{}
	select {
	case rec := <-written:
		if rec.Trigger.Condition != "on demand" {
			t.Errorf("on demand: %+v", rec.Trigger)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no record on demand")
	}
	targets.CheckNotStopped(t, p.Pid)
	p.Kill()
	var out outcome
	select {
	case out = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the recording did not end when the process exited")
	}
	if out.err != nil || !out.res.Exited || len(out.res.Records) != 3 {
		t.Fatalf("result %+v, err %v", out.res, out.err)
	}
	took := time.Since(started)
	if share := out.res.Paused.Seconds() / took.Seconds(); share > o.MaxOverhead {
		t.Errorf("the process stopped %v in %v (%.1f%%), over the %.0f%% budget", out.res.Paused, took, 100*share, 100*o.MaxOverhead)
	}
	t.Logf("%d snapshots in %v, paused %v in all", out.res.Snapshots, took.Round(time.Millisecond), out.res.Paused)
}

// checkBlockedWorkers reads a record's snapshot: the four workers
// (labelled worker=wN) blocked on main.mu, and its files whole.
func checkBlockedWorkers(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ps struct {
		Goroutines []struct {
			WaitReason string            `json:"wait_reason"`
			Labels     map[string]string `json:"labels"`
			WaitingOn  []struct {
				Name string `json:"name"`
			} `json:"waiting_on"`
		} `json:"goroutines"`
	}
	if err := json.Unmarshal(b, &ps); err != nil {
		t.Fatal(err)
	}
	workers := 0
	for _, g := range ps.Goroutines {
		if g.WaitReason == "sync.Mutex.Lock" && strings.HasPrefix(g.Labels["worker"], "w") && len(g.WaitingOn) > 0 && g.WaitingOn[0].Name == "main.mu" {
			workers++
		}
	}
	if workers != 4 {
		t.Errorf("%s: %d workers blocked on main.mu in ps.json, want 4", dir, workers)
	}
	for _, f := range []string{"summaries.jsonl", "trigger.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %s missing or empty: %v", dir, f, err)
		}
	}
}

// TestRecordSlowCall records a service with a condition on its handler's
// calls: when its janitor holds the lock for 1.2s, the handler call that
// waited writes one record (the cool-down holds back the others of the
// same pile-up), holding that call, as long as the target measured its
// longest, its time mostly in sync.Mutex.Lock and ended by the janitor,
// and the window's calls as JSON lines and a Perfetto trace.
func TestRecordSlowCall(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process and attaching uprobes")
	// Few calls, traced whole under the budget: a function sampled in
	// windows shows no call longer than a window.
	p := targets.Start(t, targets.Build(t, "lockserver", targets.BuildOptions{}), "-workers", "4", "-pause", "200ms")
	c, err := recorder.ParseCondition("main.handle > 800ms")
	if err != nil {
		t.Fatal(err)
	}
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	written := make(chan recorder.Record, 16)
	started := make(chan struct{})
	o := recorder.Options{PID: p.Pid, Out: t.TempDir(), Interval: 200 * time.Millisecond, Keep: 10 * time.Second, MaxSummaries: 1000,
		// The handler traced whole, whatever the governor would make of
		// the machine: sampled, its windows would see no call longer than
		// themselves (said in a warning).
		MaxOverhead: 0.05, ProbeOverhead: -1, When: []*recorder.Condition{c}, Why: true, Cooldown: time.Minute,
		Warned:  func(w string) { t.Logf("warning: %s", w) },
		Started: func() { close(started) },
		Written: func(r recorder.Record) { written <- r }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	results := make(chan *recorder.Result, 1)
	go func() {
		res, err := recorder.Run(ctx, tracer, o)
		results <- res
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the recording ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the recording did not start")
	}
	begin := time.Now()
	if _, err := p.Do("stall 1200ms", time.Minute); err != nil {
		t.Fatal(err)
	}
	var rec recorder.Record
	select {
	case rec = <-written:
	case err := <-done:
		t.Fatalf("the recording ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no record of the slow call")
	}
	// Once the pile-up has drained: what the target measured.
	time.Sleep(500 * time.Millisecond)
	truth, err := p.Do(fmt.Sprintf("stats %d %d", begin.UnixNano(), time.Now().UnixNano()), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-results
	targets.CheckNotStopped(t, p.Pid)
	select {
	case extra := <-written:
		t.Errorf("a second record of the same pile-up: %+v", extra.Trigger)
	default:
	}
	if cost := rec.Trigger.Cost; cost.Snapshots == 0 || cost.PausedNS <= 0 || cost.ProbesNS <= 0 || cost.ProbesShare <= 0 {
		t.Errorf("cost %+v: pauses and probes not counted", cost)
	}
	call := rec.Trigger.Call
	if call == nil || call.Function != "main.handle" {
		t.Fatalf("trigger %+v: no main.handle call", rec.Trigger)
	}
	max, err := strconv.ParseInt(truth["max_ns"], 10, 64)
	if err != nil {
		t.Fatalf("the target's stats %v: %v", truth, err)
	}
	// The first to end is the longest: the one that waited the whole
	// hold; the target's longest, within a scheduling delay.
	if d := time.Duration(call.DurationNS); d < 800*time.Millisecond || d > time.Duration(max)+50*time.Millisecond {
		t.Errorf("the slow call took %v, the target's longest %v", d, time.Duration(max))
	}
	if call.Time == nil {
		t.Fatalf("the slow call has no time split")
	}
	var lock *report.TraceWait
	for i := range call.Time.Blocked {
		if w := &call.Time.Blocked[i]; w.Reason == "sync.Mutex.Lock" {
			lock = w
		}
	}
	if lock == nil || time.Duration(lock.NS) < 700*time.Millisecond || lock.WokenByFunction != "main.janitor" {
		t.Errorf("the slow call's lock wait %+v, want most of it, ended by main.janitor", lock)
	}
	b, err := os.ReadFile(filepath.Join(rec.Dir, "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	handles := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tc report.TraceCall
		if err := json.Unmarshal([]byte(line), &tc); err != nil {
			t.Fatalf("calls.jsonl: %v: %q", err, line)
		}
		if tc.Function == "main.handle" {
			handles++
		}
	}
	if handles == 0 || rec.Trigger.Calls == 0 {
		t.Errorf("calls.jsonl holds %d main.handle calls, the trigger says %d root calls", handles, rec.Trigger.Calls)
	}
	var events []map[string]any
	if b, err := os.ReadFile(filepath.Join(rec.Dir, "perfetto.json")); err != nil || json.Unmarshal(b, &events) != nil || len(events) < handles {
		t.Errorf("perfetto.json: %v, %d events for %d calls", err, len(events), handles)
	}
}

// TestRecordFollowsRestart: when the recorded service exits and another
// process of it starts (a restart), the recording goes on with the new
// one, and a pile-up in it writes a record of it.
func TestRecordFollowsRestart(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process")
	bin := targets.Build(t, "lockserver", targets.BuildOptions{})
	first := targets.Start(t, bin, "-workers", "4", "-pause", "20ms")
	c, err := recorder.ParseCondition("count(sync.Mutex.Lock) > 3")
	if err != nil {
		t.Fatal(err)
	}
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	var next atomic.Int64 // the successor's pid, once started
	followed := make(chan int, 4)
	written := make(chan recorder.Record, 16)
	observed := make(chan report.RecordSummary, 1024)
	o := recorder.Options{PID: first.Pid, Out: t.TempDir(), Interval: 100 * time.Millisecond, Keep: 10 * time.Second, MaxSummaries: 1000,
		MaxOverhead: 0.05, When: []*recorder.Condition{c},
		Follow: func() (int, error) {
			if pid := int(next.Load()); pid != 0 {
				return pid, nil
			}
			return 0, errors.New("not yet")
		},
		Followed: func(pid int) { followed <- pid },
		Written:  func(r recorder.Record) { written <- r },
		Observed: func(s report.RecordSummary) { observed <- s }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res *recorder.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := recorder.Run(ctx, tracer, o)
		done <- outcome{res, err}
	}()
	for i := 0; i < 3; i++ {
		select {
		case <-observed:
		case out := <-done:
			t.Fatalf("the recording ended: %+v %v", out.res, out.err)
		case <-time.After(time.Minute):
			t.Fatal("no snapshot")
		}
	}
	first.Kill()
	second := targets.Start(t, bin, "-workers", "4", "-pause", "20ms")
	next.Store(int64(second.Pid))
	select {
	case pid := <-followed:
		if pid != second.Pid {
			t.Fatalf("followed pid %d, the new process is %d", pid, second.Pid)
		}
	case out := <-done:
		t.Fatalf("the recording ended at the exit: %+v %v", out.res, out.err)
	case <-time.After(time.Minute):
		t.Fatal("the new process was not followed")
	}
	if _, err := second.Do("stall 1s", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-written:
		if rec.Trigger.PID != second.Pid {
			t.Errorf("the record is of pid %d, the pile-up of %d", rec.Trigger.PID, second.Pid)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no record of the new process's pile-up")
	}
	cancel()
	out := <-done
	if out.err != nil || len(out.res.PIDs) != 2 || out.res.PIDs[0] != first.Pid || out.res.PIDs[1] != second.Pid {
		t.Errorf("result %+v, err %v", out.res, out.err)
	}
	targets.CheckNotStopped(t, second.Pid)
}

// TestRecordLeaks records a program that leaks on cue, with a condition
// on leaks judged every half second: nothing is written while it holds
// the leaks it started with, and once it leaks 5 more, one record whose
// snapshot marks leaked exactly the goroutines the program leaked.
func TestRecordLeaks(t *testing.T) {
	targets.RequirePrivilege(t, "stopping a process")
	p := targets.Start(t, targets.Build(t, "leaky", targets.BuildOptions{}), "-n", "2")
	gt := targets.ReadLeakyTruth(t, p)
	c, err := recorder.ParseCondition(fmt.Sprintf("leaks > %d", len(gt.Leaked)))
	if err != nil {
		t.Fatal(err)
	}
	tracer := ptrace.NewTracer()
	defer tracer.Close()
	written := make(chan recorder.Record, 16)
	observed := make(chan report.RecordSummary, 1024)
	o := recorder.Options{PID: p.Pid, Out: t.TempDir(), Interval: 100 * time.Millisecond, Keep: 10 * time.Second, MaxSummaries: 1000,
		MaxOverhead: 0.05, When: []*recorder.Condition{c}, LeaksInterval: 500 * time.Millisecond,
		Written:  func(r recorder.Record) { written <- r },
		Observed: func(s report.RecordSummary) { observed <- s }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := recorder.Run(ctx, tracer, o)
		done <- err
	}()
	// Two judgements of the leaks it started with: nothing written.
	for judged := 0; judged < 2; {
		select {
		case s := <-observed:
			if s.LeaksJudged {
				judged++
				if s.LeaksUndecided != "" || s.Leaked != len(gt.Leaked) {
					t.Fatalf("judged %d leaked (undecided %q), the program leaked %d", s.Leaked, s.LeaksUndecided, len(gt.Leaked))
				}
			}
		case r := <-written:
			t.Fatalf("a record before the program leaked more: %+v", r.Trigger)
		case err := <-done:
			t.Fatalf("the recording ended: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the leaks were not judged")
		}
	}
	if _, err := p.Do("grow 5", time.Minute); err != nil {
		t.Fatal(err)
	}
	var rec recorder.Record
	select {
	case rec = <-written:
	case err := <-done:
		t.Fatalf("the recording ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no record of the grown leaks")
	}
	want := len(gt.Leaked) + 5
	if rec.Trigger.Value != fmt.Sprintf("%d goroutines leaked", want) {
		t.Errorf("trigger %+v, want %d leaked", rec.Trigger, want)
	}
	var ps report.Ps
	b, err := os.ReadFile(filepath.Join(rec.Dir, "ps.json"))
	if err != nil || json.Unmarshal(b, &ps) != nil {
		t.Fatalf("ps.json: %v", err)
	}
	leaked, grown := 0, 0
	for _, g := range ps.Goroutines {
		if !g.Leaked {
			continue
		}
		leaked++
		if _, ok := gt.Leaked[g.Goid]; ok {
			continue
		}
		if g.CreatedBy == nil || g.CreatedBy.Function != "main.grow" {
			t.Errorf("goroutine %d (%s) marked leaked: neither one the program leaked at start nor one it grew", g.Goid, g.Function)
			continue
		}
		grown++
	}
	if leaked != want || grown != 5 {
		t.Errorf("ps.json marks %d leaked (%d grown), want %d (5 grown)", leaked, grown, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	targets.CheckNotStopped(t, p.Pid)
	if kids := targets.Children(p.Pid); len(kids) > 0 {
		t.Errorf("the program has children %v", kids)
	}
}
