package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gi-debug/gi/core"
	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/report"
	"github.com/gi-debug/gi/service"
)

type psOptions struct {
	stacks, group, json, all, allFrames bool
	objects                             bool
	leaks                               bool
	leakTrace                           bool
	leakMaxGrowth                       int // MiB; -1: no bound
	watch                               time.Duration
	watchCount                          int
	since                               string
	waits                               bool
	copyEarly                           bool
	pprofFile                           string
	graphFile                           string
	binary                              string // with a core file: its executable
	coreFile                            string // write a core of the live process
	coreAll                             bool
	state                               string
	match                               string
	minWait                             time.Duration
	trace                               time.Duration
	traceDepth                          int
	why                                 bool
	maxOverhead                         string
	target                              targetFlags
}

func newPsCommand(a *app) *cobra.Command {
	var o psOptions
	cmd := &cobra.Command{
		Use:   "ps <pid|name|core-file> | --ns-pid N --in PID",
		Short: "List every goroutine of a live Go process, or of a core file",
		Long: `ps stops the process for a few milliseconds, copies its goroutines, resumes it,
and lists them: id, state, how long each has waited, where it is and who created it.
Given a core file (the kernel's, gcore's), it lists the goroutines of the process
as the core holds them; the executable is found where the core says it was, or
given with --binary.`,
		Example: `  gi ps 4242                              # every goroutine of pid 4242
  gi ps --objects myserver                # by process name: the objects goroutines wait on, most waiters first
  gi ps --stacks --match 'main\.handle' 4242   # the runtime's dump format, one function's goroutines
  gi ps --trace 3s 4242                   # with the latency of the function each goroutine is in
  gi ps --ns-pid 1 --in 8406              # pid 1 of the container that host pid 8406 is in
  gi ps --binary ./server core.4242       # post-mortem: a core file, its executable given
  gi ps --core /tmp/core.4242 4242        # list, and write a core of what the listing read, in the same stop
  kubectl debug -it mypod --target=app --image=gi --profile=sysadmin -- gi ps 1`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPsDurations(cmd.Flags(), o); err != nil {
				return err
			}
			return runPs(a, cmd.OutOrStdout(), cmd.ErrOrStderr(), firstArg(args), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.stacks, "stacks", false, "print full stacks in the Go runtime's own dump format")
	f.BoolVar(&o.group, "group", false, "fold goroutines with the same state and stack")
	f.BoolVar(&o.json, "json", false, "print one JSON document")
	f.BoolVar(&o.objects, "objects", false, "list the objects goroutines wait on (channels, mutexes, ...), most waiters first")
	f.BoolVar(&o.leaks, "leaks", false, "find the leaked goroutines: blocked on channels and sync objects that nothing able to run can reach (the heap copied in the stop, or before it where the kernel tracks written pages, and walked after it)")
	f.BoolVar(&o.leakTrace, "leaks-trace", false, "with --leaks: say, on stderr, how each blocked goroutine found able to run is reached")
	f.MarkHidden("leaks-trace")
	f.IntVar(&o.leakMaxGrowth, "leaks-max-growth", 1024, "with --leaks: MiB of memory the process may fault in (counted by its minor faults) while gi reads the copy it made of itself (each page it writes meanwhile is copied); past it the copy is given up (-1: no bound)")
	f.DurationVar(&o.watch, "watch", 0, "take a snapshot now and one every `D`, and print after each how the goroutines grew: by creation site and by stack, with rates, and how many have not moved (until Ctrl-C, or --count)")
	f.IntVar(&o.watchCount, "count", 0, "with --watch: stop after `N` intervals")
	f.StringVar(&o.since, "since", "", "compare with a listing saved earlier by gi ps --json `FILE`: how the goroutines grew since, and which have not moved (the target may be another saved listing)")
	f.StringVar(&o.pprofFile, "pprof", "", "write a pprof goroutine profile to `FILE`")
	f.StringVar(&o.graphFile, "graph", "", "write the wait-for graph (goroutines, the objects they wait on, who holds them, deadlocks in red) to `FILE`: DOT, or SVG if FILE ends in .svg (needs Graphviz)")
	f.BoolVar(&o.all, "all", false, "include system goroutines")
	f.BoolVar(&o.allFrames, "all-frames", false, "keep the runtime-internal frames the runtime's dump elides")
	f.StringVar(&o.state, "state", "", "only goroutines in this state (e.g. \"chan receive\", waiting, running)")
	f.StringVar(&o.match, "match", "", "only goroutines with a frame whose function matches `REGEXP`")
	f.DurationVar(&o.minWait, "min-wait", 0, "only goroutines that have waited at least `DURATION`")
	f.DurationVar(&o.trace, "trace", 0, "trace the functions the goroutines are in for `D`, then list them with those functions' latencies")
	f.BoolVar(&o.why, "why", false, "with --trace, say which part of the measured function's calls' time dominates (MOSTLY: on CPU, runnable or a wait reason, and its share; see gi trace --why for the cost)")
	addBudgetFlag(f, &o.maxOverhead, " (with --trace)")
	f.IntVar(&o.traceDepth, "trace-depth", 1, "with --trace, trace this many code frames of each goroutine: the one its row shows (the innermost of the program's own code that can be traced) and those above it")
	f.BoolVar(&o.waits, "waits", true, "read what blocked goroutines wait on (--waits=false: the stop copies goroutines and stacks only)")
	f.MarkHidden("waits")
	f.BoolVar(&o.copyEarly, "copy-stacks-early", true, "copy parked goroutines' stacks before the stop (--copy-stacks-early=false: all in the stop, the benchmark's baseline)")
	f.MarkHidden("copy-stacks-early")
	f.StringVar(&o.binary, "binary", "", "with a core file: the executable of the process, when it is no longer where the core says")
	f.StringVar(&o.coreFile, "core", "", "also write a core file of the process to `FILE`, from the same stop: the memory the listing read (readable by gi ps, gdb and Delve)")
	f.BoolVar(&o.coreAll, "core-all", false, "with --core: copy every readable mapping into the core, in the stop (a whole core, as gcore writes; a longer stop)")
	addTargetFlags(f, &o.target)
	return cmd
}

// checkPsDurations fails on a negative duration, and on a --trace or
// --watch given as zero (a window or an interval of no time); --min-wait 0
// keeps every goroutine.
func checkPsDurations(f *pflag.FlagSet, o psOptions) error {
	for _, d := range []struct {
		flag, eg string
		v        time.Duration
	}{{"trace", "2s", o.trace}, {"watch", "5s", o.watch}} {
		if f.Changed(d.flag) && d.v <= 0 {
			return fmt.Errorf("--%s needs a positive duration (e.g. %s), not %v", d.flag, d.eg, d.v)
		}
	}
	if o.minWait < 0 {
		return fmt.Errorf("--min-wait %v: want a duration of 0 or more (0: every goroutine)", o.minWait)
	}
	return nil
}

// checkFileTarget says in one line why target, a file that is no core,
// is not something gi ps reads; nil when it is no file, or names a process
// as well. A target with a "/" is a path: a process name has none.
func checkFileTarget(target string) error {
	if _, err := strconv.Atoi(target); err == nil {
		return nil // a pid
	}
	path := strings.Contains(target, "/")
	st, err := os.Stat(target)
	if err != nil {
		var pe *os.PathError
		if path && errors.As(err, &pe) {
			return fmt.Errorf("core file %s: %w", target, pe.Err)
		}
		return nil
	}
	if !path {
		if _, err := proc.Find(target); err == nil || errors.Is(err, proc.ErrAmbiguous) {
			return nil // a process by that name: resolved as one
		}
	}
	switch {
	case st.IsDir():
		return fmt.Errorf("%s is a directory, not a core file", target)
	case isListing(target):
		return fmt.Errorf("%s is not an ELF core file: a saved gi ps --json listing? compare listings with --since FILE", target)
	}
	if err := notCoreELF(target); err != nil {
		return err
	}
	return fmt.Errorf("%s: not an ELF core file", target)
}

// notCoreELF says what the ELF file at path is instead of a core gi reads;
// nil when it is no ELF file.
func notCoreELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	kind := "file of type " + f.Type.String()
	switch f.Type {
	case elf.ET_EXEC, elf.ET_DYN:
		return fmt.Errorf("%s is not a core file but an ELF executable (or library): give the pid or name of a process running it", path)
	case elf.ET_REL:
		kind = "object file"
	case elf.ET_CORE:
		return fmt.Errorf("%s: an ELF core of a %v %v machine: gi reads little-endian amd64 and arm64 cores", path, f.ByteOrder, f.Machine)
	}
	return fmt.Errorf("%s is not a core file but an ELF %s", path, kind)
}

