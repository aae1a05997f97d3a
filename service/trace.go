package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/gi-debug/gi/inspect"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/trace"
)

// TraceRequest says which process gi trace follows, which of its
// functions, and how.
type TraceRequest struct {
	// PID is the process to trace; Path, if set instead, an executable:
	// every process running it is traced.
	PID  int
	Path string
	// Include and Exclude are the patterns of the functions to trace and
	// to leave out (shell wildcards over function names: 'main.*').
	Include, Exclude []string
	// Goids, if set, are the only goroutines followed (filtered in the
	// kernel).
	Goids []uint64
	// Where filters calls on their arguments in the kernel
	// ('FUNC: ARG OP VALUE [&& ...]').
	Where []string
	// Args captures each call's arguments and results; StringSize bounds
	// the bytes read of each string and slice (trace.DefaultStringSize,
	// at most trace.MaxStringSize).
	Args       bool
	StringSize int
	// MaxOverhead is the share of the process's CPU time the probes may
	// take (0.05: 5%; 0: no bound).
	MaxOverhead float64
	// Why splits each call's time (probes on the scheduler).
	Why bool
	// PerfEvents attaches one perf event per probe instead of
	// uprobe_multi links.
	PerfEvents bool
	// Duration ends the trace (0: when the context passed to Run is
	// done); Interval is how often the handlers' Tick runs.
	Duration, Interval time.Duration
}

// tracePlan is a request read: its patterns and filters parsed.
type tracePlan struct {
	include, exclude []trace.Pattern
	where            []trace.Where
}

// Check says whether the request can be traced as it stands: it names
// one process or one executable that is not gi's own, and its selection
// holds (CheckSelection). Its messages name gi's flags, which every
// front end shares.
func (r TraceRequest) Check() error {
	_, err := r.plan()
	return err
}

// CheckSelection says whether the request's patterns and filters parse
// and its numbers are in range, whatever process it names.
func (r TraceRequest) CheckSelection() error {
	_, err := r.parse()
	return err
}

func (r TraceRequest) plan() (*tracePlan, error) {
	switch {
	case r.PID != 0 && r.Path != "":
		return nil, errors.New("a process or an executable, not both")
	case r.PID < 0:
		return nil, fmt.Errorf("no process: pid %d", r.PID)
	case r.PID == 0 && r.Path == "":
		return nil, errors.New("no process: give a pid, a name or a binary")
	case r.PID == os.Getpid():
		return nil, fmt.Errorf("pid %d is gi itself", r.PID)
	case r.Path != "" && isSelf(r.Path):
		return nil, fmt.Errorf("%s is gi's own executable: traced by path, gi would trace itself; give the pid of the process to trace", r.Path)
	}
	return r.parse()
}

func (r TraceRequest) parse() (*tracePlan, error) {
	var p tracePlan
	var err error
	switch {
	case len(r.Include) == 0:
		return nil, errors.New("no pattern: say which functions to trace, e.g. 'main.*'")
	case r.Duration < 0:
		return nil, fmt.Errorf("--duration %v: want a duration of 0 (until Ctrl-C) or more", r.Duration)
	case r.Interval < 0:
		return nil, fmt.Errorf("--interval %v: want a duration of 0 (the table at the end only) or more", r.Interval)
	case r.MaxOverhead < 0 || r.MaxOverhead >= 1 || math.IsNaN(r.MaxOverhead):
		return nil, fmt.Errorf("--max-overhead %g%%: want a percentage from 0 to 100 (5%%) or none", 100*r.MaxOverhead)
	case r.StringSize < 1 || r.StringSize > trace.MaxStringSize:
		return nil, fmt.Errorf("--string-size %d: want 1 to %d bytes", r.StringSize, trace.MaxStringSize)
	}
	if p.include, err = parsePatterns(r.Include, ""); err != nil {
		return nil, err
	}
	if p.exclude, err = parsePatterns(r.Exclude, "--exclude"); err != nil {
		return nil, err
	}
	for _, w := range r.Where {
		pw, err := trace.ParseWhere(w)
		if err != nil {
			return nil, fmt.Errorf("--where %q: %w", w, err)
		}
		p.where = append(p.where, pw)
	}
	return &p, nil
}

