// Package recorder is gi record: a flight recorder run from outside the
// process. It snapshots the process's goroutines at an interval paced to
// a budget, keeps a window of summaries (counts by state and creation
// site, the longest waits, memory against the cgroup's limit), judges the
// --when conditions on them after each snapshot, and when one starts to
// hold (or on demand), writes a record: the snapshot at that moment as
// gi ps --json prints it, the window's summaries and what fired. It calls
// gi's operations through the service layer.
package recorder

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/leak"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
	"github.com/gi-debug/gi/trace"
)

// Options say what gi record records and when it writes.
type Options struct {
	// PID is the process recorded.
	PID int
	// Out is the directory records are written in, one directory each.
	Out string
	// Interval is the time between snapshots, at least; MaxOverhead the
	// share of the wall time the process may spend stopped (the period
	// grows to pause/MaxOverhead when the pauses are long).
	Interval    time.Duration
	MaxOverhead float64
	// Keep is the window of summaries kept; MaxSummaries bounds their
	// number (the oldest dropped first).
	Keep         time.Duration
	MaxSummaries int
	// When are the conditions that write a record when they start to
	// hold; each writes again only once it has stopped holding, and
	// Cooldown after its last record at the earliest.
	When     []*Condition
	Cooldown time.Duration
	// MaxRecords ends the recording after that many records (0: never);
	// Duration after that long (0: when ctx is done).
	MaxRecords int
	Duration   time.Duration
	// MaxDisk bounds the bytes the recording writes (DefaultMaxDisk when
	// 0): past it, records are counted, not written.
	MaxDisk int64
	// Core also writes a core file of the process into each record
	// (core), from one more stop right after the trigger's snapshot.
	Core bool
	// LeaksInterval is how often, with a condition on leaks, a snapshot
	// judges the leak rule (gi ps --leaks: a frozen copy of the process
	// walked) rather than listing alone (DefaultLeaksInterval when 0).
	LeaksInterval time.Duration
	// Demand writes a record, cause "on demand", for each value received
	// (SIGUSR1).
	Demand <-chan struct{}
	// Trace are patterns of functions whose calls the window keeps, as
	// gi trace traces them (the functions conditions on calls name are
	// traced too); Why splits each call's time; MaxCalls bounds the root
	// calls kept (DefaultMaxCalls). With a trace, the snapshots' pauses
	// and the probes each take at most half of MaxOverhead.
	Trace    []string
	Why      bool
	MaxCalls int
	// ProbeOverhead, if set, is the probes' own budget instead of half
	// of MaxOverhead (a share of the process's CPU time); negative: no
	// bound, every call traced whole.
	ProbeOverhead float64
	// Started, if set, is called once the conditions are checked and the
	// first snapshot taken; Written after each record is written, and
	// Observed with the summary of each snapshot (a status line).
	Started  func()
	Written  func(Record)
	Observed func(report.RecordSummary)
	// Follow, if set, finds the process to record once the one recorded
	// has exited (a restart: the same name); the recording then goes on
	// with it, and Followed is told its pid.
	Follow   func() (int, error)
	Followed func(pid int)
	// Warned, if set, is told what the recording does without: the
	// trace's warnings, and conditions on calls of functions the budget
	// traces in sampling windows (which see no call longer than a
	// window).
	Warned func(string)
}

// Defaults of Options.
const (
	DefaultInterval     = time.Second
	DefaultKeep         = time.Minute
	DefaultMaxSummaries = 3600
	DefaultCooldown     = 10 * time.Second
	DefaultMaxDisk      = 1 << 30
	// DefaultLeaksInterval is how often a condition on leaks is judged.
	DefaultLeaksInterval = 30 * time.Second
)

// Record is one record written.
type Record struct {
	Dir     string
	Trigger report.RecordTrigger
}

// Result is what a recording did.
type Result struct {
	// Snapshots were taken, Paused the process in all, Records written.
	Snapshots int
	Paused    time.Duration
	Records   []Record
	// Dropped counts the summaries the window's bound dropped.
	Dropped int
	// Written is the bytes of the records written; Skipped counts the
	// records not written past MaxDisk, Failed those a write error lost
	// (a full disk: each said through Warned, the recording goes on).
	Written         int64
	Skipped, Failed int
	// Probes is the time the probes of the trace took from the
	// processes, ProbesCPU the processes' CPU time meanwhile (0 without a
	// trace).
	Probes, ProbesCPU time.Duration
	// Exited says the process exited (the recording's end); PIDs are
	// the processes recorded, the first first (Follow).
	Exited bool
	PIDs   []int
}

