package inspect

import (
	"slices"
	"testing"
)

// TestFrameArenaShares checks that equal frame lists are kept once and
// lists that differ are never given one another's frames, even when their
// hashes are made to collide.
func TestFrameArenaShares(t *testing.T) {
	a := &frameArena{}
	parked := []Frame{{Function: "runtime.gopark", PC: 0x401000, Line: 435}, {Function: "main.parked", PC: 0x4a0010, Line: 48}}
	first := a.keep(slices.Clone(parked))
	second := a.keep(slices.Clone(parked))
	if &first[0] != &second[0] || !slices.Equal(first, parked) {
		t.Errorf("equal frames kept twice: %p, %p", &first[0], &second[0])
	}
	other := slices.Clone(parked)
	other[1].Line = 49
	kept := a.keep(other)
	if &kept[0] == &first[0] || !slices.Equal(kept, other) {
		t.Errorf("frames differing in a line got %v", kept)
	}
	// A list already kept under other's hash must not be returned for it.
	a.seen[framesHash(other)] = first
	if got := a.keep(other); !slices.Equal(got, other) {
		t.Errorf("colliding hash: got %v, want %v", got, other)
	}
	if got := a.keep(nil); got != nil {
		t.Errorf("no frames kept as %v", got)
	}
}

// TestWaitInternerShares does the same for what goroutines wait on.
func TestWaitInternerShares(t *testing.T) {
	in := waitInterner{}
	chanState := &ChanState{}
	recv := []WaitObject{{Kind: "chan", Addr: 0xc000010000, Type: "chan int", Dir: "recv", Chan: chanState}}
	first := in.keep(slices.Clone(recv))
	if second := in.keep(slices.Clone(recv)); &second[0] != &first[0] {
		t.Error("equal waits kept twice")
	}
	send := slices.Clone(recv)
	send[0].Dir = "send"
	if got := in.keep(send); &got[0] == &first[0] || got[0].Dir != "send" {
		t.Errorf("a send got %+v", got)
	}
	// Same fields, another channel's state: not the same wait.
	otherChan := slices.Clone(recv)
	otherChan[0].Chan = &ChanState{}
	if got := in.keep(otherChan); &got[0] == &first[0] {
		t.Error("a wait on another channel's state was shared")
	}
}

// TestScanListsJoin checks that the lists chunks fill in their own slots
// are joined in order, each chunk's entries moved down over the slots the
// chunks before it left empty.
func TestScanListsJoin(t *testing.T) {
	const n, chunk = 10, 4
	lists := newScanLists(n)
	var parts []gScan
	var want []int32
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		p := gScan{scanLists: lists.part(lo, hi)}
		for i := lo; i < hi; i++ {
			if i%3 != 0 { // some g's of each chunk are dead
				p.live = append(p.live, int32(i))
				p.waiters = append(p.waiters, waiter{g: uint64(i)})
				want = append(want, int32(i))
			}
		}
		parts = append(parts, p)
	}
	joined := lists.join(parts)
	if !slices.Equal(joined.live, want) {
		t.Errorf("live %v, want %v", joined.live, want)
	}
	for i, w := range joined.waiters {
		if w.g != uint64(want[i]) {
			t.Errorf("waiter %d is g %d, want %d", i, w.g, want[i])
		}
	}
	if len(joined.stackless) != 0 || len(joined.labelled) != 0 || len(joined.onThread) != 0 {
		t.Errorf("empty lists joined into %d, %d, %d entries", len(joined.stackless), len(joined.labelled), len(joined.onThread))
	}
}
