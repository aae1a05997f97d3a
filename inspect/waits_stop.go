package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gi-debug/gi/proc"
)

// Bounds of the walks over the structures blocked goroutines wait through.
const (
	maxWaitRounds   = 1 << 12 // batched reads following sudog links
	maxSudogsPerG   = 4       // sudogs per goroutine on average, plus slack
	maxSudogsSlack  = 1 << 12
	semWindowBefore = 16 // bytes read before a semaphore: the sync object around it
	semWindowLen    = 32
	// windowPage is the smallest page: a mapping begins and ends on one.
	windowPage = 4096
)

// semWindow is the bytes around a semaphore, from semWindowBefore bytes
// before it, of which [lo, hi) were read (a window at the edge of a
// mapping is read within the semaphore's page).
type semWindow struct {
	bytes  []byte
	lo, hi int
}

// rawWaits is what the stop copied of the objects goroutines wait on. The
// stop only copies (the sudogs stay in rounds, in read order); the sudog
// map is built after the process is resumed (index).
type rawWaits struct {
	// rounds are the sudog reads of each round: addresses and bytes.
	rounds []waitRound
	sudogs map[uint64][]byte // by address, built by index
	chans  map[uint64][]byte
	// semaOf maps a g's address to the semaphore its goroutine sleeps on
	// (from the semaphore table), windows the bytes around each semaphore.
	semaOf  map[uint64]uint64
	windows map[uint64]semWindow
	// timerWhen maps a g's address to its time.Sleep deadline, read from
	// its timer (before Go 1.23; later releases keep it in the g).
	timerWhen map[uint64]int64
	// polls are the netpoller's pollDescs registered with epoll, by
	// address: their bytes, and the descriptor each is for.
	polls  map[uint64][]byte
	pollFD map[uint64]int
	// conds are the sync.Conds Cond waiters may wait on, by address (only
	// those whose copyChecker holds its own address); the sudogs their
	// queues were followed through stay in rounds. Which Cond is a
	// goroutine's is decided after the stop (condOf).
	conds    map[uint64][]byte
	problems []string
}

type waitRead struct {
	addr  uint64
	owner uint64 // g address for timers, the semaphore for windows
	size  int32
	what  readKind
}

// readKind is what a waitRead copies.
type readKind int32

const (
	readSudog      readKind = iota
	readChan                // a runtime.hchan
	readTimer               // a time.Sleep timer's deadline
	readWindow              // the bytes around a semaphore: its sync object
	readPollDesc            // a runtime.pollDesc
	readCond                // a sync.Cond a waiter may wait on
	readListSudog           // a sudog reached from a notifyList
	readSudogProbe          // a word of a Cond waiter's stack read as its sudog
	readCondSudog           // a Cond waiter's sudog, from g.waiting (Go 1.26+)
)

// waitRound is one round of reads and what they returned (nil if failed).
type waitRound struct {
	reads []waitRead
	bufs  [][]byte
}

// waitScratch is memory for the first round of reads (one sudog per
// waiting goroutine), faulted in before the stop.
type waitScratch struct {
	reads  []waitRead
	sorted []waitRead // sortReads' room
	bufs   [][]byte
	member []int32
	ranges []proc.Range
	offs   []int
}

