package governor

import (
	"testing"
	"time"
)

// TestAdapt: the window follows the measured share: shorter when the
// thread's share was twice the target, the period stretched below the
// shortest window, and longer, at most fourfold, when the share was small.
func TestAdapt(t *testing.T) {
	const budget = 0.05
	target := budget * Margin
	p := NewPacer(budget)
	if p.Window() != MinWindow || p.Period() != BasePeriod {
		t.Fatalf("a new pacer: window %v of %v", p.Window(), p.Period())
	}
	// A window of 50 ms (40 open, 10 more to attach and close) in a
	// period of 500 ms that took twice the target.
	p.window = 40 * time.Millisecond
	if w := p.Adapt(WindowCost{Interval: BasePeriod, Share: 2 * target, Length: 50 * time.Millisecond}); w != nil {
		t.Fatalf("warned %+v", w)
	}
	if want := 15 * time.Millisecond; p.Window() < want-time.Millisecond || p.Window() > want+time.Millisecond || p.Period() != BasePeriod {
		t.Fatalf("window %v of %v, want about %v of %v", p.Window(), p.Period(), want, BasePeriod)
	}
	// Far over: the shortest window, in a longer period.
	p.window = 20 * time.Millisecond
	p.Adapt(WindowCost{Interval: BasePeriod, Share: 0.5, Length: 30 * time.Millisecond})
	if p.Window() != MinWindow || p.Period() <= BasePeriod {
		t.Fatalf("window %v of %v, want %v of a longer period", p.Window(), p.Period(), MinWindow)
	}
	// Nothing measured: fourfold.
	p.window, p.period = 20*time.Millisecond, BasePeriod
	p.Adapt(WindowCost{Interval: BasePeriod, Length: 25 * time.Millisecond})
	if want := 100*time.Millisecond - 5*time.Millisecond; p.Window() != want {
		t.Fatalf("window %v, want %v", p.Window(), want)
	}
	// Perf events: the 200 ms they took to attach and detach count as
	// lost, 40% of the period, though their hits cost nothing measured:
	// the shortest window, the period stretched threefold at least.
	p.window, p.period = 20*time.Millisecond, BasePeriod
	p.Adapt(WindowCost{Interval: BasePeriod, Length: 60 * time.Millisecond, Stalled: 200 * time.Millisecond})
	if p.Window() != MinWindow || p.Period() < 3*BasePeriod {
		t.Fatalf("window %v of %v after a 200 ms stall, want %v of a period stretched threefold at least", p.Window(), p.Period(), MinWindow)
	}
	// A closing that waited 690 ms for long calls, the probes cheap: the
	// window is never negative, nor the period shorter than the window
	// and its closing.
	p.window, p.period = MinWindow, BasePeriod
	p.Adapt(WindowCost{Interval: time.Second, Share: target / 10, Length: 700 * time.Millisecond})
	if p.Window() != MinWindow || p.Period() < 700*time.Millisecond {
		t.Fatalf("window %v of %v after a 690 ms closing, want %v of 700 ms at least", p.Window(), p.Period(), MinWindow)
	}
	// A run's first window (a period shorter than aimed at) that took
	// the target over its 100 ms: weighed as a whole period, not held.
	p.window, p.period = MinWindow, BasePeriod
	p.Adapt(WindowCost{Interval: 100 * time.Millisecond, Share: target, Length: 20 * time.Millisecond})
	if p.Period() != BasePeriod || p.Window() < MinWindow {
		t.Fatalf("after a first window: %v of %v", p.Window(), p.Period())
	}
	// Nothing to pace by: unchanged.
	before := *p
	p.Adapt(WindowCost{Length: 10 * time.Millisecond})
	p.Adapt(WindowCost{Interval: time.Second})
	if p.Window() != before.Window() || p.Period() != before.Period() {
		t.Fatal("paced by an empty measure")
	}
}

// TestAdaptOverBudget: the shortest windows at the longest period, still
// over the budget, say so, with the stall when perf events took it.
func TestAdaptOverBudget(t *testing.T) {
	p := NewPacer(0.05)
	for range 10 {
		if w := p.Adapt(WindowCost{Interval: p.Period(), Share: 0.5, Length: MinWindow}); w != nil {
			if p.Period() != MaxPeriod || w.Share <= 0.05 || w.Stalled != 0 {
				t.Fatalf("warned %+v at %v", w, p.Period())
			}
			break
		}
		if p.Period() == MaxPeriod {
			t.Fatal("at the longest period over the budget, no warning")
		}
	}
	if p.Period() != MaxPeriod {
		t.Fatalf("the period reached %v, not %v", p.Period(), MaxPeriod)
	}
	w := p.Adapt(WindowCost{Interval: MaxPeriod, Share: 0.01, Length: MinWindow, Stalled: time.Second})
	if w == nil || w.Stalled != time.Second {
		t.Fatalf("a stall of 1 s in 10: warned %+v", w)
	}
	// Within the budget at the longest period: no warning.
	if w := p.Adapt(WindowCost{Interval: MaxPeriod, Share: 0.03, Length: MinWindow}); w != nil && p.Period() != MaxPeriod {
		t.Fatalf("warned %+v within the budget", w)
	}
}

