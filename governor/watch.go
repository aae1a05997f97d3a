package governor

import "time"

// Watching for a jump. Demote runs every Period on every probe's hits and
// the threads' CPU times: too dear to read more often at thousands of
// functions, and a function that turns hot just after it is traced whole
// would run at full cost until the next, a second's stall of every
// goroutine calling it. So at each drain of the trace's events a Watch
// weighs two cheap figures: the summed cost of the probes of the functions
// traced whole (one counter the probe programs keep), and the process's
// CPU time (one clock read). Past the budget over that interval, the
// caller reads the functions' hits, and reads them again at the next
// check at least WatchConfirm later; if their cost over that interval is
// still past the budget, the caller moves the costliest to the windows at
// once (Demote), tens of milliseconds after the cost rose.

const (
	// WatchConfirm is the shortest interval over which the hits of the
	// functions traced whole are read twice to tell which went past the
	// budget.
	WatchConfirm = 2 * time.Millisecond
	// WatchHoldFactor bounds what the reads of the functions' hits (about
	// a microsecond a probe) cost while the sum of their cost is past the
	// budget and theirs are not (bursts, noise): after a confirmation that
	// moved nothing, the next read waits this many times what it took.
	WatchHoldFactor = 50
)

// Reading is what a Watch weighs at a check.
type Reading struct {
	// At is when it was read.
	At time.Time
	// CPU is the process's CPU time so far (0 when unknown).
	CPU time.Duration
	// Probes is the time the probes of the functions traced whole took
	// so far.
	Probes time.Duration
}

// Step is what a Watch asks of its caller after a check.
type Step int

const (
	// Within: the cost since the last check is within the budget.
	Within Step = iota
	// Held: past the budget, but the reads of the functions' hits are
	// held off (a confirmation moved nothing lately).
	Held
	// ReadHits: past the budget; read the functions' hits now and hand
	// them to Pend, then confirm.
	ReadHits
	// Confirm: past the budget, a first read pending: confirm.
	Confirm
)

// Watch is a trace's check of the cost of the functions traced whole at
// each drain. T is the caller's first read of their hits (Pend), kept
// until it is confirmed. It is not safe for concurrent use.
type Watch[T any] struct {
	budget   float64
	cpuKnown bool
	last     Reading
	// quiet is when a check last found the cost within the budget: the
	// cost rose after it.
	quiet time.Time
	// pending is the first read of the functions' hits, at pendingAt;
	// hold is when the next such read may be.
	pending         *T
	pendingAt, hold time.Time
}

// NewWatch returns the watch of a trace under budget from a first
// reading; cpuKnown says whether the process's CPU time can be read (if
// not, costs are weighed against one CPU).
func NewWatch[T any](budget float64, cpuKnown bool, first Reading) *Watch[T] {
	return &Watch[T]{budget: budget, cpuKnown: cpuKnown, last: first, quiet: first.At}
}

// Over says whether probes, the time the probes of the functions traced
// whole took over interval, in which the process ran cpu (0: unknown), is
// past the budget: over its share of the process's CPU time (of one
// CPU's when unknown), and over its share of one CPU (a burst of calls in
// a process otherwise idle is not a stall).
func (w *Watch[T]) Over(probes, cpu, interval time.Duration) bool {
	if interval <= 0 {
		return false
	}
	if cpu <= 0 || !w.cpuKnown {
		cpu = interval
	}
	return float64(probes) > w.budget*float64(cpu) && float64(probes) > w.budget*float64(interval)
}

// Check weighs r against the last reading and says what to do.
func (w *Watch[T]) Check(r Reading) Step {
	prev := w.last
	w.last = r
	if !w.Over(r.Probes-prev.Probes, r.CPU-prev.CPU, r.At.Sub(prev.At)) {
		w.pending = nil
		w.quiet = r.At
		return Within
	}
	if w.pending != nil {
		return Confirm
	}
	if r.At.Before(w.hold) {
		return Held
	}
	return ReadHits
}

// Pend keeps first, the functions' hits read at at (after ReadHits).
func (w *Watch[T]) Pend(first T, at time.Time) {
	w.pending, w.pendingAt = &first, at
}

// Pending returns the first read kept, nil if none.
func (w *Watch[T]) Pending() *T { return w.pending }

// ConfirmWait is how long, at now, the second read must wait to be
// WatchConfirm after the first.
func (w *Watch[T]) ConfirmWait(now time.Time) time.Duration {
	return max(0, WatchConfirm-now.Sub(w.pendingAt))
}

// Confirmed records a confirmation, the second read at now, which took
// took, whose functions cost probes over interval, in which the process
// ran cpu. Past the budget, it drops the first read and returns true, with
// when the cost rose (the last check that found it within the budget).
// If not, the first read is kept for the next check, which confirms over
// the longer interval while the sum stays past the budget (a thread
// turned hot on a loaded machine runs in slices), and the next read waits
// WatchHoldFactor times what this one took.
func (w *Watch[T]) Confirmed(probes, cpu, interval time.Duration, now time.Time, took time.Duration) (time.Time, bool) {
	if !w.Over(probes, cpu, interval) {
		w.hold = now.Add(WatchHoldFactor * took)
		return time.Time{}, false
	}
	w.pending = nil
	return w.quiet, true
}

// Drop forgets the first read: the functions moved, or grew, since.
func (w *Watch[T]) Drop() { w.pending = nil }
