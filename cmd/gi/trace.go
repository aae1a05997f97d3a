package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
	"github.com/gi-debug/gi/trace"
)

type traceOptions struct {
	exclude     []string
	duration    time.Duration
	stats       bool
	interval    time.Duration
	minDuration time.Duration
	goids       []uint
	json        bool
	perfetto    string
	pprofFile   string
	otlp        string
	otlpHeaders []string
	service     string
	perfEvents  bool
	args        bool
	stringSize  int
	where       []string
	maxOverhead string
	why         bool
	target      targetFlags
}

// defaultMaxOverhead is gi trace's overhead budget unless told otherwise:
// on-demand tracing of a production process, for seconds to minutes, that
// a careful engineer lets take a twentieth of the process's CPU time at
// most (--max-overhead 1% for a stricter bound, none for none).
const defaultMaxOverhead = "5%"

// addBudgetFlag adds --max-overhead to f, set in *v; more tells when it
// applies.
func addBudgetFlag(f *pflag.FlagSet, v *string, more string) {
	f.StringVar(v, "max-overhead", defaultMaxOverhead, "keep the share of the target's CPU time the probes take at or below `P` (5%, 1%): the costliest functions are traced in sampling windows, each call whole or not at all; none for no bound"+more)
}

// outputBacklog is how much of gi trace's output (stdout, and each
// export file) waits in memory for a slow reader before whole calls,
// trees or tables are dropped: trace.DefaultOutputBacklog, or
// GI_OUTPUT_BACKLOG bytes (for tests).
func outputBacklog() int {
	if n, err := strconv.Atoi(os.Getenv("GI_OUTPUT_BACKLOG")); err == nil && n > 0 {
		return n
	}
	return trace.DefaultOutputBacklog
}