// copyWaits follows, in the stop, what the waiting goroutines wait
// through: each one's sudogs (g.waiting) and the channels they point at,
// the semaphore table's treaps of sync waiters, the sync objects around
// those semaphores, and time.Sleep timers. Each round of links is one
// batched read (adjacent objects merged into one range); every walk is
// bounded. It does as little as it can while the process is stopped: no
// per-sudog map, buffers faulted in before the stop (pool).
func (t *Target) copyWaits(waiters []waiter, live int, pool []byte, scratch *waitScratch, polls map[uint64]int) *rawWaits {
	W := &t.Layout.Wait
	w := &rawWaits{chans: map[uint64][]byte{}, semaOf: map[uint64]uint64{}, windows: map[uint64]semWindow{}, timerWhen: map[uint64]int64{},
		polls: map[uint64][]byte{}, pollFD: polls, conds: map[uint64][]byte{}}
	if !W.Known {
		return w
	}
	var next []waitRead
	if scratch != nil {
		next = scratch.reads[:0]
	}
	sudogSize := W.Sudog.Size
	// Sudogs of the semaphore table may be reached twice (from g.waiting
	// since Go 1.26, and from the table): those are few, deduplicated.
	semaQueued := map[uint64]bool{}
	queueSema := func(p uint64) {
		if p != 0 && !semaQueued[p] {
			semaQueued[p] = true
			next = append(next, waitRead{addr: p, size: int32(sudogSize)})
		}
	}
	condReason, followConds := t.condWaitReason()
	conds := t.newCondFollower()
	for _, w := range waiters {
		if followConds && w.reason == condReason {
			if w.waiting != 0 {
				next = conds.addSudog(w.g, w.waiting, next)
			} else if w.rg != nil {
				next = conds.add(w.rg, next)
			}
			continue
		}
		if w.waiting != 0 {
			next = append(next, waitRead{addr: w.waiting, size: int32(sudogSize)})
		}
		if w.timer != 0 {
			next = append(next, waitRead{addr: w.timer + uint64(W.TimerWhen), size: 8, what: readTimer, owner: w.g})
		}
	}
	for pd := range polls {
		next = append(next, waitRead{addr: pd, size: int32(W.PollDesc.WG + 8), what: readPollDesc})
	}
	if W.SemTable != 0 {
		table := make([]byte, W.SemTableLen*W.SemRootSize)
		if _, err := t.Mem.ReadAt(table, W.SemTable+t.Bias); err != nil {
			w.problems = append(w.problems, fmt.Sprintf("semaphore table unreadable: %v", err))
		} else {
			for i := int64(0); i < W.SemTableLen; i++ {
				queueSema(t.u64(table, i*W.SemRootSize+W.SemRootTreap))
			}
		}
	}
	// In address order, the first round's objects (one sudog per waiter,
	// mostly) merge into a few ranges: 100k sudogs read in waiter order
	// took 42k iovecs, in address order they take a few hundred.
	var tmp []waitRead
	if scratch != nil && len(scratch.sorted) >= len(next) {
		tmp = scratch.sorted[:len(next)]
	} else {
		tmp = make([]waitRead, len(next))
	}
	next = sortReads(next, tmp)
	maxSudogs := maxSudogsPerG*live + maxSudogsSlack
	chanQueued := map[uint64]bool{}
	lastChan := uint64(0)
	semas := map[uint64]bool{}
	sudogs := 0
	for round := 0; len(next) > 0; round++ {
		if round == maxWaitRounds || sudogs > maxSudogs {
			w.problems = append(w.problems, fmt.Sprintf("gave up following waiters after %d rounds and %d sudogs", round, sudogs))
			break
		}
		reads := next
		next = nil
		bufs, failed, rest := t.readAll(reads, pool, scratch)
		scratch = nil // used by the first, largest round only
		pool = rest
		w.rounds = append(w.rounds, waitRound{reads: reads, bufs: bufs})
		for i, r := range reads {
			if failed != nil && failed[i] {
				bufs[i] = nil
				// A window that began below its mapping (a sync
				// object at the start of the heap's first arena):
				// read again from the semaphore's page.
				if r.what == readWindow && r.size == semWindowLen { // not a retry
					page := r.owner &^ (windowPage - 1)
					lo, hi := max(r.addr, page), min(r.addr+semWindowLen, page+windowPage)
					if lo != r.addr || hi != r.addr+semWindowLen {
						next = append(next, waitRead{addr: lo, size: int32(hi - lo), what: readWindow, owner: r.owner})
					}
				}
				continue
			}
			b := bufs[i]
			switch r.what {
			case readChan:
				w.chans[r.addr] = b
			case readTimer:
				w.timerWhen[r.owner] = int64(binary.LittleEndian.Uint64(b))
			case readWindow:
				// Kept as if read from semWindowBefore bytes before the
				// semaphore: what a window read from its page lacks
				// is zero (not the object's: it lies in the page).
				win := semWindow{bytes: b, hi: len(b)}
				if at := int(r.addr - (r.owner - semWindowBefore)); at > 0 || len(b) < semWindowLen {
					win.bytes = make([]byte, semWindowLen)
					win.lo, win.hi = at, at+copy(win.bytes[at:], b)
				}
				w.windows[r.owner] = win
			case readPollDesc:
				w.polls[r.addr] = b
			case readCond, readListSudog, readSudogProbe, readCondSudog:
				if r.what != readCond {
					sudogs++
				}
				next = conds.follow(r, b, w, next)
			case readSudog:
				sudogs++
				// A channel's sudog points at it; the others sleep on a
				// semaphore (reached from the semaphore table, and from
				// g.waiting since Go 1.26) or on a sync.Cond's list.
				if c := t.u64(b, W.Sudog.C); c != 0 {
					if l := t.u64(b, W.Sudog.WaitLink); l != 0 { // the next case of a select
						next = append(next, waitRead{addr: l, size: int32(sudogSize)})
					}
					if c != lastChan && !chanQueued[c] {
						chanQueued[c] = true
						next = append(next, waitRead{addr: c, size: int32(W.Chan.Size), what: readChan})
					}
					lastChan = c
					continue
				}
				semaQueued[r.addr] = true // reached from g.waiting: the table need not read it again
				queueSema(t.u64(b, W.Sudog.Prev))
				queueSema(t.u64(b, W.Sudog.Next))
				queueSema(t.u64(b, W.Sudog.WaitLink))
				if sema := t.u64(b, W.Sudog.Elem); sema > semWindowBefore && !semas[sema] {
					semas[sema] = true
					next = append(next, waitRead{addr: sema - semWindowBefore, size: semWindowLen, what: readWindow, owner: sema})
				}
			}
		}
		next = conds.endRound(w, next)
	}
	return w
}

