package governor

import (
	"slices"
	"testing"
	"time"
)

func TestPartition(t *testing.T) {
	const budget = 0.05
	margin := budget * Margin
	// Busy enough: each function's probes would take a CPU share past
	// the floor. The costliest go first, until the rest takes half the
	// margin; the light one stays whole.
	costs := []Cost{{Share: 0.001, CPU: 0.001}, {Share: 3, CPU: 0.5}, {Share: 0.02, CPU: 0.01}}
	if got := Partition(costs, budget, Cost{}); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("sampled %v, want [1 2]", got)
	}
	// Within the margin, nothing.
	if got := Partition([]Cost{{Share: margin / 4, CPU: 0.01}, {Share: margin / 2, CPU: 0.01}}, budget, Cost{}); len(got) != 0 {
		t.Fatalf("sampled %v within the margin", got)
	}
	// Beside functions traced whole already: a quarter of the margin
	// leaves room for half of it; the whole margin leaves none, and even
	// a light one is sampled, the costliest first.
	if got := Partition([]Cost{{Share: margin / 2, CPU: 0.01}}, budget, Cost{Share: margin / 4, CPU: 0.01}); len(got) != 0 {
		t.Fatalf("sampled %v beside a quarter of the margin", got)
	}
	if got := Partition([]Cost{{Share: margin / 8, CPU: 0.0001}, {Share: margin / 4, CPU: 0.0002}}, budget, Cost{Share: margin, CPU: 0.01}); !slices.Equal(got, []int{1, 0}) {
		t.Fatalf("sampled %v beside the whole margin, want [1 0]", got)
	}
	// An idle process: 8% of its CPU time but 0.15 ms a second of one
	// CPU is under the floor; at the floor, it is sampled.
	idle := []Cost{{Share: 0.08, CPU: 0.00015}}
	if got := Partition(idle, budget, Cost{Share: 0.01, CPU: 0.0002}); len(got) != 0 {
		t.Fatalf("sampled %v under the floor", got)
	}
	if got := Partition(idle, budget, Cost{Share: 0.01, CPU: Floor}); !slices.Equal(got, []int{0}) {
		t.Fatalf("sampled %v past the floor", got)
	}
	// A function that costs nothing is never sampled.
	if got := Partition([]Cost{{Share: 1, CPU: 1}, {}}, budget, Cost{Share: 1, CPU: 1}); !slices.Equal(got, []int{0}) {
		t.Fatalf("sampled %v, want only the costly one", got)
	}
}

func TestDemote(t *testing.T) {
	const budget = 0.05
	// Up to Trigger of the budget, nothing moves, however the cost is
	// shared.
	if got := Demote([]Cost{{Share: Trigger * budget / 2, CPU: 0.1}, {Share: Trigger * budget / 2, CPU: 0.1}}, budget); len(got) != 0 {
		t.Fatalf("moved %v at the trigger", got)
	}
	// Past it, the costliest until the rest takes half the margin: a
	// function at 4% beside two at 0.5% (budget 5%: margin 2%, half 1%).
	costs := []Cost{{Share: 0.005, CPU: 0.01}, {Share: 0.04, CPU: 0.08}, {Share: 0.005, CPU: 0.01}}
	if got := Demote(costs, budget); !slices.Equal(got, []int{1}) {
		t.Fatalf("moved %v, want [1]", got)
	}
	// Three at 1.5%: 4.5%, then 3%, then 1.5%, still past half the
	// margin: all three move.
	even := []Cost{{Share: 0.015, CPU: 0.02}, {Share: 0.015, CPU: 0.02}, {Share: 0.015, CPU: 0.02}}
	if got := Demote(even, budget); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("moved %v, want all three in order", got)
	}
	// An idle process: half its CPU time, but under the floor of one
	// CPU's: nothing moves.
	if got := Demote([]Cost{{Share: 0.5, CPU: Floor / 2}}, budget); len(got) != 0 {
		t.Fatalf("moved %v under the floor", got)
	}
	if got := Demote(nil, budget); len(got) != 0 {
		t.Fatalf("moved %v of nothing", got)
	}
}

func TestQuantile(t *testing.T) {
	if q := Quantile(nil, 0.99); q != 0 {
		t.Fatalf("quantile of nothing %v", q)
	}
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond
	}
	if q := Quantile(ds, 0.99); q != 100*time.Millisecond {
		t.Fatalf("q99 %v, want 100ms", q)
	}
	if q := Quantile(ds, 0.5); q != 51*time.Millisecond {
		t.Fatalf("median %v, want 51ms", q)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("Quantile sorted its argument")
	}
}