// parsePatterns parses the patterns of a flag (flag "" for the command's
// arguments); ParsePattern's errors name the pattern themselves.
func parsePatterns(args []string, flag string) ([]trace.Pattern, error) {
	var out []trace.Pattern
	for _, a := range args {
		p, err := trace.ParsePattern(a)
		if err != nil {
			if flag != "" {
				err = fmt.Errorf("%s: %w", flag, err)
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// isSelf reports whether the file at path is gi's own executable.
func isSelf(path string) bool {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && os.SameFile(self, st)
}

// Tracing is a trace whose probes are in: StartTrace returns it, Run
// reads its calls, Close takes it down.
type Tracing struct {
	// Started says what was attached.
	Started TraceStart

	req     TraceRequest
	session *trace.Session
	process *proc.Process   // nil: traced by path, or not readable
	target  *inspect.Target // reads goroutines' labels; nil where it cannot
	// mu guards detached: the probes are taken out once, whoever asks
	// first (Run's end, or Close from another goroutine), and Overhead
	// is not read as they go.
	mu       sync.Mutex
	detached bool
	closeErr error
}

// TraceStart says what a trace attached to.
type TraceStart struct {
	// PID is the process traced (0: every process running Binary), and
	// NSPID its pid in its own PID namespace.
	PID, NSPID int
	// Binary is the executable's path.
	Binary string
	// Functions are the functions traced, EntryOnly those without a RET
	// (their calls end when unwound, or are open at the end), Probes the
	// uprobes attached, in AttachTime.
	Functions  []*trace.Function
	EntryOnly  []string
	Probes     int
	AttachTime time.Duration
	// Rates are the calls counted per second before the trace, each
	// with the share of the CPU time tracing it whole would take.
	Rates []trace.CallRate
	// Warnings are what the trace does without: kernel features, the
	// arguments it cannot read, functions sampled over the budget.
	Warnings []Warning
}

// WarningKind says what a Warning is about.
type WarningKind string

// The kinds of warnings.
const (
	// WarnKernelFeature: the kernel lacks a feature gi works without
	// (Warning.Feature says which, and the release that has it).
	WarnKernelFeature WarningKind = "kernel-feature"
	// WarnTrace: what the trace does without or changed as it ran
	// (arguments it cannot read, functions moved to sampling windows).
	WarnTrace WarningKind = "trace"
	// WarnSampling: what the sampling windows could not do.
	WarnSampling WarningKind = "sampling"
	// WarnEventsLost: the ring buffer was full (Warning.Count events).
	WarnEventsLost WarningKind = "events-lost"
	// WarnFloatsUnread: calls whose float arguments read as unknown
	// (Warning.Count calls).
	WarnFloatsUnread WarningKind = "floats-unread"
)

// Warning is something a front end tells its user: a value, with its
// kind and what it counts, and the sentence gi prints.
type Warning struct {
	Kind    WarningKind
	Message string
	// Feature is the missing kernel feature (WarnKernelFeature).
	Feature *trace.KernelFeature
	// Count is how many events or calls it is about (WarnEventsLost,
	// WarnFloatsUnread).
	Count uint64
}

// String returns the warning's sentence.
func (w Warning) String() string { return w.Message }

// sessionWarnings types the warnings a session gave: those naming a
// kernel feature it found missing, and the others.
func sessionWarnings(missing []trace.KernelFeature, texts []string) []Warning {
	var out []Warning
	for _, m := range texts {
		w := Warning{Kind: WarnTrace, Message: m}
		for i := range missing {
			if missing[i].Warning() == m {
				w.Kind, w.Feature = WarnKernelFeature, &missing[i]
			}
		}
		out = append(out, w)
	}
	return out
}

// StartTrace attaches the probes r asks for. Close the Tracing on every
// path: it holds the probes.
func StartTrace(r TraceRequest) (*Tracing, error) {
	plan, err := r.plan()
	if err != nil {
		return nil, err
	}
	opts := trace.Options{PID: r.PID, Path: r.Path, Include: plan.include, Exclude: plan.exclude, Goids: r.Goids, PerfEvents: r.PerfEvents,
		Args: r.Args, StringSize: r.StringSize, Where: plan.where, MaxOverhead: r.MaxOverhead, Why: r.Why}
	t := &Tracing{req: r}
	// A process is opened once: the trace and inspect (labels are read
	// from the live process, as gi ps reads them) share its executable,
	// layout and memory. Where it cannot be opened, the trace opens the
	// binary itself.
	if r.PID != 0 {
		if p, err := proc.Open(r.PID); err == nil {
			t.process = p
			opts.Process = p
			if tgt, err := inspect.New(p); err == nil {
				t.target = tgt
			}
		}
	}
	s, err := trace.Open(opts)
	if err != nil {
		t.release()
		return nil, err
	}
	t.session = s
	st := TraceStart{PID: r.PID, NSPID: r.PID, Binary: s.Binary.Path, Functions: s.Selection.Functions, Probes: s.Probes,
		AttachTime: s.AttachTime, Rates: s.Rates, Warnings: sessionWarnings(s.Missing, s.Warnings)}
	if ns, err := proc.NamespacePID(r.PID); err == nil && ns != 0 {
		st.NSPID = ns
	}
	for _, f := range s.Selection.Functions {
		if f.EntryOnly {
			st.EntryOnly = append(st.EntryOnly, f.Name)
		}
	}
	t.Started = st
	return t, nil
}

// Symbols formats what the trace's calls refer to: functions, call
// sites, argument values.
func (t *Tracing) Symbols() *trace.Symbols { return t.session.Symbols() }

// Overhead is what the probes have cost the process so far; it may run
// beside Run, until the probes are out.
func (t *Tracing) Overhead() (*trace.Overhead, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.detached {
		return nil, errors.New("the probes are out")
	}
	o, err := t.session.Overhead()
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// Sampling says what the sampling windows have done so far (nil: nothing
// is sampled); handlers may call it while Run runs.
func (t *Tracing) Sampling() *trace.Sampling { return t.session.Sampling() }

// TraceResult sums up a trace once its probes are out.
type TraceResult struct {
	trace.RunResult
	// Took is how long it ran; DetachTime how long taking the probes out
	// took.
	Took, DetachTime time.Duration
	// Overhead is what the probes cost the process (nil: not measured).
	Overhead *trace.Overhead
	// Exited says the process exited before the trace's end (what was
	// traced until then is in the result).
	Exited bool
	// Warnings are the run's: what the sampling could not do, functions
	// moved to the windows, events lost, floats unread.
	Warnings []Warning
}

// Run reads the trace's calls into hs until ctx is done, the request's
// Duration has passed or the process exits, and then takes the probes
// out, so that nothing after (a slow reader of the output) costs the
// process anything. The result's Err is set when the run failed; a
// process that exited is Exited, not an error.
func (t *Tracing) Run(ctx context.Context, hs trace.Handlers) *TraceResult {
	ro := trace.RunOptions{Duration: t.req.Duration, Interval: t.req.Interval}
	if tgt := t.target; tgt != nil {
		pid := t.req.PID
		ro.Labels = func(k trace.GoroutineKey, g uint64) map[string]string {
			if int(k.PID) != pid {
				return nil
			}
			l, _ := tgt.LabelsOf(g, k.Goid)
			return l
		}
	}
	started := time.Now()
	res := &TraceResult{RunResult: t.session.Run(ctx, ro, hs)}
	res.Took = time.Since(started)
	if o, err := t.session.Overhead(); err == nil {
		res.Overhead = &o
	}
	t.detach()
	res.DetachTime = t.session.DetachTime
	if sm := res.Sampling; sm != nil {
		for _, w := range sm.Warnings {
			res.Warnings = append(res.Warnings, Warning{Kind: WarnSampling, Message: w})
		}
	}
	for _, w := range res.RunResult.Warnings {
		res.Warnings = append(res.Warnings, Warning{Kind: WarnTrace, Message: w})
	}
	if res.Lost > 0 {
		res.Warnings = append(res.Warnings, Warning{Kind: WarnEventsLost, Count: res.Lost,
			Message: fmt.Sprintf("%d events lost (ring buffer full): trees and counts are incomplete", res.Lost)})
	}
	if res.UnreadFloats > 0 {
		res.Warnings = append(res.Warnings, Warning{Kind: WarnFloatsUnread, Count: res.UnreadFloats,
			Message: fmt.Sprintf("%d calls show float arguments or results as ?: their thread did not take the SIGURG that reads them right after the probe (blocked)", res.UnreadFloats)})
	}
	if errors.Is(res.Err, trace.ErrTargetExited) {
		res.Exited, res.Err = true, nil
	}
	return res
}

// detach takes the probes out, once.
func (t *Tracing) detach() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.detached {
		t.detached = true
		t.closeErr = t.session.Close()
	}
}

// Close takes the probes out (if Run has not) and releases the process;
// its error is the detach's.
func (t *Tracing) Close() error {
	t.detach()
	t.release()
	return t.closeErr
}

func (t *Tracing) release() {
	if t.process != nil {
		t.process.Close()
		t.process = nil
	}
}
