package inspect

import (
	"encoding/binary"

	"github.com/gi-debug/gi/runtimelayout"
)

// A goroutine in sync.(*Cond).Wait sleeps in runtime.notifyListWait with a
// sudog queued in the notifyList inside its Cond. Since Go 1.26 g.waiting
// is that sudog and its elem the list. Before, nothing in the g points at
// either; its stack does: Wait keeps the Cond (for c.L.Lock after the
// wake-up) and &c.notify in its frame, notifyListWait keeps the list and
// the sudog, in temporaries DWARF does not locate. So the stop reads the
// words of the waiter's innermost frames as possible Conds, and keeps only
// real ones: a Cond's copyChecker holds its own address once the Cond has
// been waited on. After the stop, a Cond is a goroutine's only if the
// goroutine's sudog is in its queue (condOf).

// maxCondFrames bounds the walk from a Cond waiter's innermost frame
// (gopark) to sync.(*Cond).Wait.
const maxCondFrames = 8

// condWaitReason returns the value of g.waitreason for "sync.Cond.Wait",
// and whether Cond waiters can be followed: the binary describes
// sync.Cond and runtime.notifyList.
func (t *Target) condWaitReason() (uint8, bool) {
	W := &t.Layout.Wait
	if W.CondNotify == runtimelayout.Missing || W.CondChecker == runtimelayout.Missing || W.NotifyList.Size == 0 || t.sym == nil {
		return 0, false
	}
	for i, r := range t.waitReasons {
		if r == "sync.Cond.Wait" && i < 256 {
			return uint8(i), true
		}
	}
	return 0, false
}

// condFollower queues, in the stop, the reads that find the Cond each
// Cond waiter waits on. Done naively on releases before Go 1.26, that is
// two dozen reads per waiter (most words are no address at all), and one
// round of reads per waiter in a Cond's queue, which is linked one way.
// So one waiter per frame layout (where it parked and the frames' size) is
// the pilot: all its words are read as Conds and as its own sudog. After
// that first round, the slots that held its sudog and real Conds are
// known, and only those words are read for the other waiters of the
// layout; a queue is then walked through sudogs already copied. This only
// chooses what to read: which Cond is whose is decided after the stop by
// walking the queues (condOf), and a waiter whose words were not read is
// reported unknown, never guessed.
type condFollower struct {
	t *Target
	// Conds and sudogs already queued, apart: a word of a waiter's stack
	// may be its own sudog, read again as a Cond candidate.
	conds, sudogs map[uint64]bool
	pilots        map[condFrame]*condPilot
	// bySudog is set when the waiters' sudogs come from g.waiting (Go
	// 1.26+): each waiter names its Cond itself, and a Cond's list of
	// sudogs, linked one way (one round of reads per waiter), is not
	// walked.
	bySudog bool
}

// condFrame identifies the frames of a Cond waiter from its stack pointer
// to the end of sync.(*Cond).Wait: where it parked, and their size.
type condFrame struct {
	pc   uint64
	size uint64
}

// condPilot is the first waiter of a frame layout, what its words turned
// out to be, and the waiters that wait for it.
type condPilot struct {
	rg      *rawG
	size    uint64     // of the frames, the layout's
	words   []condWord // its words read as Conds
	slot    int        // the word that held its sudog, -1 until found
	pending []*rawG
}

// condWord is a stack word read as a Cond: at offset off, the Cond itself
// (c) or its list (&c.notify, l).
type condWord struct {
	off  int
	list bool
	cond uint64
}

func (t *Target) newCondFollower() *condFollower {
	return &condFollower{t: t, conds: map[uint64]bool{}, sudogs: map[uint64]bool{}, pilots: map[condFrame]*condPilot{}}
}

// addSudog queues the read of a Cond waiter's sudog, from g.waiting (Go
// 1.26+): each goroutine's own, with no set to check it against (the stop
// has no per-waiter map), its queue not followed.
func (c *condFollower) addSudog(g, sudog uint64, queue []waitRead) []waitRead {
	c.bySudog = true
	return append(queue, waitRead{addr: sudog, owner: g, size: int32(c.t.Layout.Wait.Sudog.Size), what: readCondSudog})
}

