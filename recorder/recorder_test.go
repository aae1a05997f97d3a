package recorder_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