// pollDescs finds, before the stop, the netpoller's pollDescs: the data
// word of each epoll registration is a pollDesc's address (Go 1.21+: a
// tagged pointer), confirmed by reading the descriptor number the pollDesc
// holds. Only for a process whose epoll registrations are known (a live
// one, a core gi wrote) and whose binary describes pollDesc.
func (t *Target) pollDescs() map[uint64]int {
	P := &t.Layout.Wait.PollDesc
	if t.process == nil || t.process.EpollRegistrations == nil || P.Size == 0 || t.SkipWaits || !t.Layout.Wait.Known {
		return nil
	}
	regs, err := t.process.EpollRegistrations()
	if err != nil {
		return nil
	}
	// The encoding of the data word depends on the release and the
	// address bits the runtime assumes: untagged (Go 1.20), or the pointer
	// shifted up with tag bits below (tagged pointers: 19 tag bits for
	// 48-bit addresses, 10 for 57-bit ones, ...). Whichever makes the word
	// a pollDesc holding its own descriptor number is the one; it is found
	// once and used for the rest.
	decode := func(data uint64, tagBits int) uint64 {
		if tagBits == 0 {
			return data
		}
		return data >> tagBits << 3
	}
	out := map[uint64]int{}
	encodings := []int{0, 19, 10, 11, 12, 13, 14, 15, 16, 17, 18, 20, 21, 22, 23, 24}
	found := -1
	for data, fd := range regs {
		for _, tb := range encodings {
			if found >= 0 && tb != found {
				continue
			}
			pd := decode(data, tb)
			if pd == 0 {
				continue
			}
			if v, err := t.readWord(pd + uint64(P.FD)); err == nil && v == uint64(fd) {
				out[pd], found = fd, tb
				break
			}
		}
	}
	return out
}