// Check says whether o can record, before any process is touched: the
// numbers in range, and Out a directory gi can write in (made if
// missing).
func (o *Options) Check() error {
	switch {
	case o.PID <= 0:
		return fmt.Errorf("no process: pid %d", o.PID)
	case o.Interval <= 0:
		return fmt.Errorf("--interval %v: want a positive duration", o.Interval)
	case o.Keep < o.Interval:
		return fmt.Errorf("--keep %v: want at least the interval (%v)", o.Keep, o.Interval)
	case o.MaxOverhead <= 0 || o.MaxOverhead >= 1:
		return fmt.Errorf("--max-overhead %g%%: the recorder's snapshots need a budget from 0 to 100%%", 100*o.MaxOverhead)
	case o.MaxSummaries <= 0:
		return fmt.Errorf("at most %d summaries: want a positive bound", o.MaxSummaries)
	case o.Cooldown < 0 || o.Duration < 0 || o.MaxRecords < 0 || o.MaxDisk < 0 || o.LeaksInterval < 0:
		return errors.New("--cooldown, --duration, --max-records, --max-disk and --leaks-interval cannot be negative")
	case o.Out == "":
		return errors.New("--out DIR: say where records go")
	}
	if o.Why && len(o.traced()) == 0 {
		return errors.New("--why splits the traced calls' time: give --trace PATTERN or a condition on a function's calls")
	}
	for _, c := range o.When {
		if span := c.Span(); span > time.Duration(o.MaxSummaries)*o.Interval {
			return fmt.Errorf("--when %q: looks back %v, more than the %d summaries kept span at one per %v", c.Text, span, o.MaxSummaries, o.Interval)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", o.Out, err)
	}
	st, err := os.Stat(o.Out)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("--out %s: not a directory", o.Out)
	}
	probe := filepath.Join(o.Out, ".gi-record-probe")
	if err := outfile.Probe(probe); err != nil {
		return fmt.Errorf("--out %s: cannot write there: %w", o.Out, err)
	}
	return nil
}

// Run records process o.PID until ctx is done, o.Duration has passed,
// o.MaxRecords were written, or the process exits (Result.Exited). The
// tracer stops the process for each snapshot.
func Run(ctx context.Context, tracer *ptrace.Tracer, o Options) (*Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	r := &run{o: o, res: &Result{}, active: make([]bool, len(o.When)), last: make([]time.Time, len(o.When)), started: time.Now()}
	var end <-chan time.Time
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		end = t.C
	}
	for {
		r.res.PIDs = append(r.res.PIDs, r.o.PID)
		err := r.record(ctx, tracer, end)
		if err != nil || !r.res.Exited || o.Follow == nil || ctx.Err() != nil {
			if err != nil && len(r.res.PIDs) == 1 && r.res.Snapshots == 0 {
				return nil, err // refused before anything was recorded
			}
			return r.res, err
		}
		pid, err := r.successor(ctx, end)
		if pid == 0 {
			return r.res, err
		}
		// A new process: nothing of the old one judges it.
		r.o.PID, r.blocked, r.res.Exited = pid, nil, false
		r.history, r.leaksAt = nil, time.Time{}
		clear(r.active)
		if o.Followed != nil {
			o.Followed(pid)
		}
	}
}

// successor waits for the process Follow finds, polling at the
// interval; 0 when ctx is done or the recording's end comes first.
func (r *run) successor(ctx context.Context, end <-chan time.Time) (int, error) {
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
	for {
		if pid, err := r.o.Follow(); err == nil && pid != r.o.PID && pid > 0 {
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case <-end:
			return 0, nil
		case <-tick.C:
		}
	}
}

