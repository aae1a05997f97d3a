package trace

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gi-debug/gi/bpf"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// Why a call was slow (Options.Why): where its time went. Probes on the
// scheduler's functions that move a goroutine between states report, for
// the goroutines with a traced call open only (the programs keep the set
// in the kernel), when it parks and why (runtime.park_m, after gopark set
// g.waitreason), when its wait ends and which goroutine ended it
// (runtime.ready, on the system stack of the waker's thread), when it
// runs (runtime.execute) and when it is put back in a run queue
// (runtime.goschedImpl, runtime.goyield_m). Between two events the
// goroutine is in one state, and the interval is added to every call it
// has open: a parent's split includes its children's, and the parts of a
// call add up to its duration. The goroutine's own runtime.reentersyscall,
// runtime.entersyscallblock and runtime.exitsyscall bound its system calls
// (a part of their own, "syscall"), and runtime.semacquire1 and
// runtime.netpollblock say, before it parks, which semaphore or
// descriptor it is about to wait on.

// schedFunctions are the runtime functions the scheduler probes go at,
// with the event each reports. Every release from Go 1.20 has them.
var schedFunctions = []struct {
	name string
	kind uint8
}{
	{"runtime.park_m", bpf.KindPark},
	{"runtime.ready", bpf.KindReady},
	{"runtime.execute", bpf.KindRun},
	{"runtime.goschedImpl", bpf.KindYield},
	{"runtime.goyield_m", bpf.KindYield},
	{"runtime.reentersyscall", bpf.KindSyscall},
	{"runtime.entersyscallblock", bpf.KindSyscall},
	{"runtime.exitsyscall", bpf.KindSysret},
	{"runtime.semacquire1", bpf.KindSema},
	{"runtime.netpollblock", bpf.KindPoll},
}

// appendSchedProbes adds the scheduler probes to the table and returns
// their indices.
func (s *Session) appendSchedProbes() ([]int, error) {
	var idx []int
	for _, f := range schedFunctions {
		site, ok := entrySite(s.Binary, f.name)
		if !ok {
			return nil, fmt.Errorf("--why: %s not found in %s: the binary's scheduler is not one gi knows", f.name, s.Binary.Path)
		}
		idx = append(idx, len(s.probes))
		s.probes = append(s.probes, probe{kind: f.kind, sched: f.kind, site: site, class: s.siteClassAt(site), costKind: costSched})
	}
	return idx, nil
}

// TimeSplit is where a call's time went: on a thread, runnable (ready and
// waiting for the scheduler to run it) and blocked, per wait. The parts
// add up to the call's duration.
type TimeSplit struct {
	// OnCPU is the time the goroutine ran on a thread (the kernel may
	// have preempted the thread meanwhile: Go's view, as its own
	// execution tracer's).
	OnCPU uint64
	// Runnable is the time it was ready to run and waited for a P.
	Runnable uint64
	// Blocked are its waits, grouped by reason, object and who ended
	// them, in the order they first began.
	Blocked []BlockedTime
	// Unknown is time gi cannot attribute: scheduler events were lost,
	// or the scheduler's probes were not attached (sampling windows).
	Unknown uint64
	// Partial says part of the call's history may be missing: events
	// contradicted each other (the time between is Unknown), the ring
	// buffer lost events while the call ran, or the scheduler's probes
	// were attached for part of it only (sampling windows).
	Partial bool
	// Intervals are the waits and runnable spells that happened while
	// this call was the goroutine's innermost traced call, in order (its
	// children's are theirs): at most maxIntervals, the rest counted in
	// DroppedIntervals.
	Intervals        []Interval
	DroppedIntervals int
}

// Interval is one spell of a goroutine not running: blocked (Reason set,
// with what it waited on and who ended it) or runnable (Reason "").
type Interval struct {
	Start, End uint64 // CLOCK_MONOTONIC ns
	Reason     string
	Object     WaitObject
	// WokenBy ended the wait, at End, in WokenByFunction (0: none did).
	WokenBy         uint64
	WokenByFunction string
}

// maxIntervals bounds the intervals a call keeps.
const maxIntervals = 256

// BlockedTime is the time a call spent in waits of one kind.
type BlockedTime struct {
	// Reason is the runtime's wait reason ("chan receive", "sync.Mutex.Lock", ...).
	Reason string
	// Object is what was waited on, zero if unknown.
	Object WaitObject
	// WokenBy is the goroutine that ended the waits (its unlock, send,
	// close, Done or Signal made this one runnable), 0 if none did: a
	// timer, the network poller.
	WokenBy uint64
	// WokenByFunction is where WokenBy was when it did: its innermost
	// function outside the runtime and the sync packages.
	WokenByFunction string
	// NS is the time spent, Count the waits it adds up.
	NS    uint64
	Count int
}

