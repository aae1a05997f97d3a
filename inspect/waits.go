package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// Bounds of the walks over the structures blocked goroutines wait through.
const (
	maxWaitRounds   = 1 << 12 // batched reads following sudog links
	maxSudogsPerG   = 4       // sudogs per goroutine on average, plus slack
	maxSudogsSlack  = 1 << 12
	semWindowBefore = 16 // bytes read before a semaphore: the sync object around it
	semWindowLen    = 32
)

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
	windows map[uint64][]byte
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
	owner uint64 // g address for timers
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
	w := &rawWaits{chans: map[uint64][]byte{}, semaOf: map[uint64]uint64{}, windows: map[uint64][]byte{}, timerWhen: map[uint64]int64{},
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
				continue
			}
			b := bufs[i]
			switch r.what {
			case readChan:
				w.chans[r.addr] = b
			case readTimer:
				w.timerWhen[r.owner] = int64(binary.LittleEndian.Uint64(b))
			case readWindow:
				w.windows[r.addr+semWindowBefore] = b
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
					next = append(next, waitRead{addr: sema - semWindowBefore, size: semWindowLen, what: readWindow})
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
// holds. Only for a live process whose binary describes pollDesc.
func (t *Target) pollDescs() map[uint64]int {
	P := &t.Layout.Wait.PollDesc
	if !t.live || P.Size == 0 || t.SkipWaits || !t.Layout.Wait.Known {
		return nil
	}
	regs, err := proc.EpollRegistrations(t.PID)
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

// ioWaiters maps the goroutines the copied pollDescs name as waiting to
// read (rg) or write (wg) to their pollDesc and side.
func (t *Target) ioWaiters(w *rawWaits, raws map[uint64]*rawG) map[uint64]ioWait {
	P := &t.Layout.Wait.PollDesc
	out := map[uint64]ioWait{}
	for pd, b := range w.polls {
		if g := t.u64(b, P.RG); raws[g] != nil {
			out[g] = ioWait{pd: pd, fd: w.pollFD[pd], dir: "read"}
		}
		if g := t.u64(b, P.WG); raws[g] != nil {
			out[g] = ioWait{pd: pd, fd: w.pollFD[pd], dir: "write"}
		}
	}
	return out
}

type ioWait struct {
	pd  uint64
	fd  int
	dir string
}

// problemWarnings are the snapshot warnings of what could not be followed.
func (w *rawWaits) problemWarnings() []string {
	out := make([]string, len(w.problems))
	for i, p := range w.problems {
		out[i] = "waiting on: " + p
	}
	return out
}

// index builds, after the stop, the maps decoding needs: sudogs by
// address, validated (each must name a goroutine of the snapshot), and the
// semaphore each sync waiter sleeps on.
func (t *Target) index(w *rawWaits, raws map[uint64]*rawG) {
	W := &t.Layout.Wait
	w.sudogs = map[uint64][]byte{}
	bad := 0
	for _, rd := range w.rounds {
		for i, r := range rd.reads {
			b := rd.bufs[i]
			if r.what != readSudog || b == nil {
				continue
			}
			g := t.u64(b, W.Sudog.G)
			if raws[g] == nil {
				// Not a waiter of a live goroutine: a structure that does
				// not make sense; its links were followed no further than
				// the bound.
				bad++
				continue
			}
			w.sudogs[r.addr] = b
			if t.u64(b, W.Sudog.C) == 0 {
				if sema := t.u64(b, W.Sudog.Elem); sema != 0 {
					w.semaOf[g] = sema
				}
			}
		}
	}
	if bad > 0 {
		w.problems = append(w.problems, fmt.Sprintf("%d sudogs do not name a goroutine: ignored", bad))
	}
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

// WaitObject is one object a blocked goroutine waits on, as read in the
// stop. A select waits on several.
type WaitObject struct {
	// Kind is "chan", "mutex", "rwmutex", "waitgroup", "cond", "sema",
	// "timer" or "fd".
	Kind string
	// Addr is the object's address in the target (what %p prints); 0 for
	// a nil channel and a sleep's timer.
	Addr uint64
	// Name is the global variable holding the object ("main.slowMu",
	// "main.srv+16" for a field), "" for heap objects.
	Name string
	// Type is the object's Go type: "chan main.job", "*sync.Mutex".
	Type string
	// Dir is the goroutine's side: "send" or "recv" on a channel, "read"
	// or "write" on a RWMutex; "" when not known.
	Dir string
	// Chan is set for channels (not for a nil one).
	Chan *ChanState
	// Sync is set for sync objects.
	Sync *SyncState
	// FD is set for a descriptor (Addr is then its pollDesc, 0 for a
	// blocking system call).
	FD *proc.FD
	// Syscall names the system call a goroutine is blocked in on FD
	// ("read", "accept4"), "" for the netpoller's IO wait.
	Syscall string
	// WakeIn is, for a sleep, how long until the goroutine wakes up.
	WakeIn int64 // nanoseconds, may be negative when overdue
	// Unknown says what could not be learnt ("" when all is known).
	Unknown string
}

// ChanState is a channel as the stop found it.
type ChanState struct {
	Len, Cap  uint64
	Closed    bool
	ElemType  string // "" if unknown (stripped)
	Receivers int    // goroutines queued to receive
	Senders   int    // goroutines queued to send
	// Incomplete is set when a queue could not be walked to its end.
	Incomplete bool
}

// SyncState is a sync object's state word(s) as the stop found them.
type SyncState struct {
	Locked   bool  // Mutex, or RWMutex write-locked / writer pending
	Starving bool  // Mutex
	Readers  int32 // RWMutex: readers holding it
	Counter  int32 // WaitGroup counter
	// Waiters is the number of goroutines the stop found sleeping on it.
	Waiters int
}

// decodeWaits fills WaitingOn of every waiting goroutine.
func (t *Target) decodeWaits(w *rawWaits, gs []*Goroutine, rgs []*rawG, now int64, raws map[uint64]*rawG) {
	W := &t.Layout.Wait
	if w == nil {
		return
	}
	if !W.Known {
		for _, g := range gs {
			if waitKind(g.WaitReason) != "" {
				g.WaitingOn = []WaitObject{{Kind: waitKind(g.WaitReason), Unknown: "the binary does not describe the runtime's wait structures: " + W.Reason}}
			}
		}
		return
	}
	chanDir, queues := t.walkChanQueues(w)
	io := t.ioWaiters(w, raws)
	waiting, inSyscall := t.mustStatus("_Gwaiting"), t.mustStatus("_Gsyscall")
	fds := map[int]*proc.FD{}
	describe := func(fd int) *proc.FD {
		d := fds[fd]
		if d == nil {
			desc := proc.FD{FD: fd}
			if t.live {
				if got, err := proc.DescribeFD(t.PID, fd); err == nil {
					desc = got
				}
			}
			d = &desc
			fds[fd] = d
		}
		return d
	}
	for i, g := range gs {
		// A goroutine blocked in a system call on a descriptor.
		if rg := rgs[i]; rg.inSyscall && g.StatusValue == inSyscall {
			if sc, ok := fdSyscallsFor(t.Binary.Arch)[rg.syscall]; ok && rg.syscallArg0 < 1<<31 {
				d := describe(int(rg.syscallArg0))
				g.WaitingOn = []WaitObject{{Kind: "fd", Dir: sc.dir, Syscall: sc.name, FD: d, Type: typeOr(d.Kind, "fd")}}
			}
		}
	}
	chans := map[uint64]WaitObject{}    // each channel described once: its queues may be long
	objects := map[uint64]*WaitObject{} // sync objects shared by their waiters, counting them
	var condOf map[uint64][]uint64      // the Conds waiters are queued in
	_, followConds := t.condWaitReason()
	describeWait := func(g *Goroutine, rg *rawG) {
		switch reason := g.WaitReason; {
		case reason == "chan receive (nil chan)" || reason == "chan send (nil chan)":
			dir := "recv"
			if strings.HasPrefix(reason, "chan send") {
				dir = "send"
			}
			g.WaitingOn = []WaitObject{{Kind: "chan", Dir: dir, Type: "chan (nil)"}}
		case reason == "chan receive" || reason == "chan send" || reason == "select":
			for s, n := rg.waiting, 0; s != 0 && n < 1<<16; n++ {
				sb, ok := w.sudogs[s]
				if !ok {
					g.WaitingOn = append(g.WaitingOn, WaitObject{Kind: "chan", Unknown: fmt.Sprintf("sudog %#x not copied", s)})
					break
				}
				c := t.u64(sb, W.Sudog.C)
				shared, ok := chans[c]
				if !ok {
					shared = t.chanObject(w, c, queues[c])
					chans[c] = shared
				}
				obj := shared
				obj.Dir = chanDir[s]
				if obj.Dir == "" && reason != "select" {
					obj.Dir = map[string]string{"chan receive": "recv", "chan send": "send"}[reason]
				}
				g.WaitingOn = append(g.WaitingOn, obj)
				s = t.u64(sb, W.Sudog.WaitLink)
			}
		case reason == "sleep":
			var when int64
			if W.GSleepWhen != runtimelayout.Missing {
				when = int64(rg.sleepWhen)
			} else if tw, ok := w.timerWhen[g.Addr]; ok {
				when = tw
			} else {
				g.WaitingOn = []WaitObject{{Kind: "timer", Unknown: "its timer was not copied"}}
				return
			}
			g.WaitingOn = []WaitObject{{Kind: "timer", Type: "time.Sleep", WakeIn: when - now}}
		case reason == "IO wait":
			iw, ok := io[g.Addr]
			if !ok {
				g.WaitingOn = []WaitObject{{Kind: "fd", Unknown: "no pollDesc registered with epoll names the goroutine"}}
				return
			}
			d := describe(iw.fd)
			g.WaitingOn = []WaitObject{{Kind: "fd", Addr: iw.pd, Dir: iw.dir, FD: d, Type: typeOr(d.Kind, "fd")}}
		case reason == "sync.Cond.Wait":
			if condOf == nil {
				condOf = t.condOf(w, raws)
			}
			obj := WaitObject{Kind: "cond", Type: "*sync.Cond"}
			switch conds := condOf[g.Addr]; {
			case !followConds:
				obj.Unknown = "the binary does not describe sync.Cond and runtime.notifyList"
			case len(conds) > 1:
				obj.Unknown = fmt.Sprintf("%d sync.Conds its stack points at queue it", len(conds))
			case len(conds) == 0:
				obj.Unknown = "no sync.Cond its sudog or stack points at has it in its queue"
			default:
				base := conds[0]
				shared := objects[base]
				if shared == nil {
					shared = &WaitObject{Kind: "cond", Type: "*sync.Cond", Addr: base, Name: t.globalName(base), Sync: &SyncState{}}
					objects[base] = shared
				}
				shared.Sync.Waiters++
				obj = *shared
			}
			g.WaitingOn = []WaitObject{obj}
		default:
			sema, ok := w.semaOf[g.Addr]
			if !ok {
				kind, dir, _ := t.syncObject(g, 0)
				if kind == "sema" {
					kind = waitKind(reason)
				}
				why := "not found in the semaphore table"
				if W.SemTable == 0 {
					why = "the semaphore table's address is unknown (a stripped binary on an architecture gi cannot find it on)"
				}
				if kind != "" {
					g.WaitingOn = []WaitObject{{Kind: kind, Dir: dir, Unknown: why}}
				}
				return
			}
			kind, dir, base := t.syncObject(g, sema)
			obj := objects[base]
			if obj == nil {
				obj = t.syncState(w, kind, base, sema)
				objects[base] = obj
			}
			obj.Sync.Waiters++
			o := *obj
			o.Dir = dir
			g.WaitingOn = []WaitObject{o}
		}
	}
	interned := waitInterner{}
	for i, g := range gs {
		if g.StatusValue != waiting {
			continue
		}
		describeWait(g, rgs[i])
		g.WaitingOn = interned.keep(g.WaitingOn)
	}
	// Each waiter's copy of a sync object shares its SyncState: the
	// waiter count is complete once every goroutine is seen.
}

// waitInterner shares equal WaitingOn lists between goroutines: 100k
// goroutines blocked on one channel wait on the same thing (10 MB of
// copies). Lists are never written after keep.
type waitInterner sharedLists[WaitObject]

// keep returns a list already kept equal to objs, else keeps objs.
func (in waitInterner) keep(objs []WaitObject) []WaitObject {
	if len(objs) == 0 {
		return objs
	}
	h := newListHash()
	for i := range objs {
		o := &objs[i]
		h.str(o.Kind)
		h.word(o.Addr)
		h.str(o.Name)
		h.str(o.Type)
		h.str(o.Dir)
		h.word(uint64(uintptr(unsafe.Pointer(o.Chan))))
		h.word(uint64(uintptr(unsafe.Pointer(o.Sync))))
		h.word(uint64(uintptr(unsafe.Pointer(o.FD))))
		h.str(o.Syscall)
		h.word(uint64(o.WakeIn))
		h.str(o.Unknown)
	}
	lists := sharedLists[WaitObject](in)
	if same, ok := lists.find(h, objs); ok {
		return same
	}
	lists.add(h, objs)
	return objs
}

func typeOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (t *Target) mustStatus(name string) uint32 {
	v, _ := t.Layout.StatusValue(name)
	return v
}

// waitKind is the kind of object a wait reason implies, "" for none.
func waitKind(reason string) string {
	switch {
	case strings.HasPrefix(reason, "chan "), reason == "select":
		return "chan"
	case reason == "sync.Mutex.Lock":
		return "mutex"
	case strings.HasPrefix(reason, "sync.RWMutex"):
		return "rwmutex"
	case reason == "sync.WaitGroup.Wait":
		return "waitgroup"
	case reason == "sync.Cond.Wait":
		return "cond"
	case reason == "semacquire":
		return "sema"
	case reason == "IO wait":
		return "fd"
	case reason == "sleep":
		return "timer"
	}
	return ""
}

// chanQueues are the lengths of a channel's queues.
type chanQueues struct {
	receivers, senders int
	// incomplete is set when a queue could not be walked to its end.
	incomplete bool
}

// walkChanQueues walks each copied channel's receive and send queues
// through the copied sudogs (every queued sudog belongs to a waiting
// goroutine, so no read is needed): the side of each sudog, and each
// channel's queue lengths.
func (t *Target) walkChanQueues(w *rawWaits) (dir map[uint64]string, queues map[uint64]chanQueues) {
	W := &t.Layout.Wait
	dir, queues = map[uint64]string{}, map[uint64]chanQueues{}
	for c, cb := range w.chans {
		var q chanQueues
		for _, side := range []struct {
			off  int64
			name string
			n    *int
		}{{W.Chan.RecvQ, "recv", &q.receivers}, {W.Chan.SendQ, "send", &q.senders}} {
			for s, n := t.u64(cb, side.off), 0; s != 0 && n <= len(w.sudogs); n++ {
				sb, ok := w.sudogs[s]
				if !ok {
					q.incomplete = true
					break
				}
				dir[s] = side.name
				*side.n++
				s = t.u64(sb, W.Sudog.Next)
			}
		}
		queues[c] = q
	}
	return dir, queues
}

// chanObject describes channel c from its copy and its queues.
func (t *Target) chanObject(w *rawWaits, c uint64, q chanQueues) WaitObject {
	W := &t.Layout.Wait
	obj := WaitObject{Kind: "chan", Addr: c, Type: "chan"}
	cb, ok := w.chans[c]
	if !ok {
		obj.Unknown = "channel not copied"
		return obj
	}
	st := &ChanState{
		Len:        t.u64(cb, W.Chan.QCount),
		Cap:        t.u64(cb, W.Chan.DataQSiz),
		Closed:     t.u32(cb, W.Chan.Closed) != 0,
		Receivers:  q.receivers,
		Senders:    q.senders,
		Incomplete: q.incomplete,
	}
	if elem := t.typeName(t.u64(cb, W.Chan.ElemType)); elem != "" {
		st.ElemType = elem
		obj.Type = "chan " + elem
	}
	obj.Chan = st
	obj.Name = t.globalName(c)
	return obj
}

// syncObject tells which sync object a goroutine sleeping on semaphore
// sema waits for, from its stack: kind, the goroutine's side and the
// object's address.
func (t *Target) syncObject(g *Goroutine, sema uint64) (kind, dir string, base uint64) {
	W := &t.Layout.Wait
	inMutex := false
	for _, f := range g.Frames {
		switch f.Function {
		case "sync.(*Mutex).Lock", "sync.(*Mutex).lockSlow", "internal/sync.(*Mutex).Lock", "internal/sync.(*Mutex).lockSlow":
			inMutex = true
		case "sync.(*RWMutex).RLock":
			if W.RWMutexReaderSem != runtimelayout.Missing {
				return "rwmutex", "read", sema - uint64(W.RWMutexReaderSem)
			}
		case "sync.(*RWMutex).Lock":
			if inMutex && W.MutexSema != runtimelayout.Missing {
				// Waiting for another writer on the RWMutex's inner
				// Mutex, its first field.
				return "rwmutex", "write", sema - uint64(W.MutexSema)
			}
			if W.RWMutexWriterSem != runtimelayout.Missing {
				return "rwmutex", "write", sema - uint64(W.RWMutexWriterSem)
			}
		case "sync.(*WaitGroup).Wait":
			if W.WaitGroupSema != runtimelayout.Missing {
				return "waitgroup", "", sema - uint64(W.WaitGroupSema)
			}
		default:
			if inMutex && !strings.HasPrefix(f.Function, "sync.") && !strings.HasPrefix(f.Function, "internal/sync.") && !strings.HasPrefix(f.Function, "runtime.") {
				return "mutex", "", sema - uint64(W.MutexSema)
			}
		}
	}
	if inMutex && W.MutexSema != runtimelayout.Missing {
		return "mutex", "", sema - uint64(W.MutexSema)
	}
	return "sema", "", sema
}

// syncState reads a sync object's state from the bytes copied around its
// semaphore.
func (t *Target) syncState(w *rawWaits, kind string, base, sema uint64) *WaitObject {
	W := &t.Layout.Wait
	obj := &WaitObject{Kind: kind, Addr: base, Sync: &SyncState{}, Name: t.globalName(base)}
	obj.Type = map[string]string{"mutex": "*sync.Mutex", "rwmutex": "*sync.RWMutex", "waitgroup": "*sync.WaitGroup", "sema": "semaphore"}[kind]
	win := w.windows[sema]
	at := func(off int64, size int) (uint64, bool) {
		p := int64(base) + off - int64(sema-semWindowBefore)
		if win == nil || p < 0 || p+int64(size) > int64(len(win)) {
			return 0, false
		}
		if size == 4 {
			return uint64(binary.LittleEndian.Uint32(win[p:])), true
		}
		return binary.LittleEndian.Uint64(win[p:]), true
	}
	known := false
	switch kind {
	case "mutex":
		if s, ok := at(W.MutexState, 4); ok {
			obj.Sync.Locked, obj.Sync.Starving, known = s&runtimelayout.MutexLocked != 0, s&runtimelayout.MutexStarving != 0, true
		}
	case "rwmutex":
		if c, ok := at(W.RWMutexReaderCount, 4); ok {
			n := int32(c)
			if n < 0 { // a writer holds it or waits for readers to leave
				obj.Sync.Locked = true
				n += runtimelayout.RWMutexMaxReaders
			}
			obj.Sync.Readers, known = n, true
		}
	case "waitgroup":
		if s, ok := at(W.WaitGroupState, 8); ok {
			obj.Sync.Counter, known = int32(s>>runtimelayout.WaitGroupCounterShift), true
		}
	case "sema":
		known = true
	}
	if !known {
		obj.Unknown = "state not copied"
	}
	return obj
}

// globalName names the global variable holding runtime address addr, ""
// for an address outside the binary's data.
func (t *Target) globalName(addr uint64) string {
	if addr < t.Bias {
		return ""
	}
	s, off, ok := t.Binary.DataSymbol(addr - t.Bias)
	if !ok {
		return ""
	}
	if off == 0 {
		return s.Name
	}
	return fmt.Sprintf("%s+%d", s.Name, off)
}

// typeName returns the name of the runtime type descriptor at runtime
// address typ, read from the binary (type descriptors are read-only data),
// or "" when it cannot be read.
func (t *Target) typeName(typ uint64) string {
	W := &t.Layout.Wait
	base, ok := t.Binary.Symbol("runtime.types")
	if typ == 0 || !ok || typ < t.Bias {
		return ""
	}
	var hdr [64]byte
	if _, err := t.Binary.ReadAt(hdr[:], typ-t.Bias); err != nil || W.TypeStr+4 > int64(len(hdr)) {
		return ""
	}
	tflag := hdr[W.TypeTFlag]
	str := int32(binary.LittleEndian.Uint32(hdr[W.TypeStr:]))
	var nb [2 + binary.MaxVarintLen64 + 256]byte
	n, _ := t.Binary.ReadAt(nb[:], base.Addr+uint64(str))
	if n < 2 {
		return ""
	}
	l, k := binary.Uvarint(nb[1:n])
	if k <= 0 || 1+k+int(l) > n {
		return ""
	}
	name := string(nb[1+k : 1+k+int(l)])
	if tflag&runtimelayout.TFlagExtraStar != 0 {
		name = strings.TrimPrefix(name, "*")
	}
	return name
}

// String says what the goroutine waits on in a table cell:
// "chan 0xc000123 (unbuffered, 3 receivers, 0 senders)",
// "mutex main.slowMu (locked, 4 waiters)", "sleep, wakes in 59m58s".
func (o WaitObject) String() string {
	head, details := o.Parts()
	if len(details) == 0 {
		return head
	}
	return head + " (" + strings.Join(details, ", ") + ")"
}

// Parts splits String: what the object is ("chan 0xc000123", "mutex
// main.slowMu", "sleep, wakes in 59m58s") and its state, the details
// String puts in parentheses ("locked", "4 waiters").
func (o WaitObject) Parts() (head string, details []string) {
	ref := o.Name
	if ref == "" && o.Addr != 0 {
		ref = fmt.Sprintf("%#x", o.Addr)
	}
	head = o.Kind
	if ref != "" {
		head += " " + ref
	}
	switch {
	case o.Unknown != "":
		details = append(details, "unknown: "+o.Unknown)
	case o.Kind == "chan" && o.Addr == 0:
		return "nil chan", []string{"blocks forever"}
	case o.Kind == "timer":
		return "sleep, wakes in " + formatDuration(o.WakeIn), nil
	case o.FD != nil && o.Syscall != "":
		return o.FD.String(), []string{"in " + o.Syscall}
	case o.FD != nil:
		return o.FD.String(), []string{o.Dir}
	case o.Chan != nil:
		c := o.Chan
		if c.Cap == 0 {
			details = append(details, "unbuffered")
		} else {
			details = append(details, fmt.Sprintf("%d/%d buffered", c.Len, c.Cap))
		}
		if c.Closed {
			details = append(details, "closed")
		}
		details = append(details, plural(c.Receivers, "receiver"), plural(c.Senders, "sender"))
	case o.Sync != nil:
		s := o.Sync
		switch o.Kind {
		case "mutex":
			if s.Locked {
				details = append(details, "locked")
			} else {
				details = append(details, "unlocked")
			}
			if s.Starving {
				details = append(details, "starving")
			}
		case "rwmutex":
			if s.Locked {
				details = append(details, "write-locked")
			}
			details = append(details, plural(int(s.Readers), "reader"))
		case "waitgroup":
			details = append(details, fmt.Sprintf("counter %d", s.Counter))
		}
		details = append(details, plural(s.Waiters, "waiter"))
	}
	return head, details
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func formatDuration(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "0s (overdue " + (-d).Round(time.Millisecond).String() + ")"
	case d < time.Second:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// WaitingOnText joins what a goroutine waits on ("" for nothing known).
func (g *Goroutine) WaitingOnText() string {
	parts := make([]string, len(g.WaitingOn))
	for i, o := range g.WaitingOn {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}

// WaitedObject is one object goroutines wait on, with all its waiters:
// what `gi ps --objects` lists.
type WaitedObject struct {
	// Object is the object as its first waiter sees it (Dir cleared).
	Object WaitObject
	// Goroutines wait on it, by goroutine id; ByDir counts them by side
	// ("send", "recv", "read", "write", or "").
	Goroutines []*Goroutine
	ByDir      map[string]int
	// LongestWait is the longest any of them has waited (WaitKnown).
	LongestWait time.Duration
}

// WaitedObjects groups the goroutines of gs by the object they wait on,
// most waiters first. Objects without an address (sleeps, unknown ones)
// are grouped by kind and what is known; folded sleeps show the soonest
// wake-up.
func WaitedObjects(gs []*Goroutine) []*WaitedObject {
	byKey := map[string]*WaitedObject{}
	var out []*WaitedObject
	for _, g := range gs {
		for _, o := range g.WaitingOn {
			key := fmt.Sprintf("%s/%#x", o.Kind, o.Addr)
			if o.Addr == 0 {
				key = o.Kind + "/" + o.Type + "/" + o.Unknown
			}
			wo := byKey[key]
			if wo == nil {
				obj := o
				obj.Dir = ""
				wo = &WaitedObject{Object: obj, ByDir: map[string]int{}}
				byKey[key] = wo
				out = append(out, wo)
			}
			if o.Kind == "timer" && o.Unknown == "" && o.WakeIn < wo.Object.WakeIn {
				wo.Object.WakeIn = o.WakeIn // sleeps are folded: the soonest wake-up
			}
			if n := len(wo.Goroutines); n == 0 || wo.Goroutines[n-1] != g { // a select may name a channel twice
				wo.Goroutines = append(wo.Goroutines, g)
				wo.ByDir[o.Dir]++
				if g.WaitKnown && g.Wait > wo.LongestWait {
					wo.LongestWait = g.Wait
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Goroutines) > len(out[j].Goroutines) })
	return out
}

// Facts states what plainly points at a bug about the object: nobody on
// the other side of a channel, a WaitGroup nobody will bring to zero.
func (wo *WaitedObject) Facts() []string {
	var facts []string
	o := wo.Object
	if c := o.Chan; c != nil && o.Addr != 0 {
		switch {
		case c.Closed:
		case c.Receivers > 0 && c.Senders == 0 && c.Len == 0:
			facts = append(facts, "no goroutine waits to send")
		case c.Senders > 0 && c.Receivers == 0:
			facts = append(facts, "no goroutine waits to receive")
		}
	}
	if o.Kind == "chan" && o.Addr == 0 && o.Unknown == "" {
		facts = append(facts, "a nil channel: no operation will ever wake it")
	}
	return facts
}

// AllBlocked reports whether every goroutine of the program (system ones
// aside) is blocked: none running, runnable or in a system call.
func AllBlocked(gs []*Goroutine) (blocked, total int) {
	for _, g := range gs {
		if g.System {
			continue
		}
		total++
		switch g.Status {
		case "waiting":
			blocked++
		}
	}
	return blocked, total
}
