package trace

import (
	"fmt"
	"io"
	"sync"
)

// DefaultOutputBacklog is the output an OutputQueue keeps for a slow
// reader, in bytes, unless told otherwise: a few seconds of a busy trace's
// lines.
const DefaultOutputBacklog = 4 << 20

// OutputQueue is a writer for what a run's handlers print that never
// blocks. Handlers run on Session.Run's goroutine, which also drains the
// ring buffer, ends the sampling windows and keeps the overhead budget
// (Options.MaxOverhead): a write that blocked there (a pipe into a pager
// or a slow grep, a paused terminal, a slow link) would hold all of that
// up, and leave a function that became hot traced whole at any cost. An
// OutputQueue keeps what is written in memory and has a goroutine of its
// own write it to the underlying writer. Past its backlog, what a handler
// would print is dropped instead (Print), whole and counted: output
// backpressure costs lines, never the target's pace.
//
// Write, Flush, Print, Full and Dropped may be called from any goroutine;
// Close once all writing is done.
type OutputQueue struct {
	w       io.Writer
	backlog int
	chunk   int // pending size at which it is handed to the writer

	mu      sync.Mutex
	wake    *sync.Cond // the writer goroutine waits on it
	pending []byte     // written since the last hand-over
	queued  [][]byte   // handed over, not yet written
	// held counts the bytes queued and being written.
	held    int
	closing bool
	err     error // the first write error
	dropped uint64
	done    chan struct{}
}

// outputChunk is the most an OutputQueue gathers before handing it to its
// writer: one write, as a bufio.Writer of that size would make.
const outputChunk = 64 << 10

// NewOutputQueue returns an OutputQueue writing to w that keeps at most
// backlog bytes (DefaultOutputBacklog if not positive) waiting for w
// before it drops what handlers print (Print).
func NewOutputQueue(w io.Writer, backlog int) *OutputQueue {
	if backlog <= 0 {
		backlog = DefaultOutputBacklog
	}
	q := &OutputQueue{w: w, backlog: backlog, chunk: max(1, min(outputChunk, backlog/2)), done: make(chan struct{})}
	q.wake = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// Write queues p; it never blocks, and never drops: what is dropped is
// decided before it is printed (Print). After the underlying writer
// failed, it returns that error.
func (q *OutputQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0, q.err
	}
	if q.closing {
		return 0, errOutputClosed
	}
	q.pending = append(q.pending, p...)
	if len(q.pending) >= q.chunk {
		q.handOver()
	}
	return len(p), nil
}

// errOutputClosed is what a write after Close returns.
var errOutputClosed = fmt.Errorf("write to a closed output queue: %w", io.ErrClosedPipe)

// Flush hands what was written so far to the writer goroutine, without
// waiting for it to be written.
func (q *OutputQueue) Flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handOver()
}

// handOver queues the pending bytes for the writer goroutine; q.mu is
// held.
func (q *OutputQueue) handOver() {
	if len(q.pending) == 0 {
		return
	}
	q.queued = append(q.queued, q.pending)
	q.held += len(q.pending)
	q.pending = nil
	q.wake.Signal()
}

// Full reports whether the backlog is used up: the reader is behind by
// that much.
func (q *OutputQueue) Full() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held+len(q.pending) >= q.backlog
}

// Print runs print, which writes one unit of output to q (a call's line,
// a call tree, a table), unless the backlog is used up: then it only
// counts the unit dropped, and returns false. A unit is printed whole or
// not at all, so the output stays well formed, and the backlog can be
// exceeded by one unit.
func (q *OutputQueue) Print(print func()) bool {
	if q.Full() {
		q.mu.Lock()
		q.dropped++
		q.mu.Unlock()
		return false
	}
	print()
	return true
}

// Dropped returns the units Print dropped.
func (q *OutputQueue) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Close hands over what is left, waits until the writer goroutine has
// written it all (as long as the reader takes), and returns the first
// error writing met. Later calls return the same.
func (q *OutputQueue) Close() error {
	q.mu.Lock()
	q.handOver()
	q.closing = true
	q.wake.Signal()
	q.mu.Unlock()
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// run writes what is handed over, in order, until Close; after an error
// it only discards.
func (q *OutputQueue) run() {
	defer close(q.done)
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		for len(q.queued) == 0 && !q.closing {
			q.wake.Wait()
		}
		if len(q.queued) == 0 {
			return // closing, and all written
		}
		batch := q.queued
		q.queued = nil
		failed := q.err != nil
		q.mu.Unlock()
		var err error
		for _, b := range batch {
			if !failed && err == nil {
				_, err = q.w.Write(b)
			}
			q.mu.Lock()
			q.held -= len(b)
			q.mu.Unlock()
		}
		q.mu.Lock()
		if err != nil && q.err == nil {
			q.err = err
			q.pending = nil
		}
	}
}