func runPs(a *app, out, errOut io.Writer, target string, o psOptions) error {
	if o.traceDepth < 1 {
		return fmt.Errorf("--trace-depth must be at least 1")
	}
	budget, err := parseBudget(o.maxOverhead)
	if err != nil {
		return err
	}
	var re *regexp.Regexp
	if o.match != "" {
		var err error
		if re, err = regexp.Compile(o.match); err != nil {
			return fmt.Errorf("--match: %w", err)
		}
	}
	fromCore := target != "" && core.IsCore(target)
	if !fromCore && target != "" && !(o.since != "" && isListing(target)) {
		if err := checkFileTarget(target); err != nil {
			return err
		}
	}
	if o.binary != "" && !fromCore {
		return fmt.Errorf("--binary goes with a core file, and %q is not one", target)
	}
	req := service.PsRequest{Decoded: a.decoded, Binary: o.binary, State: o.state, Waits: o.waits, CopyEarly: o.copyEarly,
		Leaks: o.leaks, LeakOptions: leakOptions(o, errOut), CoreFile: o.coreFile, CoreAll: o.coreAll,
		Trace: o.trace, TraceDepth: o.traceDepth, Why: o.why, MaxOverhead: budget}
	if fromCore {
		req.Core = target
	}
	if err := req.Check(); err != nil {
		return err
	}
	if o.leakMaxGrowth < -1 || o.leakMaxGrowth == 0 || o.leakMaxGrowth > 1<<30 {
		return fmt.Errorf("--leaks-max-growth: %d MiB; want a bound from 1 to %d, or -1 for none", o.leakMaxGrowth, 1<<30)
	}
	if o.watch < 0 {
		return fmt.Errorf("--watch needs a positive duration (e.g. 5s), not %v", o.watch)
	}
	if o.watchCount < 0 {
		return fmt.Errorf("--count must not be negative")
	}
	if o.watchCount != 0 && o.watch == 0 {
		return fmt.Errorf("--count goes with --watch D")
	}
	if (o.watch > 0 || o.since != "") && (o.trace > 0 || o.leaks || o.coreFile != "" || o.stacks || o.group || o.objects || o.pprofFile != "" || o.graphFile != "") {
		return fmt.Errorf("--watch and --since print how goroutines grew, with --json or alone")
	}
	if o.watch > 0 && o.since != "" {
		return fmt.Errorf("--watch and --since: one at a time")
	}
	if o.watch > 0 && fromCore {
		return fmt.Errorf("--watch follows a live process; %s is a core file", target)
	}
	if o.since != "" {
		before, err := readListing(o.since)
		if err != nil {
			return fmt.Errorf("--since: %w", err)
		}
		if target != "" && isListing(target) {
			after, err := readListing(target)
			if err != nil {
				return err
			}
			return writeGrowth(out, after.PID, inspect.Compare(before, after), o.json, 0)
		}
		pid, err := o.target.resolve(target)
		if err != nil {
			return err
		}
		if pid != before.PID {
			return fmt.Errorf("--since: %s is a listing of pid %d, not of %d", o.since, before.PID, pid)
		}
		t, err := inspect.Open(pid)
		if err != nil {
			return err
		}
		defer t.Close()
		after, err := t.Snapshot(a.tracer)
		if err != nil {
			return err
		}
		return writeGrowth(out, pid, inspect.Compare(before, after), o.json, after.Pause)
	}
	if !fromCore {
		if req.PID, err = o.target.resolve(target); err != nil {
			return err
		}
		if o.watch > 0 {
			t, err := inspect.Open(req.PID)
			if err != nil {
				return err
			}
			defer t.Close()
			if err := service.CheckState(t, o.state); err != nil {
				return err
			}
			t.SkipWaits = !o.waits
			t.StacksInStop = !o.copyEarly
			return runWatch(a, out, errOut, t, o.watch, o.watchCount, o.json)
		}
	}
	// An output file that cannot be written fails before the target is
	// touched.
	var pprofOut *outfile.File
	if o.pprofFile != "" {
		if pprofOut, err = outfile.Create(o.pprofFile, 0o644); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
		defer pprofOut.Abort()
	}
	var graphOut *graphFile
	if o.graphFile != "" {
		if graphOut, err = openGraphFile(o.graphFile); err != nil {
			return err
		}
		defer graphOut.abort()
	}
	req.CoreWritten = func(w *inspect.CoreWritten, pause time.Duration) {
		fmt.Fprintf(errOut, "gi: wrote core %s: %.1f MB of memory in %d segments (%.1f MB read after the stop), pause %v, written in %v\n",
			w.Path, float64(w.Memory)/1e6, w.Segments, float64(w.AfterStop)/1e6, pause.Round(time.Microsecond), w.Write.Round(time.Millisecond))
	}
	ended, stop := func() {}, func() {}
	ctx := context.Background()
	if o.trace > 0 {
		ctx, stop = a.traceContext()
		req.Rows = func(s *inspect.Snapshot) []*inspect.Goroutine { return filterGoroutines(s.Goroutines, o, re) }
		req.Attached = func(functions, probes, goroutines int, warnings []string) {
			for _, w := range warnings {
				fmt.Fprintf(errOut, "gi: warning: %s\n", w)
			}
			fmt.Fprintf(errOut, "gi: tracing %d functions (%d probes) of %d goroutines for %v\n", functions, probes, goroutines, o.trace)
			// As gi trace's (watchEnd), but the window's end also
			// detaches the probes and takes the last snapshot.
			ended = a.watchEnd(ctx, o.trace, psTraceGrace(probes), nil, errOut)
		}
	}
	took, err := service.Ps(ctx, a.tracer, req)
	ended()
	stop()
	if err != nil {
		return err
	}
	if len(took.Missing) > 0 {
		fmt.Fprintf(errOut, "gi: warning: core %s lacks memory gi needs, so the listing holds only what it could decode: %s\n", took.Core, core.DescribeMissing(took.Missing))
	}
	pid, snap, res := took.PID, took.Snapshot, took.Measured
	leaks := newLeakReport(took.Leaks, snap)
	gs := filterGoroutines(snap.Goroutines, o, re)
	var pt *psLatency
	if res != nil {
		pt = &psLatency{Result: res, why: o.why}
	}
	if graphOut != nil {
		if err := graphOut.write(inspect.NewWaitGraph(snap, gs), fmt.Sprintf("gi ps: pid %d, %s", pid, snap.GoVersion)); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "gi: wrote the wait-for graph to %s\n", o.graphFile)
	}
	if pprofOut != nil {
		if err := inspect.WritePprof(pprofOut, snap, gs); err != nil {
			return fmt.Errorf("write pprof profile: %w", err)
		}
		if err := pprofOut.Commit(); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
		if !o.json && !o.stacks && !o.group {
			fmt.Fprintf(out, "wrote %d goroutines of pid %d to %s\n", len(gs), pid, o.pprofFile)
			return nil
		}
	}
	switch {
	case o.objects && o.json:
		return report.Write(out, report.NewObjects(snap, gs))
	case o.objects:
		if err := writeObjects(out, snap, gs); err != nil {
			return err
		}
		return leaks.write(out)
	case o.json && o.group:
		return report.Write(out, report.NewPsGroups(snap, inspect.GroupGoroutines(gs, o.allFrames), o.allFrames, res))
	case o.json:
		doc := report.NewPs(snap, gs, o.allFrames, res)
		if leaks != nil {
			doc.Leaks = leaks.doc
		}
		return report.Write(out, doc)
	case o.stacks && o.group:
		return writeGroupStacks(out, snap, inspect.GroupGoroutines(gs, o.allFrames), o.allFrames)
	case o.stacks:
		if err := inspect.WriteDump(out, snap, gs, o.allFrames); err != nil {
			return err
		}
		if err := writeWarnings(out, snap); err != nil {
			return err
		}
		return leaks.write(out)
	case o.group:
		if err := writeGroupTable(out, snap, gs, inspect.GroupGoroutines(gs, o.allFrames), pt); err != nil {
			return err
		}
		if err := leaks.write(out); err != nil {
			return err
		}
	default:
		if err := writeTable(out, snap, gs, pt); err != nil {
			return err
		}
		if err := leaks.write(out); err != nil {
			return err
		}
	}
	if res != nil {
		w := res.Window
		fmt.Fprintf(out, "traced %d functions (%d probes) for %v: %d events, %d lost\n",
			len(w.Functions), w.Probes, o.trace, w.Events, w.Lost)
		if len(w.Added) > 0 {
			fmt.Fprintf(out, "attached during the window, as %d snapshots found goroutines in them (their calls count from then): %s\n",
				w.Snapshots, strings.Join(w.Added, ", "))
		}
		for _, u := range w.Untraceable {
			fmt.Fprintf(out, "not traced: %s\n", u)
		}
		for _, m := range w.Warnings {
			fmt.Fprintf(out, "warning: %s\n", m)
		}
		if len(w.Sampled) > 0 {
			fmt.Fprintf(out, "sampled to keep the %s overhead budget, in windows open %.0f%% of the trace (CALLS ~ estimated from them; --max-overhead none traces them whole, for exact counts and stuck marks): %s\n",
				o.maxOverhead, 100*w.SampledShare, strings.Join(w.Sampled, ", "))
		}
	}
	return nil
}

