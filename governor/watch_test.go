package governor

import (
	"testing"
	"time"
)

// TestWatch walks a watch through a trace on a fake clock: checks every
// 20 ms of a process running one CPU, a 5% budget.
func TestWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	// The process's CPU time is the wall time; probes are cumulative.
	read := func(now int, probes float64) Reading {
		return Reading{At: at(now), CPU: ms(float64(now)), Probes: ms(probes)}
	}
	w := NewWatch[string](0.05, true, read(0, 0))
	// 0.5 ms of 20: 2.5%, within.
	if s := w.Check(read(20, 0.5)); s != Within {
		t.Fatalf("2.5%%: %v", s)
	}
	// 4 ms of 20: 20%, past: read the hits.
	if s := w.Check(read(40, 4.5)); s != ReadHits {
		t.Fatalf("20%%: %v", s)
	}
	if w.Pending() != nil {
		t.Fatal("pending before Pend")
	}
	w.Pend("first", at(40))
	if d := w.ConfirmWait(at(40)); d != WatchConfirm {
		t.Fatalf("confirm wait %v at once, want %v", d, WatchConfirm)
	}
	if d := w.ConfirmWait(at(45)); d != 0 {
		t.Fatalf("confirm wait %v after 5 ms, want 0", d)
	}
	// Confirmed over 2 ms: 1 ms of probes, 50%: move; the cost rose after
	// the check at 20 ms.
	rose, over := w.Confirmed(ms(1), ms(2), ms(2), at(42), ms(0.1))
	if !over || !rose.Equal(at(20)) || w.Pending() != nil {
		t.Fatalf("confirmed %v, rose %v (want %v), pending %v", over, rose, at(20), w.Pending())
	}

	// A burst the confirmation does not see: held for 50 times what the
	// read took, the first read kept.
	w = NewWatch[string](0.05, true, read(0, 0))
	if s := w.Check(read(20, 4)); s != ReadHits {
		t.Fatalf("20%%: %v", s)
	}
	w.Pend("first", at(20))
	if _, over := w.Confirmed(ms(0.01), ms(2), ms(2), at(22), ms(1)); over {
		t.Fatal("0.5% confirmed over")
	}
	if p := w.Pending(); p == nil || *p != "first" {
		t.Fatalf("pending %v after a confirmation that moved nothing, want the first read kept", p)
	}
	// Still past the budget: confirm again over the longer interval,
	// with the first read.
	if s := w.Check(read(40, 8)); s != Confirm {
		t.Fatalf("past the budget with a read pending: %v", s)
	}
	// Within: the read is dropped; past again inside the hold (50 ms
	// after 22 ms): held; after it: read.
	if s := w.Check(read(60, 8.1)); s != Within || w.Pending() != nil {
		t.Fatalf("within: %v, pending %v", s, w.Pending())
	}
	if s := w.Check(read(70, 12)); s != Held {
		t.Fatalf("inside the hold: %v", s)
	}
	if s := w.Check(read(80, 16)); s != ReadHits {
		t.Fatalf("after the hold: %v", s)
	}
	// Drop, after functions moved: the next past the budget reads anew.
	w.Pend("second", at(80))
	w.Drop()
	if s := w.Check(read(100, 20)); s != ReadHits {
		t.Fatalf("after a drop: %v", s)
	}
}

// TestWatchOver: past the budget means past its share of the process's
// CPU time and of one CPU; without the process's CPU time, of one CPU.
func TestWatchOver(t *testing.T) {
	w := NewWatch[int](0.05, true, Reading{})
	ms := time.Millisecond
	cases := []struct {
		probes, cpu, interval time.Duration
		over                  bool
	}{
		{6 * ms, 100 * ms, 100 * ms, true},    // 6% of a busy process
		{4 * ms, 100 * ms, 100 * ms, false},   // 4%
		{6 * ms, 10 * ms, 100 * ms, true},     // 60% of an idle one, 6% of a CPU
		{1 * ms, 10 * ms, 100 * ms, false},    // 10% of an idle one, 1% of a CPU: a burst
		{6 * ms, 200 * ms, 100 * ms, false},   // two threads: 3%
		{6 * ms, 0, 100 * ms, true},           // unknown CPU time: one CPU's
		{6 * ms, 100 * ms, 0, false},          // no interval
		{11 * ms, 200 * ms, 100 * ms, true},   // two threads: 5.5%
		{5 * ms, 100 * ms, 100 * ms, false},   // at the budget
		{50 * ms, 1000 * ms, 100 * ms, false}, // ten threads: 5%
	}
	for _, c := range cases {
		if got := w.Over(c.probes, c.cpu, c.interval); got != c.over {
			t.Errorf("Over(%v, %v, %v) = %v, want %v", c.probes, c.cpu, c.interval, got, c.over)
		}
	}
	unknown := NewWatch[int](0.05, false, Reading{})
	if !unknown.Over(6*ms, 1000*ms, 100*ms) {
		t.Error("without the process's CPU time, 6% of one CPU is not over")
	}
}