// record records process r.o.PID until ctx is done, end comes, the
// records are all written, or the process exits (r.res.Exited).
func (r *run) record(ctx context.Context, tracer *ptrace.Tracer, end <-chan time.Time) error {
	o := r.o
	w, err := service.OpenWatch(tracer, service.TopRequest{PID: o.PID})
	if err != nil {
		if errors.Is(err, proc.ErrNoSuchProcess) && len(r.res.PIDs) > 1 {
			r.res.Exited = true // gone again before its first snapshot
			return nil
		}
		return err
	}
	defer w.Close()
	// The conditions' states are checked before the process is stopped.
	if err := checkStates(o.When, w.States(), w.GoVersion()); err != nil {
		return err
	}
	budget := o.MaxOverhead
	var calls *callWindow
	if patterns := o.traced(); len(patterns) > 0 {
		budget = o.MaxOverhead / 2
		probes := budget
		switch {
		case o.ProbeOverhead > 0:
			probes = o.ProbeOverhead
		case o.ProbeOverhead < 0:
			probes = 0 // no bound
		}
		tr, err := service.StartTrace(service.TraceRequest{PID: o.PID, Include: patterns, Args: true, StringSize: trace.DefaultStringSize,
			MaxOverhead: probes, Why: o.Why})
		if err != nil {
			return fmt.Errorf("the recorder's trace of process %d: %w", o.PID, err)
		}
		defer tr.Close()
		r.tracing = tr
		o.warnSampled(tr)
		calls = newCallWindow(o.Keep, cmp.Or(o.MaxCalls, DefaultMaxCalls), trace.NewClock(), tr.Symbols(), o.When)
		traceCtx, stopTrace := context.WithCancel(ctx)
		traced := make(chan *service.TraceResult, 1)
		go func() {
			res := tr.Run(traceCtx, calls.handlers())
			if res.Err != nil {
				r.warn(fmt.Sprintf("the recorder's trace of process %d ended: %v; conditions on calls are no longer judged", o.PID, res.Err))
			}
			traced <- res
		}()
		defer func() {
			// What the probes took, read before the run ends: it takes
			// them out.
			if ov, err := tr.Overhead(); err == nil {
				r.res.Probes += ov.Probes
				r.res.ProbesCPU += ov.TargetCPU
			}
			r.tracing = nil
			stopTrace()
			<-traced
		}()
	}
	r.calls, r.watch = calls, w
	if err := r.refresh(w); err != nil {
		if errors.Is(err, proc.ErrNoSuchProcess) {
			r.res.Exited = true
			return nil
		}
		return err
	}
	if o.Started != nil && len(r.res.PIDs) == 1 {
		o.Started()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	demanded := false
	var slow []slowCall // calls that fired a condition, written with the next snapshot
	var slowCalls <-chan slowCall
	if calls != nil {
		slowCalls = calls.slow
	}
	for {
		snap := w.Snapshot()
		r.observe(snap)
		if err := r.judge(snap); err != nil {
			return err
		}
		if demanded {
			demanded = false
			if err := r.write(snap, "on demand", "SIGUSR1", "asked for", nil); err != nil {
				return err
			}
		}
		for _, sc := range slow {
			if err := r.writeSlow(snap, sc); err != nil {
				return err
			}
		}
		slow = slow[:0]
		if o.MaxRecords > 0 && len(r.res.Records) >= o.MaxRecords {
			return nil
		}
		// The next snapshot: an interval on, or later where the pause
		// would take more than the budget's share; on demand sooner,
		// but never before the budget allows.
		paced := time.Duration(float64(snap.Pause) / budget)
		timer.Reset(max(o.Interval, paced))
		soon := false
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-end:
				return nil
			case <-o.Demand:
				demanded, soon = true, true
				break wait
			case sc := <-slowCalls:
				if r.cooling(sc) {
					continue // a storm writes once per cool-down
				}
				slow, soon = append(slow, sc), true
				break wait
			case <-timer.C:
				break wait
			}
		}
		if soon {
			if !timer.Stop() {
				<-timer.C
			}
			if wait := paced - time.Since(snap.Taken); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return nil
				case <-end:
					return nil
				case <-timer.C:
				}
			}
		}
		if err := r.refresh(w); err != nil {
			if errors.Is(err, proc.ErrNoSuchProcess) {
				r.res.Exited = true
				return nil
			}
			return err
		}
	}
}

// warnSampled tells Warned the trace's warnings, and each condition on
// calls whose function the budget traces in sampling windows.
func (o *Options) warnSampled(tr *service.Tracing) {
	if o.Warned == nil {
		return
	}
	for _, w := range tr.Started.Warnings {
		o.Warned(w.Message)
	}
	for _, c := range o.When {
		for _, f := range tr.Started.Functions {
			if f.Name == c.Function() && f.Sampled {
				o.Warned(fmt.Sprintf("--when %q: %s is traced in sampling windows under the budget: a call longer than a window is not seen (raise --max-overhead to trace it whole: the probes get half of it)", c.Text, f.Name))
			}
		}
	}
}