// sortReads returns reads sorted by address: reads itself, or tmp (as
// long as reads) holding them. A radix sort (11 bits a pass over the
// span of the addresses): 100k reads in about a millisecond, in the stop.
func sortReads(reads, tmp []waitRead) []waitRead {
	if len(reads) < 2 {
		return reads
	}
	lo, hi := reads[0].addr, reads[0].addr
	sorted := true
	for i, r := range reads {
		lo, hi = min(lo, r.addr), max(hi, r.addr)
		if i > 0 && r.addr < reads[i-1].addr {
			sorted = false
		}
	}
	if sorted {
		return reads
	}
	const digit = 11
	const mask = 1<<digit - 1
	var count [1 << digit]int32
	src, dst := reads, tmp[:len(reads)]
	for shift := 0; shift < 64 && (hi-lo)>>shift != 0; shift += digit {
		clear(count[:])
		for _, r := range src {
			count[((r.addr-lo)>>shift)&mask]++
		}
		sum := int32(0)
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, r := range src {
			d := ((r.addr - lo) >> shift) & mask
			dst[count[d]] = r
			count[d]++
		}
		src, dst = dst, src
	}
	return src
}

// maxMergeGap is the largest hole between two objects read as one range.
const maxMergeGap = 64

// readAll reads every range in one batch, merging ranges that follow one
// another in memory (objects of one size class allocated in a row) into
// one; buffers come from pool while it lasts. failed lists the reads that
// could not be done (nil if none); rest is what is left of pool.
func (t *Target) readAll(reads []waitRead, pool []byte, scratch *waitScratch) (out [][]byte, failed map[int]bool, rest []byte) {
	var member []int32 // the range each read is in
	var ranges []proc.Range
	var offs []int // where each range starts in buf
	if scratch != nil && len(scratch.member) >= len(reads) && len(scratch.bufs) >= len(reads) && len(scratch.offs) >= len(reads) {
		member, out = scratch.member[:len(reads)], scratch.bufs[:len(reads)]
		ranges, offs = scratch.ranges[:0], scratch.offs
	} else {
		member, out = make([]int32, len(reads)), make([][]byte, len(reads))
		offs = make([]int, len(reads))
	}
	for i, r := range reads {
		lo, hi := r.addr, r.addr+uint64(r.size)
		if n := len(ranges); n > 0 {
			last := &ranges[n-1]
			if end := last.Addr + uint64(last.Len); lo >= last.Addr && (lo <= end || lo-end <= maxMergeGap) {
				// Right after the range, or inside it (reads in address
				// order may overlap: the same object twice).
				last.Len = int(max(hi, end) - last.Addr)
				member[i] = int32(n - 1)
				continue
			}
		}
		ranges = append(ranges, proc.Range{Addr: lo, Len: int(hi - lo)})
		member[i] = int32(len(ranges) - 1)
	}
	total := 0
	for i, r := range ranges {
		offs[i] = total
		total += r.Len
	}
	var buf []byte
	if len(pool) >= total {
		buf, rest = pool[:total:total], pool[total:]
	} else {
		buf, rest = make([]byte, total), pool
	}
	var rangeFailed map[int]bool
	if err := t.Mem.ReadBatch(ranges, buf); err != nil {
		rangeFailed = map[int]bool{}
		var be *proc.BatchError
		if errors.As(err, &be) {
			for _, i := range be.Failed {
				rangeFailed[i] = true
			}
		} else {
			for i := range ranges {
				rangeFailed[i] = true
			}
		}
	}
	for i, r := range reads {
		s := int(member[i])
		if rangeFailed[s] {
			if failed == nil {
				failed = map[int]bool{}
			}
			failed[i] = true
			continue
		}
		o := offs[s] + int(r.addr-ranges[s].Addr)
		out[i] = buf[o : o+int(r.size) : o+int(r.size)]
	}
	return out, failed, rest
}