// TestFirstDelay: a run's first window waits as long as the budget takes
// to pay for it at the cost the counted calls estimate.
func TestFirstDelay(t *testing.T) {
	p := NewPacer(0.05)
	if d := p.FirstDelay(0); d != 0 {
		t.Fatalf("nothing to pay for: %v", d)
	}
	// A window of 10 ms and a closing of 10 ms at 2% against a 2%
	// target: 20 ms.
	if d := p.FirstDelay(0.02); (d - 20*time.Millisecond).Abs() > time.Microsecond {
		t.Fatalf("delay %v, want 20ms", d)
	}
	// All of the process at most, MaxPeriod at most.
	if d := p.FirstDelay(5); (d - time.Second).Abs() > time.Microsecond {
		t.Fatalf("delay %v, want 1s", d)
	}
	if d := NewPacer(0.0001).FirstDelay(1); d != MaxPeriod {
		t.Fatalf("delay %v, want %v", d, MaxPeriod)
	}
	if d := NewPacer(0).FirstDelay(1); d != 0 {
		t.Fatalf("no budget: %v", d)
	}
}

// TestClosingWait: the closing's wait follows the sampled calls' 99th
// percentile (one and a half times), keeps the latest MaxDurations, and
// is bounded.
func TestClosingWait(t *testing.T) {
	p := NewPacer(0.05)
	p.Closed()
	if p.wait != 0 || p.ClosingWait() != MinWindow {
		t.Fatalf("no call seen: wait %v, closing wait %v", p.wait, p.ClosingWait())
	}
	for i := range 100 {
		p.Observe(time.Duration(i+1) * time.Millisecond) // 1 to 100 ms
	}
	p.Closed()
	if want := 150 * time.Millisecond; p.ClosingWait() != want {
		t.Fatalf("wait %v for calls of 1 to 100 ms, want %v", p.ClosingWait(), want)
	}
	for range MaxDurations {
		p.Observe(3 * time.Second)
	}
	p.Closed()
	if p.Durations() != MaxDurations || p.ClosingWait() != MaxClosing {
		t.Fatalf("%d durations kept, wait %v, want %d and %v", p.Durations(), p.ClosingWait(), MaxDurations, MaxClosing)
	}
	// The ring replaces the oldest: short calls again bring it down.
	for range MaxDurations {
		p.Observe(time.Millisecond)
	}
	p.Closed()
	if p.ClosingWait() != MinWindow {
		t.Fatalf("after short calls, wait %v, want %v", p.ClosingWait(), MinWindow)
	}
	// Half the window when that is longer.
	p.window = 300 * time.Millisecond
	if p.ClosingWait() != 150*time.Millisecond {
		t.Fatalf("wait %v with a 300 ms window", p.ClosingWait())
	}
}

// TestClosing walks closings on a fake clock, a millisecond a step as the
// caller polls.
func TestClosing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Every call returned: over at once.
	if c := NewClosing(t0, 100*time.Millisecond); !c.Done(at(0), 5, 5, false) {
		t.Fatal("all returned, not done")
	}
	// Calls open, none returning: the wait, then half of it quiet (the
	// last return being the start): over at 100 ms.
	c := NewClosing(t0, 100*time.Millisecond)
	done := -1
	for ms := 0; ms <= 2000 && done < 0; ms++ {
		if c.Done(at(ms), 5, 0, false) {
			done = ms
		}
	}
	if done != 100 {
		t.Fatalf("a closing with calls that never return ended at %d ms, want 100", done)
	}
	// Calls returning every 30 ms, one never: the closing waits while
	// they return, and ends 50 ms after the last (half the wait).
	c = NewClosing(t0, 100*time.Millisecond)
	done = -1
	for ms := 0; ms <= 2000 && done < 0; ms++ {
		back := uint64(min(ms/30, 9)) // returns at 30, 60, ... 270 ms
		if c.Done(at(ms), 10, back, false) {
			done = ms
		}
	}
	if done != 320 {
		t.Fatalf("ended at %d ms, want 320 (50 ms after the last return at 270)", done)
	}
	// Calls that keep returning forever: MaxClosing.
	c = NewClosing(t0, 100*time.Millisecond)
	done = -1
	for ms := 0; ms <= 5000 && done < 0; ms++ {
		if c.Done(at(ms), uint64(ms+10), uint64(ms), false) {
			done = ms
		}
	}
	if time.Duration(done)*time.Millisecond != MaxClosing {
		t.Fatalf("ended at %d ms, want %v", done, MaxClosing)
	}
	// The run ending: the wait only, though calls still return.
	c = NewClosing(t0, 100*time.Millisecond)
	done = -1
	for ms := 0; ms <= 2000 && done < 0; ms++ {
		if c.Done(at(ms), uint64(ms+10), uint64(ms), true) {
			done = ms
		}
	}
	if done != 100 {
		t.Fatalf("ending: ended at %d ms, want 100", done)
	}
	// A short wait is quiet for MinWindow at least.
	c = NewClosing(t0, 0)
	if c.Done(at(5), 3, 0, false) || !c.Done(at(10), 3, 0, false) {
		t.Fatal("a closing without a wait did not end at MinWindow")
	}
}