// psTraceGrace is how long gi ps --trace may take past its window before
// gi exits (watchEnd): the window's end detaches the probes (up to 100 ms
// each without uprobe_multi links) and takes a snapshot.
func psTraceGrace(probes int) time.Duration {
	return 30*time.Second + time.Duration(probes)*100*time.Millisecond
}

func filterGoroutines(all []*inspect.Goroutine, o psOptions, re *regexp.Regexp) []*inspect.Goroutine {
	out := make([]*inspect.Goroutine, 0, len(all))
	for _, g := range all {
		if g.System && !o.all {
			continue
		}
		if o.state != "" && !strings.EqualFold(g.State, o.state) && !strings.EqualFold(g.Status, o.state) {
			continue
		}
		if o.minWait > 0 && (!g.WaitKnown || g.Wait < o.minWait) {
			continue
		}
		if re != nil && !matchesFrame(g, re, o.allFrames) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func matchesFrame(g *inspect.Goroutine, re *regexp.Regexp, allFrames bool) bool {
	for _, f := range g.Frames {
		if (allFrames || !f.Elided) && re.MatchString(f.Function) {
			return true
		}
	}
	return false
}

// formatWait renders a known wait duration compactly (inspect.FormatWait):
// 850ms, 12.3s, 4m05s, 2h03m.
func formatWait(d time.Duration, known bool) string {
	if !known {
		return ""
	}
	return inspect.FormatWait(d)
}

// newTable returns gi's borderless table on w, its columns left-aligned
// unless opts say otherwise, no line ending in spaces (trimWriter).
func newTable(w io.Writer, opts ...tablewriter.Option) *tablewriter.Table {
	return tablewriter.NewTable(&trimWriter{w: w}, append([]tablewriter.Option{
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Settings: tw.Settings{
				Separators: tw.Separators{ShowHeader: tw.Off, ShowFooter: tw.Off, BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowTop: tw.Off, ShowBottom: tw.Off, ShowHeaderLine: tw.Off, ShowFooterLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithAlignment(tw.Alignment{tw.AlignLeft}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
	}, opts...)...)
}

func location(g *inspect.Goroutine) (fn, loc string) {
	f, ok := g.Location()
	if !ok {
		return "?", ""
	}
	return f.Function, fmt.Sprintf("%s:%d", inspect.ShortPath(f.File), f.Line)
}

func createdBy(g *inspect.Goroutine) string {
	c := g.CreatedBy
	if c == nil {
		return ""
	}
	if g.ParentID != 0 {
		return fmt.Sprintf("%s (goroutine %d)", c.Function, g.ParentID)
	}
	return c.Function
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

func hasLabels(gs []*inspect.Goroutine) bool {
	for _, g := range gs {
		if len(g.Labels) > 0 {
			return true
		}
	}
	return false
}

// hasWaits reports whether any goroutine has a WAITING ON cell.
func hasWaits(gs []*inspect.Goroutine) bool {
	for _, g := range gs {
		if len(g.WaitingOn) > 0 {
			return true
		}
	}
	return false
}

// groupWaitingOn is a group's WAITING ON cell: the object when every member
// waits on the same, else how many objects.
func groupWaitingOn(gr *inspect.Group) string {
	text, shared := inspect.GroupWaitingOn(gr.Goroutines)
	if !shared {
		text += " (gi ps --objects)"
	}
	return text
}

// writeObjects lists the objects goroutines wait on, most waiters first,
// with the facts that point at a bug.
func writeObjects(out io.Writer, snap *inspect.Snapshot, gs []*inspect.Goroutine) error {
	objs := inspect.WaitedObjects(gs)
	tbl := newListing(out)
	tbl.Header("WAITERS", "KIND", "OBJECT", "TYPE", "STATE", "BY SIDE", "LONGEST WAIT", "GOIDS")
	tbl.Shrink("GOIDS", "STATE", "TYPE", "OBJECT")
	for _, wo := range objs {
		o := wo.Object
		ref := o.Name
		switch {
		case ref == "" && o.Addr != 0:
			ref = fmt.Sprintf("%#x", o.Addr)
		case ref == "":
			ref = "-" // a nil channel, or an object whose address is unknown
		}
		head, details := o.Parts()
		state := strings.Join(details, ", ")
		if len(details) == 0 && o.Kind == "timer" {
			state, ref = head, "-" // a sleep has no object: its state is when it ends
		}
		var sides []string
		for _, d := range []string{"recv", "send", "read", "write"} {
			if n := wo.ByDir[d]; n > 0 {
				sides = append(sides, fmt.Sprintf("%d %s", n, d))
			}
		}
		ids := make([]string, 0, 6)
		for i, g := range wo.Goroutines {
			if i == 5 {
				ids = append(ids, fmt.Sprintf("+%d", len(wo.Goroutines)-5))
				break
			}
			ids = append(ids, strconv.FormatUint(g.ID, 10))
		}
		if err := tbl.Append([]string{strconv.Itoa(len(wo.Goroutines)), o.Kind, ref, o.Type, state, strings.Join(sides, ", "),
			formatWait(wo.LongestWait, wo.LongestWait > 0), strings.Join(ids, ",")}); err != nil {
			return err
		}
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	for _, wo := range objs {
		for _, f := range wo.Facts() {
			ref := wo.Object.Name
			if ref == "" {
				ref = fmt.Sprintf("%#x", wo.Object.Addr)
			}
			fmt.Fprintf(out, "%s %s: %s\n", wo.Object.Kind, ref, f)
		}
	}
	if blocked, total := inspect.AllBlocked(snap.Goroutines); total > 0 && blocked == total {
		fmt.Fprintf(out, "all %d goroutines of the program are blocked\n", total)
	}
	writeDeadlocks(out, snap)
	return writeWarnings(out, snap)
}

func stateText(g *inspect.Goroutine) string {
	s := g.State
	if g.Leaked || g.Status == "leaked" { // gi ps --leaks's verdict, or the runtime's own (Go 1.26+)
		s += " LEAKED"
	}
	if g.Deadlocked {
		s += " DEADLOCK"
	}
	if g.LockedToThread {
		s += " (locked)"
	}
	if g.Truncated {
		s += " !"
	}
	return s
}

// psColumns are the columns gi ps's table and its --group table add to
// their own when any goroutine has something for them: labels, the
// latency columns of --trace, and what blocked goroutines wait on.
type psColumns struct {
	labels, waits bool
	pt            *psLatency
}

func columnsOf(gs []*inspect.Goroutine, pt *psLatency) psColumns {
	return psColumns{labels: hasLabels(gs), waits: hasWaits(gs), pt: pt}
}

// header is first and the optional columns.
func (c psColumns) header(first ...any) []any {
	if c.labels {
		first = append(first, "LABELS")
	}
	if c.pt != nil {
		first = append(first, "CALLS", "P50", "P99", "MAX", "IN CALL")
		if c.pt.why {
			first = append(first, "MOSTLY")
		}
	}
	if c.waits {
		first = append(first, "WAITING ON")
	}
	return first
}

// row is first and the optional cells: g's labels, the latency cells and
// what waitingOn says.
func (c psColumns) row(first []string, g *inspect.Goroutine, latency func() []string, waitingOn func() string) []string {
	if c.labels {
		first = append(first, formatLabels(g.Labels))
	}
	if c.pt != nil {
		first = append(first, latency()...)
	}
	if c.waits {
		first = append(first, waitingOn())
	}
	return first
}

// writeRows renders header and the rows each appends, then the footer.
func writeRows(out io.Writer, snap *inspect.Snapshot, gs []*inspect.Goroutine, header []any, each func(add func([]string) error) error) error {
	tbl := newListing(out)
	tbl.Header(header...)
	tbl.Shrink("WAITING ON", "CREATED BY", "GOIDS", "LABELS", "LOCATION", "IN CALL", "FUNCTION", "STATE")
	if err := each(tbl.Append); err != nil {
		return err
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	return writeFooter(out, snap, gs)
}

func writeTable(out io.Writer, snap *inspect.Snapshot, gs []*inspect.Goroutine, pt *psLatency) error {
	c := columnsOf(gs, pt)
	// Goroutines waiting on the same objects share one WaitingOn list:
	// its text is made once.
	type waitList struct {
		first *inspect.WaitObject
		n     int
	}
	waitTexts := map[waitList]string{}
	return writeRows(out, snap, gs, c.header("GOID", "STATE", "WAIT", "FUNCTION", "LOCATION", "CREATED BY"), func(add func([]string) error) error {
		for _, g := range gs {
			fn, loc := pt.location(g)
			row := c.row([]string{strconv.FormatUint(g.ID, 10), stateText(g), formatWait(g.Wait, g.WaitKnown), fn, loc, createdBy(g)}, g,
				func() []string { return pt.columns(pt.ByGoid[g.ID]) },
				func() string {
					if len(g.WaitingOn) == 0 {
						return ""
					}
					key := waitList{&g.WaitingOn[0], len(g.WaitingOn)}
					text, ok := waitTexts[key]
					if !ok {
						text = g.WaitingOnText()
						waitTexts[key] = text
					}
					return text
				})
			if err := add(row); err != nil {
				return err
			}
		}
		return nil
	})
}

func writeGroupTable(out io.Writer, snap *inspect.Snapshot, gs []*inspect.Goroutine, groups []*inspect.Group, pt *psLatency) error {
	c := columnsOf(gs, pt)
	return writeRows(out, snap, gs, c.header("COUNT", "STATE", "WAIT", "FUNCTION", "LOCATION", "CREATED BY", "GOIDS"), func(add func([]string) error) error {
		for _, gr := range groups {
			g := gr.Representative()
			fn, loc := pt.location(g)
			row := c.row([]string{strconv.Itoa(len(gr.Goroutines)), stateText(g), waitRange(gr), fn, loc, createdByFunction(g), goidList(gr, 5)}, g,
				func() []string { return pt.groupColumns(gr) },
				func() string { return groupWaitingOn(gr) })
			if err := add(row); err != nil {
				return err
			}
		}
		return nil
	})
}

func createdByFunction(g *inspect.Goroutine) string {
	if g.CreatedBy == nil {
		return ""
	}
	return g.CreatedBy.Function
}

func waitRange(gr *inspect.Group) string {
	if gr.MaxWait == 0 {
		return ""
	}
	lo, hi := formatWait(gr.MinWait, true), formatWait(gr.MaxWait, true)
	if lo == hi {
		return lo
	}
	return lo + "~" + hi
}

func goidList(gr *inspect.Group, max int) string {
	var b strings.Builder
	for i, g := range gr.Goroutines {
		if i == max {
			fmt.Fprintf(&b, ",+%d", len(gr.Goroutines)-max)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(g.ID, 10))
	}
	return b.String()
}

func writeGroupStacks(out io.Writer, snap *inspect.Snapshot, groups []*inspect.Group, allFrames bool) error {
	for i, gr := range groups {
		if i > 0 {
			fmt.Fprintln(out)
		}
		g := gr.Representative()
		wait := waitRange(gr)
		if wait != "" {
			wait = ", " + wait
		}
		fmt.Fprintf(out, "%d goroutines [%s%s]: %s\n", len(gr.Goroutines), g.State, wait, goidList(gr, 20))
		if err := inspect.WriteDump(out, snap, []*inspect.Goroutine{g}, allFrames); err != nil {
			return err
		}
	}
	return writeWarnings(out, snap)
}

func writeFooter(out io.Writer, snap *inspect.Snapshot, gs []*inspect.Goroutine) error {
	counts := map[string]int{}
	for _, g := range gs {
		counts[g.State]++
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool {
		if counts[states[i]] != counts[states[j]] {
			return counts[states[i]] > counts[states[j]]
		}
		return states[i] < states[j]
	})
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%d %s", counts[s], s)
	}
	fmt.Fprintf(out, "\n%d goroutines: %s\n", len(gs), strings.Join(parts, ", "))
	writeDeadlocks(out, snap)
	if snap.Origin != "" {
		fmt.Fprintf(out, "pid %s, %s, from %s\n", pidText(snap.PID, snap.NSPid), snap.GoVersion, snap.Origin)
	} else {
		fmt.Fprintf(out, "pid %s, %s, paused %s\n", pidText(snap.PID, snap.NSPid), snap.GoVersion, snap.Pause.Round(time.Microsecond))
	}
	return writeWarnings(out, snap)
}

// writeDeadlocks names each deadlock's goroutines, where each waits, for
// what, and who holds it: "deadlock: goroutine 10 at main.ab
// demo/main.go:20 waits for mutex main.b, held by goroutine 11 at ...,
// which waits for mutex main.a, held by goroutine 10".
func writeDeadlocks(out io.Writer, snap *inspect.Snapshot) {
	for _, d := range snap.Deadlocks {
		var b strings.Builder
		for i, m := range d.Members {
			where := fmt.Sprintf("goroutine %d at %s %s:%d", m.Goid, m.Function, inspect.ShortPath(m.File), m.Line)
			if i == 0 {
				b.WriteString(where + " waits for " + m.WaitsFor)
			} else {
				b.WriteString(", held by " + where + ", which waits for " + m.WaitsFor)
			}
		}
		if len(d.Members) == 1 {
			b.WriteString(", which it holds itself")
		} else {
			fmt.Fprintf(&b, ", held by goroutine %d", d.Members[0].Goid)
		}
		fmt.Fprintf(out, "deadlock: %s\n", b.String())
	}
}

func writeWarnings(out io.Writer, snap *inspect.Snapshot) error {
	for _, w := range snap.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return nil
}