// traced returns the patterns the recorder traces: Trace's, and the
// functions its conditions on calls name.
func (o *Options) traced() []string {
	patterns := slices.Clone(o.Trace)
	for _, c := range o.When {
		if fn := c.Function(); fn != "" && !slices.Contains(patterns, fn) {
			patterns = append(patterns, fn)
		}
	}
	return patterns
}

// checkStates gives each count(STATE) condition the binary's spelling of
// its state, and fails on a state the binary's Go release has none of.
func checkStates(when []*Condition, states []string, goVersion string) error {
	for _, c := range when {
		if c.kind != stateCount {
			continue
		}
		found := false
		for _, s := range states {
			if strings.EqualFold(s, c.state) {
				c.state, found = s, true
				break
			}
		}
		if !found {
			return fmt.Errorf("--when %q: no goroutine of %s can be in state %q; it has: %s", c.Text, goVersion, c.state, strings.Join(states, ", "))
		}
	}
	return nil
}

// run is one recording's state.
type run struct {
	o       Options
	res     *Result
	history []report.RecordSummary
	// active says each condition held at the last snapshot; last is
	// when it last wrote a record.
	active []bool
	last   []time.Time
	// blocked are the goroutines blocked at the last snapshot, each in
	// the wait the recorder first saw it in, and when.
	blocked map[uint64]blockedSince
	// calls is the window of traced calls (nil: nothing traced), and
	// tracing the trace filling it.
	calls   *callWindow
	tracing *service.Tracing
	// watch is the process's (Options.Core writes its cores).
	watch *service.Watch
	// started is when the recording began.
	started time.Time
	// leaksAt is when the leak rule was last judged, verdict what it
	// found, for the next summary.
	leaksAt time.Time
	verdict *service.LeakVerdict
}

// blockedSince is a goroutine blocked as the recorder first saw it in
// its wait, and when.
type blockedSince struct {
	g     *inspect.Goroutine
	since time.Time
}

// waited notes the goroutines of snap that are blocked and returns how
// long each has been: what the runtime recorded (g.waitsince, stamped at
// garbage collections), or at least since the recorder first saw it in
// the same wait (inspect.Unmoved: gi ps --since's rule), whichever is
// longer.
func (r *run) waited(snap *inspect.Snapshot) func(*inspect.Goroutine) time.Duration {
	now := map[uint64]blockedSince{}
	for _, g := range snap.Goroutines {
		if g.System || g.WaitReason == "" {
			continue
		}
		b := blockedSince{g: g, since: snap.Taken}
		if prev, ok := r.blocked[g.ID]; ok && inspect.Unmoved(prev.g, g) {
			b.since = prev.since
		}
		now[g.ID] = b
	}
	r.blocked = now
	return func(g *inspect.Goroutine) time.Duration {
		var w time.Duration
		if g.WaitKnown {
			w = g.Wait
		}
		if b, ok := now[g.ID]; ok {
			w = max(w, snap.Taken.Sub(b.since))
		}
		return w
	}
}

// observe adds the summary of snap to the window.
func (r *run) observe(snap *inspect.Snapshot) {
	r.res.Snapshots++
	r.res.Paused += snap.Pause
	var usage, limit int64
	if cgs, err := proc.MemoryCgroups(r.o.PID); err == nil {
		if _, c := proc.MemoryHeadroom(cgs); c != nil {
			usage, limit = c.Usage, c.Limit
		}
	}
	sum := report.NewRecordSummary(snap, usage, limit, r.waited(snap))
	if r.calls != nil {
		sum.Latencies = r.calls.latencies()
	}
	if v := r.verdict; v != nil {
		r.verdict = nil
		sum.LeaksJudged, sum.Leaked, sum.LeaksUndecided = true, len(v.Leaked), v.Undecided
	}
	r.history = append(r.history, sum)
	if r.o.Observed != nil {
		r.o.Observed(r.history[len(r.history)-1])
	}
	// The window: what Keep spans (and what the conditions look back
	// on), at most MaxSummaries.
	span := r.o.Keep
	for _, c := range r.o.When {
		span = max(span, c.Span())
	}
	now := snap.Taken
	// The oldest kept is the newest at least span old: what a growth
	// over span compares with.
	drop := 0
	for drop < len(r.history)-1 && (now.Sub(r.history[drop+1].Time) >= span || len(r.history)-drop > r.o.MaxSummaries) {
		drop++
	}
	if drop > 0 {
		r.res.Dropped += drop
		r.history = append(r.history[:0], r.history[drop:]...)
	}
}