// add queues the reads for one Cond waiter without g.waiting (before Go
// 1.26): for the first of its frame layout, every word from its stack
// pointer to the end of the sync.(*Cond).Wait frame read as a Cond (c), as
// the Cond around a list (&c.notify, l) and as its own sudog; the others
// wait for the first round (endRound).
func (c *condFollower) add(rg *rawG, queue []waitRead) []waitRead {
	t := c.t
	W := &t.Layout.Wait
	end := t.condWaitFrameEnd(rg)
	if end <= rg.sp {
		return queue
	}
	frame := condFrame{rg.pc, end - rg.sp}
	if p := c.pilots[frame]; p != nil {
		p.pending = append(p.pending, rg)
		return queue
	}
	p := &condPilot{rg: rg, size: frame.size, slot: -1, words: c.stackConds(rg, frame.size)}
	c.pilots[frame] = p
	for _, cw := range p.words {
		queue = c.queueCond(cw.cond, queue)
		if !cw.list { // the word itself, read once as the pilot's sudog
			queue = append(queue, waitRead{addr: cw.cond, owner: rg.sp + uint64(cw.off), size: int32(W.Sudog.Size), what: readSudogProbe})
		}
	}
	return queue
}

// stackConds reads each word of rg's innermost size bytes of stack that
// may point at a Cond or a sudog (not a small number, aligned, not code,
// not rg's own stack) as the Cond (c) and as the Cond around its list
// (&c.notify, l).
func (c *condFollower) stackConds(rg *rawG, size uint64) []condWord {
	s, notify := c.t.sym, uint64(c.t.Layout.Wait.CondNotify)
	var out []condWord
	for off := 0; off+8 <= int(size); off += 8 {
		w := binary.LittleEndian.Uint64(rg.stack[off:])
		if w < 1<<12 || w&7 != 0 || (w >= rg.stackLo && w < rg.stackHi) || (w >= s.textLo && w < s.textHi) {
			continue
		}
		out = append(out, condWord{off, false, w}, condWord{off, true, w - notify})
	}
	return out
}

func (c *condFollower) queueCond(addr uint64, queue []waitRead) []waitRead {
	if addr == 0 || c.conds[addr] {
		return queue
	}
	c.conds[addr] = true
	return append(queue, waitRead{addr: addr, size: int32(c.t.Layout.Wait.CondSize), what: readCond})
}

func (c *condFollower) queueSudog(s uint64, queue []waitRead) []waitRead {
	if s == 0 || s&7 != 0 || c.sudogs[s] {
		return queue
	}
	c.sudogs[s] = true
	return append(queue, waitRead{addr: s, size: int32(c.t.Layout.Wait.Sudog.Size), what: readListSudog})
}

// isCond tells whether b, read at addr, is a sync.Cond that has been
// waited on: its copyChecker holds its own address.
func (t *Target) isCond(addr uint64, b []byte) bool {
	W := &t.Layout.Wait
	return int64(len(b)) >= W.CondChecker+8 && t.u64(b, W.CondChecker) == addr+uint64(W.CondChecker)
}

// sudogCond is the Cond a Go 1.26+ waiter's sudog names (its elem is the
// Cond's list), 0 if none.
func (t *Target) sudogCond(b []byte) uint64 {
	W := &t.Layout.Wait
	if l := t.u64(b, W.Sudog.Elem); l > uint64(W.CondNotify) {
		return l - uint64(W.CondNotify)
	}
	return 0
}

// follow handles one read add or follow queued: a Cond's queue head, a
// sudog's next, a pilot's word that is its own sudog.
func (c *condFollower) follow(r waitRead, b []byte, w *rawWaits, queue []waitRead) []waitRead {
	t := c.t
	W := &t.Layout.Wait
	switch r.what {
	case readCond:
		if !t.isCond(r.addr, b) {
			return queue
		}
		w.conds[r.addr] = b
		if !c.bySudog && t.u64(b, W.CondNotify+W.NotifyList.Tail) != 0 {
			queue = c.queueSudog(t.u64(b, W.CondNotify+W.NotifyList.Head), queue)
		}
	case readCondSudog:
		if t.u64(b, W.Sudog.G) == r.owner {
			queue = c.queueCond(t.sudogCond(b), queue)
		}
	case readSudogProbe:
		for _, p := range c.pilots {
			if p.slot < 0 && r.owner >= p.rg.sp && r.owner < p.rg.sp+p.size && t.u64(b, W.Sudog.G) == p.rg.addr {
				p.slot = int(r.owner - p.rg.sp)
				c.sudogs[r.addr] = true
				queue = c.queueSudog(t.u64(b, W.Sudog.Next), queue)
			}
		}
	case readListSudog:
		queue = c.queueSudog(t.u64(b, W.Sudog.Next), queue)
	}
	return queue
}