// WaitObject is what a wait was on, named as gi ps names it.
type WaitObject struct {
	// Kind is chan, mutex, rwmutex, waitgroup, sema or fd; "" unknown.
	Kind string
	// Addr is the object's address (a channel, a sync object); 0 for a
	// descriptor.
	Addr uint64
	// Name is the global variable holding the object ("main.cacheMu").
	Name string
	// Dir is a RWMutex waiter's side: read or write.
	Dir string
	// FD is a descriptor: its number, and what /proc says it is when it
	// parked (a socket's addresses, a file's path).
	FD proc.FD
}

// Same reports whether o and p are the same object.
func (o WaitObject) Same(p WaitObject) bool {
	return o.Kind == p.Kind && o.Addr == p.Addr && o.FD.FD == p.FD.FD
}

// String names the object: "mutex main.cacheMu", "chan 0xc000123000",
// "tcp 127.0.0.1:43122 → 127.0.0.1:5432 fd 7"; "" if unknown.
func (o WaitObject) String() string {
	switch {
	case o.Kind == "":
		return ""
	case o.Kind == "fd":
		return o.FD.String()
	case o.Name != "":
		return o.Kind + " " + o.Name
	}
	return fmt.Sprintf("%s %#x", o.Kind, o.Addr)
}

// maxBlockedParts bounds the distinct waits a split keeps; beyond, waits
// are added to their reason's first entry without waker or object.
const maxBlockedParts = 16

// Total is the sum of the parts.
func (t *TimeSplit) Total() uint64 {
	n := t.OnCPU + t.Runnable + t.Unknown
	for _, b := range t.Blocked {
		n += b.NS
	}
	return n
}

func (t *TimeSplit) addBlocked(w BlockedTime) {
	for i := range t.Blocked {
		b := &t.Blocked[i]
		if b.Reason == w.Reason && b.Object.Same(w.Object) && b.WokenBy == w.WokenBy && b.WokenByFunction == w.WokenByFunction {
			b.NS += w.NS
			b.Count++
			return
		}
	}
	if len(t.Blocked) >= maxBlockedParts {
		w.Object, w.WokenBy, w.WokenByFunction = WaitObject{}, 0, ""
		for i := range t.Blocked {
			b := &t.Blocked[i]
			if b.Reason == w.Reason && b.Object.Kind == "" && b.WokenBy == 0 && b.WokenByFunction == "" {
				b.NS += w.NS
				b.Count++
				return
			}
		}
	}
	w.Count = 1
	t.Blocked = append(t.Blocked, w)
}