// judge writes a record for each condition that starts to hold.
func (r *run) judge(snap *inspect.Snapshot) error {
	for i, c := range r.o.When {
		if c.OnCall() || !c.Judged(r.history) {
			continue // judged on each call as it ends; or no data to judge on
		}
		holds, value := c.Eval(r.history)
		was := r.active[i]
		r.active[i] = holds
		if !holds || was {
			continue
		}
		if !r.last[i].IsZero() && snap.Taken.Sub(r.last[i]) < r.o.Cooldown {
			// Within the cool-down: written once it is over, if it
			// still holds then.
			r.active[i] = false
			continue
		}
		r.last[i] = snap.Taken
		if err := r.write(snap, c.Text, value, "it started to hold", nil); err != nil {
			return err
		}
		if r.o.MaxRecords > 0 && len(r.res.Records) >= r.o.MaxRecords {
			return nil
		}
	}
	return nil
}

// refresh takes the next snapshot: one judging the leak rule when a
// condition needs it and LeaksInterval has passed since the last, else a
// listing.
func (r *run) refresh(w *service.Watch) error {
	if !slices.ContainsFunc(r.o.When, (*Condition).OnLeaks) || time.Since(r.leaksAt) < cmp.Or(r.o.LeaksInterval, DefaultLeaksInterval) {
		return w.Refresh()
	}
	r.leaksAt = time.Now()
	v, err := w.RefreshLeaks(leak.Options{})
	if errors.Is(err, proc.ErrNoSuchProcess) {
		return err
	}
	if err != nil {
		// A copy that died, say: this judgement is lost, not the
		// recording.
		r.warn(fmt.Sprintf("the leak rule could not be judged: %v", err))
		return w.Refresh()
	}
	r.verdict = v
	return nil
}

// cooling says whether the condition sc fired is in its cool-down.
func (r *run) cooling(sc slowCall) bool {
	return !r.last[sc.cond].IsZero() && sc.at.Sub(r.last[sc.cond]) < r.o.Cooldown
}

// writeSlow writes the record of a call that fired a condition on calls,
// unless the condition is in its cool-down.
func (r *run) writeSlow(snap *inspect.Snapshot, sc slowCall) error {
	if r.cooling(sc) {
		return nil
	}
	r.last[sc.cond] = sc.at
	return r.write(snap, r.o.When[sc.cond].Text, sc.value+" on goroutine "+strconv.FormatUint(sc.call.Goid, 10), "the call ended", &sc.call)
}

