package trace_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gi-debug/gi/trace"
)

// blockingWriter blocks every write until release is closed, then keeps
// what it was given.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	err     error
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	return w.buf.Write(p)
}

// TestOutputQueueNeverBlocks prints through an OutputQueue whose writer
// blocks: printing never waits, units past the backlog are dropped whole
// and counted, and Close writes the rest, in order, once the writer
// takes it.
func TestOutputQueueNeverBlocks(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	const backlog = 1000
	q := trace.NewOutputQueue(w, backlog)
	start := time.Now()
	var printed []int
	for i := range 500 {
		if q.Print(func() { fmt.Fprintf(q, "unit %03d\n", i) }) {
			printed = append(printed, i)
		}
		q.Flush()
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("printing 500 units into a blocked writer took %v", took)
	}
	// 9 bytes a unit: the backlog takes 112 (the last may pass it).
	if n := len(printed); n < backlog/9 || n > backlog/9+2 || q.Dropped() != uint64(500-n) || !q.Full() {
		t.Errorf("%d units printed, %d dropped, full %v", n, q.Dropped(), q.Full())
	}
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned before the writer took anything: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(w.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, i := range printed {
		fmt.Fprintf(&want, "unit %03d\n", i)
	}
	if w.buf.String() != want.String() {
		t.Errorf("wrote %q, want %q", w.buf.String(), want.String())
	}
	if _, err := q.Write([]byte("late")); err == nil {
		t.Error("a write after Close succeeded")
	}
}

// TestOutputQueueWriteError returns the writer's first error from Write
// and Close.
func TestOutputQueueWriteError(t *testing.T) {
	broken := errors.New("broken pipe")
	w := &blockingWriter{release: make(chan struct{}), err: broken}
	close(w.release)
	q := trace.NewOutputQueue(w, 0)
	q.Write([]byte("lost"))
	q.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := q.Write([]byte("more")); errors.Is(err, broken) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes go on succeeding after the writer failed")
		}
		q.Flush()
		time.Sleep(time.Millisecond)
	}
	if err := q.Close(); !errors.Is(err, broken) {
		t.Errorf("Close: %v", err)
	}
}
