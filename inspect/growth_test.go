package inspect

import (
	"testing"
	"time"
)

// TestCompare checks the growth between two snapshots by creation site
// and stack, and the rule for a goroutine that has not moved: waiting in
// both, the same g, sp, innermost shown frame, wait and transition
// count (a wait not yet stamped before matches any).
func TestCompare(t *testing.T) {
	site := func(fn string, line int) *Frame { return &Frame{Function: fn, File: "/m/main.go", Line: line} }
	fanOut, worker := site("main.fanOut", 88), site("main.startWorkers", 12)
	parked := func(id uint64, by *Frame, since int64, seq uint8) *Goroutine {
		return &Goroutine{ID: id, Addr: 0x1000 * id, SP: 0x9000 + id, Status: "waiting", State: "chan receive", WaitReason: "chan receive",
			WaitSince: since, Transitions: seq, CreatedBy: by,
			Frames: []Frame{{Function: "runtime.gopark", PC: 0x400, Elided: true}, {Function: "main.handle", PC: 0x500, File: "/m/main.go", Line: 90}}}
	}
	t0 := time.Unix(1000, 0)
	before := &Snapshot{Taken: t0, Goroutines: []*Goroutine{
		parked(1, fanOut, 5, 1), parked(2, fanOut, 0, 7), parked(3, worker, 5, 1), parked(4, worker, 5, 1), parked(5, worker, 5, 1),
		{ID: 6, System: true, Status: "waiting"},
	}}
	moved := parked(4, worker, 9, 1)   // a new wait
	ran := parked(5, worker, 5, 2)     // ran and parked again in the same place
	running := parked(3, worker, 5, 1) // running now
	running.Status, running.State = "running", "running"
	after := &Snapshot{Taken: t0.Add(2 * time.Second), Goroutines: []*Goroutine{
		parked(1, fanOut, 5, 1), parked(2, fanOut, 11, 7), running, moved, ran,
		parked(7, fanOut, 0, 0), parked(8, fanOut, 0, 0), parked(9, fanOut, 0, 0), parked(10, fanOut, 0, 0),
		{ID: 11, System: true, Status: "waiting"},
	}}
	g := Compare(before, after)
	if g.Interval != 2*time.Second || g.Before != 5 || g.After != 9 {
		t.Fatalf("interval %v, %d before, %d after", g.Interval, g.Before, g.After)
	}
	if len(g.Sites) != 2 || g.Sites[0].Function != "main.fanOut" || g.Sites[0].Before != 2 || g.Sites[0].After != 6 || g.Sites[0].Unmoved != 2 ||
		g.Sites[1].Function != "main.startWorkers" || g.Sites[1].Delta() != 0 || g.Sites[1].Unmoved != 0 {
		t.Errorf("sites %+v", g.Sites)
	}
	ids := map[uint64]bool{}
	for _, u := range g.Unmoved {
		ids[u.ID] = true
	}
	if len(ids) != 2 || !ids[1] || !ids[2] {
		t.Errorf("unmoved %v, want goroutines 1 (the same wait) and 2 (stamped since)", ids)
	}
	if len(g.Stacks) == 0 || g.Stacks[0].Delta() != 4 || g.Stacks[0].Representative.CreatedBy != fanOut {
		t.Errorf("the most grown stack: %+v", g.Stacks[0])
	}
}