// kib says n bytes in KiB.
func kib(n int) string {
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// parseBudget reads --max-overhead: a percentage ("5%", "0.5%"), or
// "none" or "0" for no budget (0).
func parseBudget(s string) (float64, error) {
	if s == "none" || s == "0" {
		return 0, nil
	}
	v, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("--max-overhead %q: want a percentage (5%%) or none", s)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f >= 100 || math.IsNaN(f) {
		return 0, fmt.Errorf("--max-overhead %q: want a percentage from 0 to 100 (5%%) or none", s)
	}
	return f / 100, nil
}

func newTraceCommand(a *app) *cobra.Command {
	var o traceOptions
	cmd := &cobra.Command{
		Use:   "trace <pid|name|binary> PATTERN... | --ns-pid N --in PID PATTERN...",
		Short: "Print per-goroutine call trees and latencies of functions, through eBPF uprobes",
		Long: `trace attaches uprobes at the entry and at every RET of the functions the
patterns match (shell wildcards over function names: 'main.*', 'net/http.(*conn).*')
and prints, per goroutine, the call tree of each root call as it returns, until
Ctrl-C or --duration. Functions without a RET (worker loops, functions that
always panic) are traced at entry only: their calls end when a panic or
Goexit unwinds them, or are printed at exit as still running, with their
time so far. Given a binary path instead of a pid, it traces every process
running that binary.`,
		Example: `  gi trace 4242 'main.*'                          # call trees of package main, until Ctrl-C
  gi trace --stats --duration 10s myserver 'main.(*Server).*'   # a latency table per method
  gi trace --min-duration 50ms --json 4242 'main.handle' 'main.query'   # slow requests only, one JSON line per call
  gi trace --otlp http://localhost:4318 4242 'main.*'   # spans to an OpenTelemetry collector
  gi trace --ns-pid 1 --in 8406 'main.*'          # pid 1 of the container that host pid 8406 is in
  kubectl debug -it mypod --target=app --image=gi --profile=sysadmin -- gi trace 1 'main.*'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, patterns := "", args
			if o.target.nsPid == 0 && o.target.in == 0 {
				target, patterns = args[0], args[1:]
			}
			if len(patterns) == 0 {
				return fmt.Errorf("no pattern: say which functions to trace, e.g. 'main.*'")
			}
			return runTrace(a, cmd.OutOrStdout(), cmd.ErrOrStderr(), target, patterns, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.exclude, "exclude", nil, "drop functions matching `PATTERN` (repeatable)")
	f.DurationVar(&o.duration, "duration", 0, "stop after `D` (e.g. 500ms, 5s)")
	f.BoolVar(&o.stats, "stats", false, "print a latency table per function instead of call trees")
	f.DurationVar(&o.interval, "interval", 0, "with --stats, also print the table every `D`")
	f.DurationVar(&o.minDuration, "min-duration", 0, "print a root call's tree only if it took at least `D`")
	f.UintSliceVar(&o.goids, "goid", nil, "only these goroutines (repeatable; filtered in the kernel)")
	f.BoolVar(&o.json, "json", false, "print one JSON line per completed call, one per call still running at exit, and a final summary")
	addBudgetFlag(f, &o.maxOverhead, "")
	f.BoolVar(&o.why, "why", false, "split each call's time into on CPU, runnable (waiting for the scheduler) and each wait, with its reason and the goroutine that ended it (probes on the scheduler: every goroutine switch of the process pays one)")
	f.StringVar(&o.perfetto, "perfetto", "", "also write the calls to `FILE` as trace-event JSON (Perfetto UI, chrome://tracing): a track per goroutine")
	f.StringVar(&o.pprofFile, "pprof", "", "also write a pprof profile of the time in the traced functions by call path to `FILE` (go tool pprof)")
	f.StringVar(&o.otlp, "otlp", "", "also send every call as an OpenTelemetry span over OTLP/HTTP to the collector at `URL` (http://host:4318)")
	f.StringArrayVar(&o.otlpHeaders, "otlp-header", nil, "add the header `K=V` to OTLP requests (repeatable; e.g. authorization)")
	f.StringVar(&o.service, "service", "", "service.name of the OTLP spans (default: the traced binary's name)")
	f.BoolVar(&o.args, "args", true, "show each call's arguments and results, read from the binary's DWARF (trees and --json)")
	f.IntVar(&o.stringSize, "string-size", trace.DefaultStringSize, fmt.Sprintf("bytes read per string argument or result, and per slice's elements (at most %d)", trace.MaxStringSize))
	f.StringArrayVar(&o.where, "where", nil, "only calls whose arguments match, filtered in the kernel: `'FUNC: ARG OP VALUE [&& ...]'` with ==, !=, <, > or =~ \"prefix*\" (repeatable)")
	f.BoolVar(&o.perfEvents, "perf-events", false, "attach one perf event per probe instead of uprobe_multi links")
	f.MarkHidden("perf-events")
	addTargetFlags(f, &o.target)
	return cmd
}

// traceTarget resolves the first argument: a binary path, or a pid or name.
func traceTarget(arg string) (pid int, path string, err error) {
	if strings.Contains(arg, "/") {
		st, err := os.Stat(arg)
		if err != nil {
			return 0, "", fmt.Errorf("binary %s: %w", arg, err)
		}
		if st.IsDir() {
			return 0, "", fmt.Errorf("%s is a directory, not a binary", arg)
		}
		return 0, arg, nil
	}
	pid, err = resolvePID(arg)
	return pid, "", err
}

func runTrace(a *app, stdout, stderr io.Writer, target string, patterns []string, o traceOptions) error {
	if err := o.checkDurations(); err != nil {
		return err
	}
	if o.interval > 0 && !o.stats {
		return errors.New("--interval needs --stats")
	}
	if err := o.checkExports(); err != nil {
		return err
	}
	budget, err := parseBudget(o.maxOverhead)
	if err != nil {
		return err
	}
	req := service.TraceRequest{Include: patterns, Exclude: o.exclude, Goids: toUint64s(o.goids), Where: o.where,
		Args: o.args && !o.stats, StringSize: o.stringSize, MaxOverhead: budget, Why: o.why, PerfEvents: o.perfEvents,
		Duration: o.duration, Interval: o.interval}
	if !o.stats && !o.json {
		// Trees are flushed to the reader on every tick.
		req.Interval = 200 * time.Millisecond
	}
	// Patterns and filters are refused before the target is looked for.
	if err := req.CheckSelection(); err != nil {
		return err
	}
	if target == "" {
		req.PID, err = o.target.resolve("")
	} else {
		req.PID, req.Path, err = traceTarget(target)
	}
	if err != nil {
		return err
	}
	if err := req.Check(); err != nil {
		return err
	}
	// Loading would fail with EPERM anyway; say what is needed first (root
	// in a container often lacks these capabilities).
	if !hasBPFCaps() {
		return trace.ErrBPFPermission
	}
	files, err := o.createExportFiles()
	if err != nil {
		return err
	}
	defer files.close()
	tr, err := service.StartTrace(req)
	if err != nil {
		return whereError(err)
	}
	// From here on a signal ends the trace instead of killing gi, so that
	// the statistics are printed and the probes detached.
	ctx, stop := a.traceContext()
	defer stop()
	// The probes are in: what is printed until the run keeps the budget
	// goes through a queue that never blocks (a paused terminal, a full
	// pipe on stderr), written out as the terminal takes it, and waited
	// for only once the probes are out (the defers run in reverse).
	startErr := trace.NewOutputQueue(stderr, 1<<20)
	startDone := false
	closeStart := func() {
		if !startDone {
			startDone = true
			startErr.Close()
		}
	}
	defer closeStart()
	defer tr.Close()

	st := tr.Started
	for _, w := range st.Warnings {
		fmt.Fprintf(startErr, "gi: warning: %s\n", w)
	}
	what := "pid " + pidText(st.PID, st.NSPID)
	if st.PID == 0 {
		what = "every process running " + req.Path
	}
	if len(st.EntryOnly) > 0 {
		fmt.Fprintf(startErr, "gi: entry only (no RET): %s: calls end when unwound, or are shown still running at exit\n", strings.Join(st.EntryOnly, ", "))
	}
	fmt.Fprintf(startErr, "gi: tracing %d functions (%d probes) in %s, attached in %v; Ctrl-C to stop\n",
		len(st.Functions), st.Probes, what, st.AttachTime.Round(time.Microsecond))
	if line := callRates(st.Rates); line != "" {
		fmt.Fprintf(startErr, "gi: calls before the trace: %s\n", line)
	}
	startErr.Flush()

	// The handlers run on the loop that drains the ring buffer and keeps
	// the budget: they print into a queue that never blocks, and a reader
	// that falls behind its backlog costs whole units of output (calls,
	// trees, tables), counted, never the target's pace.
	width := terminalWidth(stdout) // the tables fit the terminal
	out := trace.NewOutputQueue(stdout, outputBacklog())
	bw := bufio.NewWriterSize(out, 1<<16)
	defer func() {
		bw.Flush()
		out.Close()
	}()
	// printUnit prints one unit through bw, or drops it past the backlog.
	printUnit := func(print func()) {
		out.Print(func() {
			print()
			bw.Flush()
		})
	}
	unit := "calls"
	rootsSeen, rootsShown := 0, 0 // trees: root calls seen, and shown (--min-duration)
	sym := tr.Symbols()
	clock := trace.NewClock()
	stats := trace.NewStats()
	var hs trace.Handlers
	var jw *report.TraceWriter
	switch {
	case o.json:
		jw = report.NewTraceWriter(bw, sym, clock)
		hs.Call = func(h trace.Header, c *trace.Call) {
			printUnit(func() { jw.Call(trace.GoroutineKey{PID: h.PID, Goid: h.Goid}, c) })
		}
		// At exit, never dropped: the probes are gone before gi waits
		// for the reader.
		hs.Running = func(h trace.Header, open []*trace.Call) {
			jw.Running(trace.GoroutineKey{PID: h.PID, Goid: h.Goid}, open)
		}
	case o.stats:
		unit = "interval tables"
		hs.Call = func(_ trace.Header, c *trace.Call) { stats.Add(c) }
		hs.Tick = func() {
			printUnit(func() {
				fmt.Fprintf(bw, "%s\n", time.Now().Format("15:04:05"))
				writeStats(bw, width, stats, tr.Sampling())
				bw.WriteByte('\n')
			})
			out.Flush()
		}
	default:
		unit = "call trees"
		tp := &treePrinter{W: bw, Symbols: sym, Clock: clock, ShowPID: st.PID == 0}
		shown := func(root *trace.Call) bool { return time.Duration(root.Duration()) >= o.minDuration }
		hs.Root = func(h trace.Header, root *trace.Call) {
			rootsSeen++
			if shown(root) {
				rootsShown++
				printUnit(func() { tp.Print(h, root) })
			}
		}
		// At exit, the trees of calls still running (worker loops,
		// functions that never return), with their time so far.
		hs.Running = func(h trace.Header, open []*trace.Call) {
			if shown(open[0]) {
				tp.Print(h, open[0])
			}
		}
		hs.Tick = func() {
			bw.Flush()
			out.Flush()
		}
	}
	exports, err := openExports(o, files, clock, sym, serviceName(st.PID, st.Binary, o.service))
	if err != nil {
		return err
	}
	hs = exports.wrap(hs)
	// The run checks for its end (the duration, a signal) between two
	// reads of the ring buffer, and some reads (at each Tick, the last
	// one, with the probes still attached) last until the buffer is
	// empty: events coming faster than gi handles them keep it from ever
	// ending. So a run that has not ended traceGrace after it was to, and
	// still reads events, is cut short: gi exits, and the kernel detaches
	// the probes with its descriptors.
	var handled atomic.Uint64
	delay := testEventDelay()
	hs.Event = func(*trace.Event) {
		handled.Add(1)
		if delay > 0 {
			spin(delay)
		}
	}
	ended := a.watchEnd(ctx, o.duration, traceGrace, handled.Load, stderr)
	// Run detaches before it returns: from here on gi's output may take
	// as long as its reader does.
	res := tr.Run(ctx, hs)
	ended()
	closeErr := tr.Close()
	stop() // a signal while gi waits for its reader ends it at once
	closeStart()
	dropped := out.Dropped()
	if o.stats {
		writeStats(bw, width, stats, res.Sampling)
	}
	if err := exports.close(stderr, res.Sampling); err != nil && closeErr == nil {
		closeErr = err
	}
	if jw != nil {
		sum := report.TraceSummary{Events: res.Events, Lost: res.Lost, UnreadFloats: res.UnreadFloats, Dropped: dropped, Probes: st.Probes,
			AttachNS: st.AttachTime.Nanoseconds(), DetachNS: res.DetachTime.Nanoseconds()}
		if res.Overhead != nil {
			sum.Overhead = report.NewTraceOverhead(*res.Overhead)
		}
		sum.Sampling = report.NewTraceSampling(res.Sampling)
		jw.Summary(sum)
	}
	bw.Flush()
	if err := out.Close(); err != nil && closeErr == nil {
		closeErr = fmt.Errorf("write the output: %w", err)
	}
	fmt.Fprintf(stderr, "gi: %d events, %d lost, %d calls still running; detached in %v\n",
		res.Events, res.Lost, res.Running, res.DetachTime.Round(time.Microsecond))
	if ov := res.Overhead; ov != nil && ov.TargetCPU > 0 {
		line := ov.String()
		if _, worst, ok := ov.WorstThread(); ok {
			line += fmt.Sprintf("; %.2f%% of its busiest thread's", 100*worst)
		}
		fmt.Fprintf(stderr, "gi: overhead: %s\n", line)
	}
	if sm := res.Sampling; sm != nil && o.minDuration > 0 && len(sm.Functions) > 0 && unit == "call trees" {
		// A sampled trace sees only the calls of its windows: say how few
		// --min-duration chose among.
		fmt.Fprintf(stderr, "gi: --min-duration %v: %d of the %d root calls seen took that long; the sampling windows covered %.1f%% of the trace (--max-overhead none sees every call)\n",
			o.minDuration, rootsShown, rootsSeen, 100*sm.TracedShare())
	}
	writeSamplingSummary(stderr, res.Sampling)
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "gi: warning: %s\n", w)
	}
	if dropped > 0 {
		fmt.Fprintf(stderr, "gi: warning: the output was not read fast enough: %d %s dropped (past a backlog of %s, rather than slow the trace and the overhead budget)\n",
			dropped, unit, kib(outputBacklog()))
	}
	if res.Exited {
		// What was traced is printed; a script tells a cut trace from a
		// whole one by the exit status.
		fmt.Fprintf(stderr, "gi: the traced process (pid %s) exited %.1fs into the trace\n", pidText(st.PID, st.NSPID), res.Took.Seconds())
		return exitError{code: exitTargetExited}
	}
	if res.Err != nil {
		return res.Err
	}
	return closeErr
}

// writeSamplingSummary says what the sampling windows traced: per
// function sampled, the calls traced whole and the estimate of all; the
// nested calls missed between windows; what the windows cost or cut.
func writeSamplingSummary(w io.Writer, sm *trace.Sampling) {
	if sm == nil {
		return
	}
	for _, f := range sm.Functions {
		cut := ""
		if f.Cut > 0 {
			cut = fmt.Sprintf(" (%d more cut: open when their window closed, or ended unwound)", f.Cut)
		}
		fmt.Fprintf(w, "gi: sampled %s: %d calls traced whole%s in %d windows covering %.1f%% of the trace, about %.0f in all; %.0f calls/s before the trace\n",
			f.Func.Name, f.Calls, cut, sm.Windows, 100*sm.TracedShare(), sm.EstimatedCalls(f), f.Rate.PerSecond)
	}
	if sm.Missed > 0 || sm.MissedUnknown > 0 {
		fmt.Fprintf(w, "gi: calls traced whole missed about %d nested calls of sampled functions between the windows (%d of the estimates floors); %d calls no window covered\n",
			sm.Missed, sm.MissedFloors, sm.MissedUnknown)
	}
	if sm.Stalled > 0 {
		fmt.Fprintf(w, "gi: the windows' perf events (no uprobe_multi links) took %v to attach and detach, counted against the budget as lost to the traced code\n", sm.Stalled.Round(time.Millisecond))
	}
	if sm.Cut > 0 {
		fmt.Fprintf(w, "gi: %d sampled calls were still open when their window closed and are not shown (the closings waited up to %v for them)\n", sm.Cut, sm.Closing.Round(time.Millisecond))
	}
	if sm.SchedWindowed {
		fmt.Fprintf(w, "gi: --why: the scheduler's probes were attached in %d windows covering %.1f%% of the trace; %d calls they missed whole are not split, those they saw in part have the rest unknown\n",
			sm.Windows, 100*sm.TracedShare(), sm.Unsplit)
	}
	if sm.ExitWindowed {
		fmt.Fprintf(w, "gi: goroutine exits were seen only in the %d windows\n", sm.Windows)
	}
}

// exitTargetExited is gi trace's exit status when the traced process
// exited before the trace's end.
const exitTargetExited = 3

// checkDurations fails on a negative duration: --duration 0 traces until
// Ctrl-C, --interval 0 prints the table at the end only, --min-duration 0
// prints every tree.
func (o traceOptions) checkDurations() error {
	for _, d := range []struct {
		flag, zero string
		v          time.Duration
	}{{"duration", "until Ctrl-C", o.duration}, {"interval", "the table at the end only", o.interval}, {"min-duration", "every tree", o.minDuration}} {
		if d.v < 0 {
			return fmt.Errorf("--%s %v: want a duration of 0 (%s) or more", d.flag, d.v, d.zero)
		}
	}
	return nil
}

// traceGrace is how long a trace that is over may still read events before
// gi gives up on ending it cleanly.
const traceGrace = 5 * time.Second

// watchEnd makes sure a trace ends: once ctx is done or d (if positive)
// has passed, if the run has not ended (by calling the function returned)
// within grace, and handled, the count of events it has read, still grows
// (nil: in any case), it prints one line and exits, as a second Ctrl-C
// does; the kernel detaches the probes with gi's descriptors. A run that
// has stopped reading events (closing sampling windows, say) is left to
// end.
func (a *app) watchEnd(ctx context.Context, d, grace time.Duration, handled func() uint64, stderr io.Writer) (ended func()) {
	done := make(chan struct{})
	go func() {
		var deadline <-chan time.Time
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			deadline = t.C
		}
		why := ""
		select {
		case <-done:
			return
		case <-ctx.Done():
			why = "the signal"
		case <-deadline:
			why = "its end (" + d.String() + ")"
		}
		count := func() uint64 { return 0 }
		if handled != nil {
			count = handled
		}
		tick := time.NewTicker(grace)
		defer tick.Stop()
		for last := count(); ; {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			n := count()
			if handled != nil && n == last {
				continue
			}
			more := ""
			if handled != nil {
				more = fmt.Sprintf(": events came faster than gi could read them (%d more since), and it reads until the ring buffer is empty", n-last)
			}
			if a.beforeExit != nil {
				a.beforeExit()
			}
			fmt.Fprintf(stderr, "gi: the trace did not end within %v of %s%s; exiting (the kernel detaches the probes)\n", grace, why, more)
			a.tracer.ResumeAll()
			os.Exit(1)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// testEventDelay is how long gi trace spends on each event on top of its
// work, from GI_TEST_EVENT_DELAY (for tests: a reader slower than the
// probes fill the ring buffer); 0 when unset.
func testEventDelay() time.Duration {
	d, err := time.ParseDuration(os.Getenv("GI_TEST_EVENT_DELAY"))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// spin busies the thread for d: the cost of handling an event is CPU
// time, not a sleep.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// whereError names the --where flag in a filter's error, and
// --string-size where raising it is the remedy.
func whereError(err error) error {
	var fe *trace.FilterError
	if !errors.As(err, &fe) {
		return err
	}
	hint := ""
	if errors.Is(err, trace.ErrStringSize) {
		hint = " (--string-size)"
	}
	if fe.Func == "" {
		return fmt.Errorf("--where: %w%s", fe.Err, hint)
	}
	return fmt.Errorf("--where %s: %w%s", fe.Func, fe.Err, hint)
}

// hasBPFCaps reports whether gi has the capabilities gi trace needs; true
// when it cannot tell (the kernel then decides).
func hasBPFCaps() bool {
	has, ok := trace.HasBPFCapabilities()
	return has || !ok
}

// traceContext returns a context cancelled by SIGINT or SIGTERM while a trace
// runs; stop restores the default handling (resume and exit).
func (a *app) traceContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	a.setTraceCancel(cancel)
	return ctx, func() {
		a.setTraceCancel(nil)
		cancel()
	}
}

func toUint64s(in []uint) []uint64 {
	out := make([]uint64, len(in))
	for i, v := range in {
		out[i] = uint64(v)
	}
	return out
}

// callRates names the most called functions of rates with their call
// rates and the share of the process's CPU time tracing each whole would
// take; "" when none was called.
func callRates(rates []trace.CallRate) string {
	rates = slices.Clone(rates)
	slices.SortStableFunc(rates, func(a, b trace.CallRate) int { return cmp.Compare(b.PerSecond, a.PerSecond) })
	var parts []string
	for _, r := range rates {
		if r.PerSecond <= 0 || len(parts) == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f/s (%.2g%% traced whole)", r.Func.Name, r.PerSecond, 100*r.Cost))
	}
	if n := len(rates); len(parts) > 0 && n > len(parts) {
		parts = append(parts, fmt.Sprintf("… of %d counted", n))
	}
	return strings.Join(parts, ", ")
}