// write writes a record of snap, cause the condition that fired (call,
// for a condition on calls, the call that fired it).
func (r *run) write(snap *inspect.Snapshot, cause, value, why string, call *report.TraceCall) error {
	if r.o.MaxRecords > 0 && len(r.res.Records) >= r.o.MaxRecords {
		return nil
	}
	if r.res.Written >= cmp.Or(r.o.MaxDisk, DefaultMaxDisk) {
		r.res.Skipped++
		if r.res.Skipped == 1 {
			r.warn(fmt.Sprintf("--max-disk %d MiB reached: records are counted, no longer written (%s)", cmp.Or(r.o.MaxDisk, DefaultMaxDisk)>>20, cause))
		}
		return nil
	}
	// A new directory: a name someone planted (a link) is never
	// followed; a name taken gets a number.
	base := filepath.Join(r.o.Out, snap.Taken.UTC().Format("20060102T150405.000Z")+"-"+slug(cause))
	dir := base
	for n := 2; ; n++ {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || n > 100 {
			r.res.Failed++
			r.warn(fmt.Sprintf("record %s (%s) not written: %v; recording goes on", dir, cause, err))
			return nil
		}
		dir = fmt.Sprintf("%s-%d", base, n)
	}
	var gs []*inspect.Goroutine
	for _, g := range snap.Goroutines {
		if !g.System {
			gs = append(gs, g)
		}
	}
	trig := report.RecordTrigger{Condition: cause, Value: value, Why: why, Time: snap.Taken, PID: r.o.PID,
		Summaries: len(r.history), Dropped: r.res.Dropped, Call: call, Cost: r.cost()}
	var roots []keptCall
	if r.calls != nil {
		roots, trig.CallsDropped = r.calls.kept()
		trig.Calls = len(roots)
	}
	if n := len(r.history); n > 0 {
		trig.KeptNS = r.history[n-1].Time.Sub(r.history[0].Time).Nanoseconds()
	}
	files := []struct {
		name  string
		write func(*bufio.Writer) error
	}{
		{"ps.json", func(b *bufio.Writer) error { return report.Write(b, report.NewPs(snap, gs, false, nil)) }},
		{"summaries.jsonl", func(b *bufio.Writer) error {
			enc := json.NewEncoder(b)
			for i := range r.history {
				if err := enc.Encode(&r.history[i]); err != nil {
					return err
				}
			}
			return nil
		}},
		{"trigger.json", func(b *bufio.Writer) error { return report.Write(b, trig) }},
	}
	if r.calls != nil {
		files = append(files, []struct {
			name  string
			write func(*bufio.Writer) error
		}{
			{"calls.jsonl", func(b *bufio.Writer) error { return r.calls.writeJSONLines(b, roots) }},
			{"perfetto.json", func(b *bufio.Writer) error { return r.calls.writePerfetto(b, roots) }},
		}...)
	}
	if r.o.Core && r.watch != nil {
		files = append(files, struct {
			name  string
			write func(*bufio.Writer) error
		}{"core", nil})
	}
	var size int64
	for _, f := range files {
		if f.name == "core" {
			// One more stop: the core holds the process as it was right
			// after the trigger's snapshot.
			written, err := r.watch.RefreshCore(filepath.Join(dir, "core"))
			if err != nil {
				r.warn(fmt.Sprintf("record %s: no core: %v", dir, err))
				continue
			}
			r.res.Snapshots++
			r.res.Paused += r.watch.Snapshot().Pause
			size += written.Memory
			continue
		}
		n, err := writeFile(filepath.Join(dir, f.name), f.write)
		if err != nil {
			// A full disk, say: nothing half-written is left.
			os.RemoveAll(dir)
			r.res.Failed++
			r.warn(fmt.Sprintf("record %s (%s) not written: %v; recording goes on", dir, cause, err))
			return nil
		}
		size += n
	}
	r.res.Written += size
	rec := Record{Dir: dir, Trigger: trig}
	r.res.Records = append(r.res.Records, rec)
	if r.o.Written != nil {
		r.o.Written(rec)
	}
	return nil
}

// cost is what the recording has cost the process so far.
func (r *run) cost() report.RecordCost {
	c := report.RecordCost{Snapshots: r.res.Snapshots, PausedNS: r.res.Paused.Nanoseconds(), ProbesNS: r.res.Probes.Nanoseconds()}
	if took := time.Since(r.started); took > 0 {
		c.PauseShare = r.res.Paused.Seconds() / took.Seconds()
	}
	probes, cpu := r.res.Probes, r.res.ProbesCPU
	if r.tracing != nil {
		if ov, err := r.tracing.Overhead(); err == nil {
			probes, cpu = probes+ov.Probes, cpu+ov.TargetCPU
		}
	}
	c.ProbesNS = probes.Nanoseconds()
	if cpu > 0 {
		c.ProbesShare = min(1, probes.Seconds()/cpu.Seconds())
	}
	return c
}

// warn tells Warned w, if it is set.
func (r *run) warn(w string) {
	if r.o.Warned != nil {
		r.o.Warned(w)
	}
}

// writeFile writes a file whole, or leaves nothing under its name; it
// returns the bytes written.
func writeFile(path string, write func(*bufio.Writer) error) (int64, error) {
	f, err := outfile.Create(path, 0o600)
	if err != nil {
		return 0, err
	}
	b := bufio.NewWriter(f)
	if err := write(b); err != nil {
		f.Abort()
		return 0, err
	}
	if err := b.Flush(); err != nil {
		f.Abort()
		return 0, err
	}
	n, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		f.Abort()
		return 0, err
	}
	return n, f.Commit()
}

// slug makes a condition a file name's part: letters, digits and dots
// kept, the rest one dash, at most 48 bytes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.':
			b.WriteRune(c)
			dash = false
		case c == '>':
			if !dash {
				b.WriteByte('-')
			}
			b.WriteString("gt-")
			dash = true
		case c == '%':
			b.WriteString("pct")
			dash = false
		default:
			if !dash {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 48 {
		out = strings.TrimRight(out[:48], "-")
	}
	if out == "" {
		out = "record"
	}
	return out
}
