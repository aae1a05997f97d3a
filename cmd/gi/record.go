package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/recorder"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
)

type recordOptions struct {
	out         string
	when        []string
	interval    time.Duration
	keep        time.Duration
	cooldown    time.Duration
	maxRecords  int
	duration    time.Duration
	maxOverhead string
	trace       []string
	why         bool
	maxDisk     string
	leaksEvery  time.Duration
	core        bool
	replay      string
	target      targetFlags
}

func newRecordCommand(a *app) *cobra.Command {
	var o recordOptions
	cmd := &cobra.Command{
		Use:   "record <pid|name> --out DIR [--when COND]... | --ns-pid N --in PID --out DIR",
		Short: "A flight recorder: keep the last minute of a process's goroutines and write it when a condition starts to hold",
		Long: `record snapshots the process's goroutines every --interval (paced so that its
pauses take at most --max-overhead of the time), keeps a window (--keep) of
summaries of each (counts by state and by the go statement that created
them, the longest waits, memory against its cgroup's limit), and when a
--when condition starts to hold, or on SIGUSR1 to gi, writes a record: a
directory in --out named by the time and the cause, holding ps.json (the
snapshot at that moment, as gi ps --json prints it, with what each blocked
goroutine waits on and who holds the locks), summaries.jsonl (the window)
and trigger.json (what fired). With --trace, or a condition on a
function's calls, the functions are traced as gi trace traces them, and
each record also holds the window's calls (calls.jsonl, as gi trace --json
prints them, and perfetto.json); the snapshots' pauses and the probes then
each take at most half of --max-overhead. A condition writes again only after it has
stopped holding, and --cooldown after its last record at the earliest. It
records until Ctrl-C, --duration, --max-records, or the process's exit
(exit status 3); given a process by name, it waits for its restart and
records the new process.

Conditions (--when, repeatable):
  ` + strings.ReplaceAll(recorder.Grammar, "\n", "\n  "),
		Example: `  gi record 4242 --out /var/tmp/gi --when 'count(sync.Mutex.Lock) > 100'
  gi record myserver --out rec --when 'goroutines +20%/1m' --when 'blocked > 30s'
  gi record 4242 --out rec --when 'memory > 90%' --duration 1h
  gi record 4242 --out rec --why --when 'main.handle > 500ms' --trace 'main.*'   # a slow request, its tree and where its time went
  kill -USR1 $(pgrep -f 'gi record')              # a record now
  gi record --replay rec/20261128T101603.546Z-count-sync.Mutex.Lock-gt-100`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.replay != "" {
				if len(args) > 0 {
					return fmt.Errorf("--replay reads a record, not a process: drop %s", args[0])
				}
				return runReplay(cmd.OutOrStdout(), o.replay)
			}
			return runRecord(a, cmd.ErrOrStderr(), firstArg(args), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "write records in `DIR` (made if missing), a directory each")
	f.StringArrayVar(&o.when, "when", nil, "write a record when `COND` starts to hold (repeatable; see above)")
	f.DurationVar(&o.interval, "interval", recorder.DefaultInterval, "a snapshot every `D` at most")
	f.DurationVar(&o.keep, "keep", recorder.DefaultKeep, "keep the summaries of the last `D`")
	f.DurationVar(&o.cooldown, "cooldown", recorder.DefaultCooldown, "a condition writes again `D` after its last record at the earliest")
	f.IntVar(&o.maxRecords, "max-records", 0, "stop after `N` records (0: never)")
	f.DurationVar(&o.duration, "duration", 0, "stop after `D` (0: at Ctrl-C)")
	f.StringVar(&o.maxOverhead, "max-overhead", defaultMaxOverhead, "keep the share of the time the process is stopped for snapshots at or below `P` (the interval grows where pauses are long)")
	f.StringArrayVar(&o.trace, "trace", nil, "keep the calls of the functions `PATTERN` matches in the window, as gi trace traces them (repeatable)")
	f.StringVar(&o.replay, "replay", "", "print what the record in `DIR` holds (what fired, the window's summaries, the goroutines at that moment), without the process")
	f.BoolVar(&o.core, "core", false, "also write a core file of the process into each record (one more stop, right after the trigger's snapshot)")
	f.DurationVar(&o.leaksEvery, "leaks-interval", recorder.DefaultLeaksInterval, "with a condition on leaks, judge the leak rule (gi ps --leaks) every `D`")
	f.StringVar(&o.maxDisk, "max-disk", "1GiB", "write at most `SIZE` of records (KiB, MiB, GiB); past it, records are counted, not written")
	f.BoolVar(&o.why, "why", false, "split each traced call's time as gi trace --why does (probes on the scheduler)")
	addTargetFlags(f, &o.target)
	return cmd
}

func runRecord(a *app, stderr io.Writer, target string, o recordOptions) error {
	budget, err := parseBudget(o.maxOverhead)
	if err != nil {
		return err
	}
	if budget == 0 {
		return fmt.Errorf("--max-overhead %s: the recorder's snapshots need a budget (5%%)", o.maxOverhead)
	}
	ro := recorder.Options{Out: o.out, Interval: o.interval, Keep: o.keep, Cooldown: o.cooldown, MaxRecords: o.maxRecords,
		Duration: o.duration, MaxOverhead: budget, MaxSummaries: recorder.DefaultMaxSummaries, Trace: o.trace, Why: o.why,
		LeaksInterval: o.leaksEvery, Core: o.core}
	if ro.MaxDisk, err = parseSize(o.maxDisk); err != nil {
		return fmt.Errorf("--max-disk %q: %w", o.maxDisk, err)
	}
	if err := service.CheckPatterns(o.trace, nil); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	for _, w := range o.when {
		c, err := recorder.ParseCondition(w)
		if err != nil {
			return err
		}
		ro.When = append(ro.When, c)
	}
	if ro.PID, err = o.target.resolve(target); err != nil {
		return err
	}
	if _, numeric := strconv.Atoi(target); numeric != nil && target != "" {
		// Given by name: a restart of it is recorded on.
		ro.Follow = func() (int, error) { return proc.Find(target) }
		ro.Followed = func(pid int) {
			fmt.Fprintf(stderr, "gi: %s restarted: recording pid %d\n", target, pid)
		}
	}
	if err := ro.Check(); err != nil {
		return err
	}
	demand := make(chan struct{}, 1)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer func() {
		signal.Stop(usr1)
		close(usr1)
	}()
	go func() {
		for range usr1 {
			select {
			case demand <- struct{}{}:
			default: // one pending is enough
			}
		}
	}()
	ro.Demand = demand
	ro.Warned = func(w string) { fmt.Fprintf(stderr, "gi: warning: %s\n", w) }
	ro.Written = func(r recorder.Record) {
		fmt.Fprintf(stderr, "gi: record: %s (%s) → %s\n", r.Trigger.Condition, r.Trigger.Value, r.Dir)
	}
	var conds []string
	for _, c := range ro.When {
		conds = append(conds, c.Text)
	}
	what := "no condition (SIGUSR1 writes a record)"
	if len(conds) > 0 {
		what = "when " + strings.Join(conds, " or ") + " (SIGUSR1 too)"
	}
	ro.Started = func() {
		fmt.Fprintf(stderr, "gi: recording pid %d every %v, keeping %v, writing to %s %s; Ctrl-C to stop\n", ro.PID, ro.Interval, ro.Keep, ro.Out, what)
	}
	ctx, stop := a.traceContext()
	defer stop()
	started := time.Now()
	res, err := recorder.Run(ctx, a.tracer, ro)
	if err == nil && res.Snapshots == 0 && res.Exited {
		fmt.Fprintf(stderr, "gi: the process (pid %d) exited before its first snapshot\n", ro.PID)
		return exitError{code: exitTargetExited}
	}
	if res != nil && res.Snapshots > 0 {
		took := time.Since(started)
		share := 0.0
		if took > 0 {
			share = 100 * res.Paused.Seconds() / took.Seconds()
		}
		fmt.Fprintf(stderr, "gi: %d snapshots over %v, the process stopped %v in all (%.2f%% of the time); %d records (%s); %d summaries past the window dropped\n",
			res.Snapshots, took.Round(time.Millisecond), res.Paused.Round(time.Microsecond), share, len(res.Records), kib(int(res.Written)), res.Dropped)
		if res.ProbesCPU > 0 {
			fmt.Fprintf(stderr, "gi: the probes took %v, %.2f%% of the process's CPU time\n", res.Probes.Round(time.Microsecond), 100*res.Probes.Seconds()/res.ProbesCPU.Seconds())
		}
		if res.Skipped > 0 || res.Failed > 0 {
			fmt.Fprintf(stderr, "gi: warning: %d records not written past --max-disk, %d lost to write errors\n", res.Skipped, res.Failed)
		}
		if err == nil && res.Exited {
			fmt.Fprintf(stderr, "gi: the recorded process (pid %d) exited\n", ro.PID)
			return exitError{code: exitTargetExited}
		}
	}
	return err
}

// parseSize reads a size in bytes: a number with an optional unit (B,
// KiB, MiB, GiB, TiB; K, M, G, T and KB, MB, GB, TB alike, as powers of
// 1024).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	if err != nil || v < 0 {
		return 0, errors.New("want a size: 500MiB, 2GiB")
	}
	unit := strings.ToUpper(strings.TrimSpace(t[i:]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	shift, ok := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	if !ok {
		return 0, errors.New("want a size: 500MiB, 2GiB")
	}
	n := v * float64(uint64(1)<<shift)
	if n >= 1<<62 {
		return 0, errors.New("too large")
	}
	return int64(n), nil
}

// runReplay prints what the record in dir holds.
func runReplay(out io.Writer, dir string) error {
	k, err := recorder.ReadRecord(dir)
	if err != nil {
		return err
	}
	t := k.Trigger
	fmt.Fprintf(out, "record of pid %d at %s: %s (%s): %s\n", t.PID, t.Time.UTC().Format("2006-01-02 15:04:05.000 UTC"), t.Condition, t.Value, t.Why)
	if c := t.Call; c != nil {
		fmt.Fprintf(out, "the call: %s on goroutine %d took %v%s\n", c.Function, c.Goid, time.Duration(c.DurationNS).Round(time.Microsecond), callSplit(c.Time))
	}
	fmt.Fprintf(out, "window: %d summaries over %v (%d dropped)", t.Summaries, time.Duration(t.KeptNS).Round(time.Millisecond), t.Dropped)
	if k.Calls > 0 {
		fmt.Fprintf(out, "; %d traced calls in calls.jsonl (%d root calls dropped)", k.Calls, t.CallsDropped)
	}
	if k.Perfetto != "" {
		fmt.Fprintf(out, "; %s opens in ui.perfetto.dev", k.Perfetto)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	tbl := newListing(out)
	tbl.Header("TIME", "GOROUTINES", "LONGEST WAIT", "STATES")
	tbl.Shrink("STATES")
	for _, s := range k.Summaries {
		var states []string
		for _, c := range s.States {
			states = append(states, fmt.Sprintf("%s %d", c.State, c.Count))
		}
		longest := ""
		if len(s.Longest) > 0 {
			l := s.Longest[0]
			longest = fmt.Sprintf("%v (goroutine %d)", time.Duration(l.WaitNS).Round(time.Millisecond), l.Goid)
		}
		tbl.Append([]string{s.Time.Local().Format("15:04:05.000"), strconv.Itoa(s.Goroutines), longest, strings.Join(states, ", ")})
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ngoroutines at the trigger (%s):\n", k.Ps.GoVersion)
	gl := newListing(out)
	gl.Header("GOID", "STATE", "WAIT", "FUNCTION", "LOCATION", "WAITING ON")
	gl.Shrink("WAITING ON", "FUNCTION")
	for _, g := range k.Ps.Goroutines {
		state := g.State
		if g.WaitReason != "" {
			state = g.WaitReason
		}
		wait := ""
		if g.WaitNS > 0 {
			wait = formatWait(time.Duration(g.WaitNS), true)
		}
		var on []string
		for _, o := range g.WaitingOn {
			on = append(on, waitObjectText(o))
		}
		gl.Append([]string{strconv.FormatUint(g.Goid, 10), state, wait, g.Function, fmt.Sprintf("%s:%d", inspect.ShortPath(g.File), g.Line), strings.Join(on, "; ")})
	}
	return gl.Render()
}

// callSplit says where a call's time went, as gi trace --why does: ",
// sync.Mutex.Lock 1.19s (ended by goroutine 18 main.janitor), on CPU
// 1ms"; "" without a split.
func callSplit(t *report.TraceTime) string {
	if t == nil {
		return ""
	}
	parts := []string{fmt.Sprintf("on CPU %v", time.Duration(t.OnCPUNS).Round(time.Microsecond))}
	if t.RunnableNS > 0 {
		parts = append(parts, fmt.Sprintf("runnable %v", time.Duration(t.RunnableNS).Round(time.Microsecond)))
	}
	for _, w := range t.Blocked {
		p := fmt.Sprintf("%s %v", w.Reason, time.Duration(w.NS).Round(time.Microsecond))
		if w.WokenBy != 0 {
			p += fmt.Sprintf(" (ended by goroutine %d %s)", w.WokenBy, w.WokenByFunction)
		}
		parts = append(parts, p)
	}
	return ": " + strings.Join(parts, ", ")
}

// waitObjectText names an object a goroutine waits on, from its JSON:
// "mutex main.mu (locked, 4 waiters, held by goroutine 18)".
func waitObjectText(o report.WaitObject) string {
	name := o.Name
	switch {
	case name == "" && o.Type != "":
		name = o.Type
	case name == "":
		name = o.Addr
	}
	var attrs []string
	if o.Locked != nil && *o.Locked {
		attrs = append(attrs, "locked")
	}
	if o.Waiters != nil {
		attrs = append(attrs, fmt.Sprintf("%d waiters", *o.Waiters))
	}
	for _, h := range o.Holders {
		attrs = append(attrs, fmt.Sprintf("held by goroutine %d at %s", h.Goid, h.Function))
	}
	if o.Path != "" {
		name += " " + o.Path
	}
	if o.Remote != "" {
		name += " " + o.Local + " → " + o.Remote
	}
	s := o.Kind + " " + name
	if len(attrs) > 0 {
		s += " (" + strings.Join(attrs, ", ") + ")"
	}
	return s
}