// endRound, after a round's reads are handled, queues the reads of the
// waiters that waited for their pilot: the words at the slots the pilot's
// sudog and real Conds were found in, or all their words if no Cond was.
func (c *condFollower) endRound(w *rawWaits, queue []waitRead) []waitRead {
	W := &c.t.Layout.Wait
	for _, p := range c.pilots {
		if len(p.pending) == 0 {
			continue
		}
		var found []condWord
		for _, cw := range p.words {
			if w.conds[cw.cond] != nil {
				found = append(found, cw)
			}
		}
		for _, rg := range p.pending {
			if p.slot >= 0 {
				queue = c.queueSudog(binary.LittleEndian.Uint64(rg.stack[p.slot:]), queue)
			}
			for _, cw := range found {
				addr := binary.LittleEndian.Uint64(rg.stack[cw.off:])
				if cw.list {
					addr -= uint64(W.CondNotify)
				}
				queue = c.queueCond(addr, queue)
			}
			if len(found) > 0 {
				continue
			}
			for _, cw := range c.stackConds(rg, p.size) {
				queue = c.queueCond(cw.cond, queue)
			}
		}
		p.pending = nil
	}
	return queue
}

// condWaitFrameEnd returns the address just past the sync.(*Cond).Wait
// frame of a goroutine's copied stack (the caller's stack pointer), 0 if
// it is not among its innermost frames.
func (t *Target) condWaitFrameEnd(rg *rawG) uint64 {
	s := t.sym
	if rg.stack == nil {
		return 0
	}
	pc, sp := rg.pc, rg.sp
	for n := 0; n < maxCondFrames; n++ {
		f := s.funcFor(pc)
		if f == nil {
			return 0
		}
		delta, err := s.spDelta(f, pc)
		if err != nil {
			return 0
		}
		lr, callerSP, ok := s.callerFrame(rg.stack, rg.sp, sp, delta, n == 0, rg.lr)
		if !ok || callerSP-rg.sp > uint64(len(rg.stack)) {
			return 0
		}
		if f.Name == "sync.(*Cond).Wait" {
			return callerSP
		}
		if lr == 0 {
			return 0
		}
		pc, sp = lr, callerSP
	}
	return 0
}

// condOf tells which Cond each waiter waits on. Since Go 1.26 its sudog
// names the list, as a channel waiter's names its channel; the Cond around
// it must be real (its copyChecker). Before, the Cond's queue is walked
// through the copied sudogs, and only queues that are what they seem
// count: the walk ends at the list's tail, every sudog in it names a
// goroutine of the snapshot and holds a ticket the list handed out and has
// not woken (notify <= ticket < wait). A goroutine gets the Conds whose
// queue holds it (one, unless its stack's words were ambiguous).
func (t *Target) condOf(w *rawWaits, raws map[uint64]*rawG) map[uint64][]uint64 {
	W := &t.Layout.Wait
	N := &W.NotifyList
	of := map[uint64][]uint64{}
	add := func(g, cond uint64) {
		for _, c := range of[g] {
			if c == cond {
				return
			}
		}
		of[g] = append(of[g], cond)
	}
	sudogs := map[uint64][]byte{}
	for _, rd := range w.rounds {
		for i, r := range rd.reads {
			b := rd.bufs[i]
			if b == nil {
				continue
			}
			switch r.what {
			case readListSudog, readSudogProbe:
				sudogs[r.addr] = b
			case readCondSudog:
				if g := t.u64(b, W.Sudog.G); g == r.owner && raws[g] != nil {
					if cond := t.sudogCond(b); w.conds[cond] != nil {
						add(g, cond)
					}
				}
			}
		}
	}
	var queued []uint64
	for addr, b := range w.conds {
		l := b[W.CondNotify:]
		head, tail := t.u64(l, N.Head), t.u64(l, N.Tail)
		wait, notify := t.u32(l, N.Wait), t.u32(l, N.Notify)
		if head == 0 || tail == 0 {
			continue
		}
		queued = queued[:0]
		ok := false
		for s, n := head, 0; n <= len(sudogs); n++ {
			sb := sudogs[s]
			if sb == nil {
				break
			}
			g := t.u64(sb, W.Sudog.G)
			if raws[g] == nil || t.u32(sb, W.Sudog.Ticket)-notify >= wait-notify {
				break
			}
			queued = append(queued, g)
			next := t.u64(sb, W.Sudog.Next)
			if next == 0 {
				ok = s == tail
				break
			}
			s = next
		}
		if !ok {
			continue
		}
		for _, g := range queued {
			add(g, addr)
		}
	}
	return of
}