// String renders the split on one line:
// "cpu 15ms · runnable 0.3ms · chan receive 30ms (goroutine 815 main.producer)".
func (t *TimeSplit) String() string {
	parts := []string{"cpu " + formatNS(t.OnCPU), "runnable " + formatNS(t.Runnable)}
	for _, b := range t.Blocked {
		s := b.Reason + " " + formatNS(b.NS)
		var about []string
		if b.Count > 1 {
			about = append(about, fmt.Sprintf("%d waits", b.Count))
		}
		if o := b.Object.String(); o != "" {
			about = append(about, o)
		}
		if b.WokenBy != 0 {
			w := fmt.Sprintf("goroutine %d", b.WokenBy)
			if b.WokenByFunction != "" {
				w += " " + b.WokenByFunction
			}
			about = append(about, w)
		}
		if len(about) > 0 {
			s += " (" + strings.Join(about, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if t.Unknown > 0 || t.Partial {
		parts = append(parts, "unknown "+formatNS(t.Unknown)+" (partial)")
	}
	return strings.Join(parts, " · ")
}

// formatNS renders nanoseconds compactly: 850ns, 12.3µs, 4.56ms, 1.2s.
func formatNS(ns uint64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1_000_000:
		return trimZeros(fmt.Sprintf("%.1f", float64(ns)/1e3)) + "µs"
	case ns < 1_000_000_000:
		return trimZeros(fmt.Sprintf("%.2f", float64(ns)/1e6)) + "ms"
	}
	return trimZeros(fmt.Sprintf("%.2f", float64(ns)/1e9)) + "s"
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// schedState is what a goroutine with calls open is doing.
type schedState uint8

const (
	stateRunning schedState = iota
	stateRunnable
	stateBlocked
	stateUnknown
)

// whyState is a goroutine's scheduling state since its last event.
type whyState struct {
	state  schedState
	since  uint64
	reason string     // stateBlocked: the wait reason
	object WaitObject // stateBlocked: what it waits on
	// note is what the goroutine said it is about to wait on (a
	// semaphore, a descriptor), for its next park.
	note Note
	// syscallExit: it left a system call and is running, unless the
	// next event is a run (it lost its P: runnable meanwhile).
	syscallExit bool
}

// Note is what a goroutine is about to wait on, reported before it parks:
// a semaphore's address (Kind bpf.KindSema) or a descriptor (bpf.KindPoll).
type Note struct {
	Kind  uint8
	Value uint64
}

// SchedEvent is a scheduler event of a goroutine, for Builder.Sched.
type SchedEvent struct {
	// Kind is bpf.KindPark, KindReady, KindRun, KindYield, KindSyscall,
	// KindSysret, KindSema or KindPoll.
	Kind uint8
	Time uint64
	// Reason: a park's wait reason.
	Reason string
	// Object: a park's first sudog's channel, a sema's address, a poll's
	// descriptor.
	Object uint64
	// PCs: a park's return addresses, innermost first.
	PCs []uint64
	// WokenBy and WokenByFunction: a ready's waker, if a goroutine.
	WokenBy         uint64
	WokenByFunction string
}

// Sched records a scheduler event of goroutine k, which has calls open
// (events of other goroutines are ignored): the interval since its last
// event is added to the split of each of its open calls.
func (b *Builder) Sched(k GoroutineKey, ev SchedEvent) {
	st := b.gs[k]
	if st == nil || len(st.stack) == 0 {
		return
	}
	w := &st.why
	if !b.covered(ev.Time) {
		// A probe still attached while the window closes: the events
		// around it may be gone already.
		b.uncover(st)
		return
	}
	// The state the event moves the goroutine out of; in any other, an
	// event was lost and the interval is unknown.
	expect := func(ok bool) {
		if !ok {
			w.state = stateUnknown
		}
	}
	afterSyscall := w.syscallExit
	w.syscallExit = false
	switch ev.Kind {
	case bpf.KindSema, bpf.KindPoll:
		w.note = Note{Kind: ev.Kind, Value: ev.Object}
		w.syscallExit = afterSyscall
	case bpf.KindPark:
		expect(w.state == stateRunning)
		b.account(st, ev.Time, BlockedTime{})
		w.state, w.reason = stateBlocked, ev.Reason
		w.object = WaitObject{}
		if b.Describe != nil {
			w.object = b.Describe(k, ev, w.note)
		} else if ev.Object != 0 {
			w.object = WaitObject{Kind: "chan", Addr: ev.Object}
		}
		w.note = Note{}
	case bpf.KindSyscall:
		expect(w.state == stateRunning)
		b.account(st, ev.Time, BlockedTime{})
		w.state, w.reason, w.object = stateBlocked, "syscall", WaitObject{}
	case bpf.KindSysret:
		expect(w.state == stateBlocked && w.reason == "syscall")
		b.account(st, ev.Time, BlockedTime{})
		w.state, w.syscallExit = stateRunning, true
	case bpf.KindReady:
		expect(w.state == stateBlocked)
		b.account(st, ev.Time, BlockedTime{WokenBy: ev.WokenBy, WokenByFunction: ev.WokenByFunction})
		w.state = stateRunnable
	case bpf.KindRun:
		// A wait ended without a ready (the network poller's, or a park
		// its unlock function called off) runs straight from blocked; a
		// goroutine that left a system call without its P was runnable.
		if afterSyscall && w.state == stateRunning {
			w.state = stateRunnable
		}
		expect(w.state == stateRunnable || w.state == stateBlocked)
		b.account(st, ev.Time, BlockedTime{})
		w.state = stateRunning
	case bpf.KindYield:
		expect(w.state == stateRunning)
		b.account(st, ev.Time, BlockedTime{})
		w.state = stateRunnable
	}
}

// account adds the interval from the goroutine's last event to now, in
// its current state, to each of its open calls; a blocked interval with
// the waker wake. An interval in a state the event contradicts (a call
// entered or returning while not running: events were lost) is unknown.
func (b *Builder) account(st *goroutineState, now uint64, wake BlockedTime) {
	w := &st.why
	d := uint64(0)
	if now > w.since {
		d = now - w.since
	}
	start := w.since
	w.since = now
	if d == 0 && w.state != stateUnknown {
		return
	}
	if (w.state == stateBlocked || w.state == stateRunnable) && len(st.stack) > 0 {
		if t := st.stack[len(st.stack)-1].Time; t != nil {
			if len(t.Intervals) < maxIntervals {
				iv := Interval{Start: start, End: now}
				if w.state == stateBlocked {
					iv.Reason, iv.Object, iv.WokenBy, iv.WokenByFunction = w.reason, w.object, wake.WokenBy, wake.WokenByFunction
				}
				t.Intervals = append(t.Intervals, iv)
			} else {
				t.DroppedIntervals++
			}
		}
	}
	for _, c := range st.stack {
		t := c.Time
		if t == nil {
			continue
		}
		switch w.state {
		case stateRunning:
			t.OnCPU += d
		case stateRunnable:
			t.Runnable += d
		case stateBlocked:
			wait := wake
			wait.Reason, wait.Object, wait.NS = w.reason, w.object, d
			t.addBlocked(wait)
		default:
			t.Unknown += d
			t.Partial = true
		}
	}
}

// MarkPartial marks the split of every open call partial: events were
// lost while they ran (the ring buffer was full), and a goroutine's park,
// ready and run lost together would leave its wait counted as on CPU.
func (b *Builder) MarkPartial() {
	for _, st := range b.gs {
		for _, c := range st.stack {
			if c.Time != nil {
				c.Time.Partial = true
			}
		}
	}
}

// running accounts the interval up to now of a goroutine that must be
// running then (it enters or returns from a call).
func (b *Builder) running(st *goroutineState, now uint64) {
	seen := b.covered(now)
	if !seen {
		b.uncover(st)
	} else if st.why.state != stateRunning {
		st.why.state = stateUnknown
	}
	b.account(st, now, BlockedTime{})
	if seen {
		st.why.state = stateRunning
	}
}

// flushState brings a goroutine's split up to now, the end of the trace,
// in its state then, or unknown if the scheduler's probes were off.
func (b *Builder) flushState(st *goroutineState, now uint64) {
	if !b.covered(now) {
		b.uncover(st)
	}
	b.account(st, now, BlockedTime{})
}

// uncover makes the state of a goroutine unknown from the closing of the
// window its last event was in (its state until then is known), or from
// that event.
func (b *Builder) uncover(st *goroutineState) {
	c, w := &b.coverage, &st.why
	if w.state != stateUnknown && c.from != 0 && c.until != 0 && w.since >= c.from && w.since < c.until {
		b.account(st, c.until, BlockedTime{})
	}
	w.state, w.note, w.syscallExit = stateUnknown, Note{}, false
}

// startState is the state of a goroutine entering its first open call at
// now: running, unless the scheduler's probes were off then.
func (b *Builder) startState(now uint64) whyState {
	if !b.covered(now) {
		return whyState{state: stateUnknown, since: now}
	}
	return whyState{state: stateRunning, since: now}
}

// whyCoverage is when the scheduler's probes were attached, with
// Builder.WhyWindows: from the last window's opening on (0: no window
// yet), until its closing (0 while it is open).
type whyCoverage struct {
	windowed    bool
	from, until uint64
}

// covered reports whether the scheduler's probes saw time t whole.
func (b *Builder) covered(t uint64) bool {
	c := &b.coverage
	return !c.windowed || (c.from != 0 && t >= c.from && (c.until == 0 || t <= c.until))
}

// WhyWindows says that the scheduler's probes are attached only in
// sampling windows (SchedCoverage): outside them a goroutine's state is
// unknown, and a call whose whole time is unknown is not split (Call.Time
// nil, counted in Unsplit).
func (b *Builder) WhyWindows() {
	b.coverage = whyCoverage{windowed: true}
}

// SchedCoverage says when the scheduler's probes were last attached
// whole (from, 0 before the first window) and when their detaching began
// (until, 0 while attached), as the sampler last set them. A new from is a
// new window: every goroutine's state is unknown until its next event,
// the probes having missed what it did between the windows (an event of
// the window before passed in later, read late from another CPU's part
// of the ring, is taken as unseen: safe, if a loss). After until, events
// make a goroutine's state unknown.
func (b *Builder) SchedCoverage(from, until uint64) {
	if from != 0 && from != b.coverage.from {
		for _, st := range b.gs {
			b.uncover(st) // up to the window before's closing
		}
		b.coverage.from = from
	}
	b.coverage.until = until
}

// loadWaitReasons reads the runtime's wait-reason strings, by which a
// park's g.waitreason is named: from the generated table for a stripped
// binary, else from the process (relocations applied: a PIE's string
// headers are written at load) or, without one, the binary.
func (s *Session) loadWaitReasons(layout *runtimelayout.RuntimeLayout) ([]string, error) {
	if p := s.Opts.Process; p != nil && p.Mem != nil {
		// The caller's process: read once for every user of it.
		rs, err := p.RuntimeStrings()
		if err != nil {
			return nil, fmt.Errorf("--why: %w", err)
		}
		return rs.WaitReasons, nil
	}
	var table *runtimelayout.VersionLayout
	var mem runtimelayout.AddressReader = s.Binary
	var bias uint64
	var err error
	switch {
	case layout.WaitReasonStrings == 0:
		// Stripped: the strings of the same Go release, generated.
		if table, err = runtimelayout.TableLayout(s.Binary.GoVersion, s.Binary.Arch); err != nil {
			return nil, fmt.Errorf("--why: the runtime's wait reasons: %w", err)
		}
	case s.Opts.PID <= 0 && s.Binary.PIE:
		return nil, errors.New("--why: the wait reasons of a PIE binary are read from its process: give a pid")
	case s.Opts.PID > 0:
		if bias, err = s.probeBias(); err != nil {
			return nil, err
		}
		m, err := proc.OpenMemory(s.Opts.PID)
		if err != nil {
			return nil, fmt.Errorf("--why: %w", err)
		}
		defer m.Close()
		mem = m
	}
	rs, err := runtimelayout.ReadRuntimeStrings(mem, layout, table, bias)
	if err != nil {
		return nil, fmt.Errorf("--why: process %d: %w", s.Opts.PID, err)
	}
	return rs.WaitReasons, nil
}

// waitReason names wait reason n ("" if the binary has none such).
func (s *Session) waitReason(n uint64) string {
	if n < uint64(len(s.waitReasons)) && s.waitReasons[n] != "" {
		return s.waitReasons[n]
	}
	return fmt.Sprintf("wait reason %d", n)
}

// waitNamer names what parking goroutines wait on, as gi ps does: a
// channel by its address, a semaphore by the sync object it belongs to
// (told by the goroutine's stack) and the global variable holding it, a
// descriptor by what /proc says it is.
type waitNamer struct {
	s   *Session
	sym *Symbols
	fds map[fdKey]fdName
}

type fdKey struct {
	pid uint32
	fd  int
}

type fdName struct {
	desc proc.FD
	at   time.Time
}

// fdNameTTL is how long a descriptor's description is reused: a number
// the process closes and opens again may then name something else.
const fdNameTTL = time.Second

func newWaitNamer(s *Session, sym *Symbols) *waitNamer {
	return &waitNamer{s: s, sym: sym, fds: map[fdKey]fdName{}}
}

// semaReason reports whether reason is that of a goroutine asleep on a
// semaphore.
func semaReason(reason string) bool {
	return reason == "semacquire" || strings.HasPrefix(reason, "sync.")
}

func (n *waitNamer) describe(k GoroutineKey, ev SchedEvent, note Note) WaitObject {
	switch {
	case ev.Object != 0 && (strings.HasPrefix(ev.Reason, "chan ") || ev.Reason == "select"):
		return WaitObject{Kind: "chan", Addr: ev.Object, Name: n.sym.Global(k.PID, ev.Object)}
	case note.Kind == bpf.KindSema && semaReason(ev.Reason):
		kind, dir, base := n.s.waitLayout.SyncObject(n.sym.Functions(k.PID, ev.PCs), note.Value)
		return WaitObject{Kind: kind, Dir: dir, Addr: base, Name: n.sym.Global(k.PID, base)}
	case note.Kind == bpf.KindPoll && ev.Reason == "IO wait" && int64(note.Value) >= 0:
		return WaitObject{Kind: "fd", FD: n.fd(k.PID, int(note.Value))}
	}
	return WaitObject{}
}

// fd describes descriptor fd of process pid (just its number if /proc
// does not say).
func (n *waitNamer) fd(pid uint32, fd int) proc.FD {
	key := fdKey{pid, fd}
	if d, ok := n.fds[key]; ok && time.Since(d.at) < fdNameTTL {
		return d.desc
	}
	desc := proc.FD{FD: fd}
	if d, err := proc.DescribeFD(int(pid), fd); err == nil {
		desc = d
	}
	if len(n.fds) > 4096 {
		clear(n.fds)
	}
	n.fds[key] = fdName{desc, time.Now()}
	return desc
}
