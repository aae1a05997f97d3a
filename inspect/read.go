package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/internal/hugemem"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
	"github.com/gi-debug/gi/runtimelayout"
)

// rawG is one goroutine's bytes as copied while the process was stopped.
type rawG struct {
	addr   uint64
	filled bool // by fillRawG
	goid   uint64
	state  uint32 // atomicstatus, scan bit included

	// Fields of the runtime.g decoding reads, copied out of it: the g
	// structs are released once the rawGs are made.
	lockedM                              bool
	reason, trackingSeq                  uint8
	parentGoid, waitSince, startPC, goPC uint64
	waiting, sleepWhen                   uint64 // g.waiting (sudogs), g.sleepWhen (Go 1.23+)

	// Where unwinding starts. trap is true when pc is the address of the
	// next instruction to execute (registers of a running thread), false
	// when it is a return address.
	pc, sp uint64
	lr     uint64 // link register (arm64), for a frameless innermost function
	trap   bool
	tid    int // m.procid: the thread id in the target's PID namespace
	// hostTID is the same thread's id in gi's PID namespace, where it
	// differs (0 otherwise).
	hostTID int

	stackLo, stackHi uint64
	stack            []byte // copy of [sp, sp+len(stack))
	stackErr         string
	// wholeStack is a copy of [stackLo, stackHi), made (KeepStacks) when
	// sp is unknown.
	wholeStack []byte

	labels map[string]string

	// The m the goroutine runs on (running or in a system call) and its
	// labels' address, as the stop's scan read them.
	m, labelsAt uint64

	// The system call the goroutine's thread is in (status syscall), as
	// its registers say: number and first argument.
	syscall     int64
	syscallArg0 uint64
	inSyscall   bool
}

type rawSnapshot struct {
	gs       []*rawG // made by gsAfterStop from what follows
	warnings []string
	waits    *rawWaits

	// The stop's copy of the g structs: the live ones' allgs indexes,
	// one rawG each in pool, the g's at gbuf[offs[i]:] read from
	// ranges[i], and the stacks copied before the stop.
	live   []int32
	pool   []rawG
	ranges []proc.Range
	offs   []int
	gbuf   []byte
	pre    *preCopy

	// stacksBeforeStop counts the stacks taken from the copy made before
	// the stop.
	stacksBeforeStop int
}

func (t *Target) u64(b []byte, off int64) uint64 {
	if off < 0 || off+8 > int64(len(b)) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[off:])
}

func (t *Target) u32(b []byte, off int64) uint32 {
	if off < 0 || off+4 > int64(len(b)) {
		return 0
	}
	return binary.LittleEndian.Uint32(b[off:])
}

func (t *Target) readWord(addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := t.Mem.ReadAt(b[:], addr); err != nil {
		return 0, fmt.Errorf("read %#x: %w", addr, err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// copyRaw copies every live g, the used part of its stack, the registers of
// the threads running goroutines and the pprof labels. It runs while the
// process is stopped, so it does nothing but copy. stopped are the
// process's threads with their registers; nsTIDs maps thread ids in the
// target's PID namespace to gi's (nil when they agree). pre is what was
// copied before the stop (nil for nothing): the stacks of goroutines that
// have not run since are taken from it instead of read again.
func (t *Target) copyRaw(stopped []ptrace.Thread, bufs *buffers, nsTIDs map[int]int, pre *preCopy, meter *phaseMeter) (*rawSnapshot, error) {
	L := t.Layout
	out := &rawSnapshot{}

	ptrs, warning, err := t.readAllgs(bufs.allgs)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		out.warnings = append(out.warnings, warning)
	}
	n := len(ptrs) / 8
	if n == 0 {
		return out, nil
	}

	gsize := int(L.G.Size)
	ranges, offs, gtotal := gRanges(ptrs, gsize, bufs)
	gbuf := bufs.take(&bufs.g, gtotal)
	meter.mark("allgs", true)
	scan, err := t.scanGs(ranges, offs, gbuf, bufs, pre)
	if err != nil {
		return nil, fmt.Errorf("read %d g structures: %w", n, err)
	}
	meter.mark("scan", true)
	if scan.failed > 0 {
		out.warnings = append(out.warnings, fmt.Sprintf("%d of %d g structures unreadable", scan.failed, n))
	}
	out.live, out.pool, out.ranges, out.offs, out.gbuf, out.pre = scan.live, bufs.gs, ranges, offs, gbuf, pre
	out.stacksBeforeStop = scan.stacksBeforeStop
	running, syscall := t.status.running, t.status.syscall
	threads := make(map[int]ptrace.Regs, len(stopped))
	for _, th := range stopped {
		threads[th.TID] = th.Regs
	}
	mRanges := make([]proc.Range, len(scan.onThread))
	for i, rg := range scan.onThread {
		mRanges[i] = proc.Range{Addr: rg.m, Len: int(L.M.Size)}
	}
	mOwners := scan.onThread

	// Running goroutines: their location is in their thread's registers.
	if len(mRanges) > 0 {
		mbuf := make([]byte, len(mRanges)*int(L.M.Size))
		mErr := t.Mem.ReadBatch(mRanges, mbuf)
		var mFailed map[int]bool
		if mErr != nil {
			var be *proc.BatchError
			if !errors.As(mErr, &be) {
				return nil, fmt.Errorf("read m structures: %w", mErr)
			}
			mFailed = map[int]bool{}
			for _, i := range be.Failed {
				mFailed[i] = true
			}
		}
		mappedNew := false
		for i, rg := range mOwners {
			if mFailed[i] {
				continue
			}
			mb := mbuf[i*int(L.M.Size) : (i+1)*int(L.M.Size)]
			if t.u64(mb, L.M.CurG) != rg.addr {
				continue
			}
			tid := int(t.u64(mb, L.M.ProcID))
			rg.tid = tid
			hostTID := tid
			if nsTIDs != nil {
				if _, known := nsTIDs[tid]; !known && !mappedNew {
					t.mapNewThreads(stopped, nsTIDs)
					mappedNew = true // once per stop: a thread may have exited
				}
				host, ok := nsTIDs[tid]
				if !ok {
					continue // no thread of ours is that id: no registers to trust
				}
				hostTID = host
				if host != tid {
					rg.hostTID = host
				}
			}
			if rg.state&^L.ScanBit == syscall {
				if regs, ok := threads[hostTID]; ok && regs.Syscall >= 0 {
					rg.syscall, rg.syscallArg0, rg.inSyscall = regs.Syscall, regs.Arg0, true
				}
				continue
			}
			if rg.state&^L.ScanBit != running {
				continue
			}
			regs, ok := threads[hostTID]
			if !ok {
				continue
			}
			if regs.SP >= rg.stackLo && regs.SP < rg.stackHi && t.sym.isGoCode(regs.PC) {
				rg.pc, rg.sp, rg.lr, rg.trap = regs.PC, regs.SP, regs.LR, true
				continue
			}
			// A signal handler interrupted the goroutine (a crash
			// dump's SIGQUIT, a profiling signal): where it was is in
			// the signal's frame, as the runtime's own dump reads it.
			if pc, sp, lr, ok := t.signalContext(regs); ok && sp >= rg.stackLo && sp < rg.stackHi && t.sym.isGoCode(pc) {
				rg.pc, rg.sp, rg.lr, rg.trap = pc, sp, lr, true
				continue
			}
			// A vDSO call (time.Now) runs on the thread's system stack
			// and leaves g.sched empty: m.vdsoSP and m.vdsoPC (a return
			// address) say where the goroutine left its own stack, as
			// the runtime's traceback reads them.
			if L.M.VdsoSP > 0 && L.M.VdsoPC > 0 {
				if sp, pc := t.u64(mb, L.M.VdsoSP), t.u64(mb, L.M.VdsoPC); sp >= rg.stackLo && sp < rg.stackHi && t.sym.isGoCode(pc) {
					rg.pc, rg.sp, rg.lr, rg.trap = pc, sp, 0, false
				}
			}
			// Otherwise the thread runs on a system stack (systemstack,
			// or C code): g.sched holds where the goroutine left its own
			// stack.
		}
	}

	meter.mark("ms", true)

	// Stacks: the used part, from sp to the top.
	stackRanges := make([]proc.Range, 0, len(scan.stackless))
	var stackOwners []*rawG
	// Goroutines whose stack pointer is unknown (running on a system
	// stack: g.sched is cleared while a goroutine runs): with
	// KeepStacks, their whole stack, for a walk that scans every word.
	var wholeRanges []proc.Range
	var wholeOwners []*rawG
	total := 0
	for _, rg := range scan.stackless {
		if rg.sp == 0 || rg.sp < rg.stackLo || rg.sp >= rg.stackHi {
			if rg.sp != 0 {
				rg.stackErr = fmt.Sprintf("sp %#x outside stack [%#x, %#x)", rg.sp, rg.stackLo, rg.stackHi)
			}
			if t.KeepStacks && rg.stackLo < rg.stackHi && rg.stackHi-rg.stackLo <= maxStackCopy {
				wholeRanges = append(wholeRanges, proc.Range{Addr: rg.stackLo, Len: int(rg.stackHi - rg.stackLo)})
				wholeOwners = append(wholeOwners, rg)
			}
			continue
		}
		l := rg.stackHi - rg.sp
		if l > maxStackCopy {
			l = maxStackCopy
			rg.stackErr = fmt.Sprintf("stack larger than %d MiB: copied its innermost part", maxStackCopy>>20)
		}
		stackRanges = append(stackRanges, proc.Range{Addr: rg.sp, Len: int(l)})
		stackOwners = append(stackOwners, rg)
		total += int(l)
	}
	sbuf := bufs.take(&bufs.stacks, total)
	if err := t.Mem.ReadBatch(stackRanges, sbuf); err != nil {
		var be *proc.BatchError
		if !errors.As(err, &be) {
			return nil, fmt.Errorf("read goroutine stacks: %w", err)
		}
		for _, i := range be.Failed {
			stackOwners[i].stackErr = fmt.Sprintf("stack at %#x unreadable", stackRanges[i].Addr)
		}
	}
	off := 0
	for i, rg := range stackOwners {
		rg.stack = sbuf[off : off+stackRanges[i].Len : off+stackRanges[i].Len]
		off += stackRanges[i].Len
	}
	if len(wholeRanges) > 0 {
		n := 0
		for _, r := range wholeRanges {
			n += r.Len
		}
		wbuf := make([]byte, n)
		var failed map[int]bool
		if err := t.Mem.ReadBatch(wholeRanges, wbuf); err != nil {
			var be *proc.BatchError
			if !errors.As(err, &be) {
				return nil, fmt.Errorf("read goroutine stacks: %w", err)
			}
			failed = map[int]bool{}
			for _, i := range be.Failed {
				failed[i] = true
			}
		}
		off := 0
		for i, rg := range wholeOwners {
			if !failed[i] {
				rg.wholeStack = wbuf[off : off+wholeRanges[i].Len : off+wholeRanges[i].Len]
			}
			off += wholeRanges[i].Len
		}
	}

	meter.mark("stacks", true)
	if L.G.Labels != runtimelayout.Missing {
		if err := t.copyLabels(scan.labelled); err != nil {
			out.warnings = append(out.warnings, "labels: "+err.Error())
		}
	}
	meter.mark("labels", true)
	if t.SkipWaits {
		return out, nil
	}
	out.waits = t.copyWaits(scan.waiters, len(scan.live), bufs.sudogs, bufs.waits, bufs.polls)
	meter.mark("waits", true)
	return out, nil
}

// gScan is what the stop's scan of the g structs found. Only the g's the
// stop itself needs a rawG for get one in it (writing 100k rawGs was a
// quarter of the stop); the rest are made after it (rawSnapshot.gs).
type gScan struct {
	scanLists
	failed int // g structs unreadable

	stacksBeforeStop int
}

// scanLists are the lists the stop's scan makes.
type scanLists struct {
	live     []int32 // allgs indexes of the live g's, in order
	onThread []*rawG // running or in a system call on an m: the m is read
	// stackless are the goroutines whose stack was not copied before the
	// stop (or has changed since): the stop copies it.
	stackless []*rawG
	labelled  []*rawG  // with pprof labels
	waiters   []waiter // status _Gwaiting
}

// newScanLists returns lists of n slots each, faulted in: the stop
// allocates nothing it would fault in (microseconds a page).
func newScanLists(n int) scanLists {
	return scanLists{
		live:      prefaulted[int32](n),
		onThread:  prefaulted[*rawG](n),
		stackless: prefaulted[*rawG](n),
		labelled:  prefaulted[*rawG](n),
		waiters:   prefaulted[waiter](n),
	}
}

// part returns the empty lists a chunk of g's lo to hi fills, in its own
// slots.
func (l *scanLists) part(lo, hi int) scanLists {
	return scanLists{
		live:      l.live[lo:lo:hi],
		onThread:  l.onThread[lo:lo:hi],
		stackless: l.stackless[lo:lo:hi],
		labelled:  l.labelled[lo:lo:hi],
		waiters:   l.waiters[lo:lo:hi],
	}
}

// join moves the chunks' lists to the front of l's, in order: each
// chunk's lie at or after where they go.
func (l *scanLists) join(parts []gScan) scanLists {
	out := scanLists{live: l.live[:0], onThread: l.onThread[:0], stackless: l.stackless[:0], labelled: l.labelled[:0], waiters: l.waiters[:0]}
	for i := range parts {
		p := &parts[i].scanLists
		out.live = append(out.live, p.live...)
		out.onThread = append(out.onThread, p.onThread...)
		out.stackless = append(out.stackless, p.stackless...)
		out.labelled = append(out.labelled, p.labelled...)
		out.waiters = append(out.waiters, p.waiters...)
	}
	return out
}

// waiter is what the stop reads a waiting goroutine's wait from.
type waiter struct {
	g              uint64 // the g's address
	waiting, timer uint64 // g.waiting (its sudogs), g.timer (before Go 1.23)
	reason         uint8
	rg             *rawG // a Cond waiter's rawG (found through its stack), else nil
}

// scanChunk is how many g structs a worker reads and scans at once: read
// and scanned while still in the CPU's cache.
const scanChunk = 1024

// scanGs reads the g structs of ranges into gbuf (offs: where each starts)
// and scans each while it is in the cache; their stacks are taken from pre
// where unchanged. Chunks are read and scanned on every CPU.
func (t *Target) scanGs(ranges []proc.Range, offs []int, gbuf []byte, bufs *buffers, pre *preCopy) (*gScan, error) {
	n := len(ranges)
	if len(bufs.gs) < n {
		// More g's than reserved: one rawG per allgs index.
		bufs.gs, bufs.scanLists = make([]rawG, n), newScanLists(n)
	}
	chunks := make([]gScan, (n+scanChunk-1)/scanChunk)
	errs := make([]error, len(chunks))
	total := len(gbuf)
	condReason, followConds := t.condWaitReason()
	scanOne := func(c int) {
		defer func() {
			if r := recover(); r != nil {
				errs[c] = fmt.Errorf("panic while scanning g structures: %v", r)
			}
		}()
		lo, hi := c*scanChunk, min((c+1)*scanChunk, n)
		end := total
		if hi < n {
			end = offs[hi]
		}
		s := scanner{t: t, ranges: ranges, offs: offs, base: offs[lo], dst: gbuf[offs[lo]:end], pool: bufs.gs, pre: pre,
			condReason: condReason, followConds: followConds}
		chunks[c].scanLists = bufs.scanLists.part(lo, hi)
		errs[c] = s.scan(&chunks[c], lo, hi)
	}
	if t.live {
		onEveryCPU(len(chunks), scanOne)
	} else {
		// A memory image (Decode) need not be safe for concurrent reads.
		for c := range chunks {
			scanOne(c)
		}
	}
	out := &gScan{}
	for c := range chunks {
		if errs[c] != nil {
			return nil, errs[c]
		}
		out.failed += chunks[c].failed
		out.stacksBeforeStop += chunks[c].stacksBeforeStop
	}
	out.scanLists = bufs.scanLists.join(chunks)
	return out, nil
}

// scanner scans one chunk of g structs.
type scanner struct {
	t           *Target
	ranges      []proc.Range
	offs        []int
	base        int    // offs[lo]: where dst starts in the whole buffer
	dst         []byte // the chunk's g structs
	pool        []rawG // one rawG per allgs index
	pre         *preCopy
	condReason  uint8
	followConds bool
}

// scan reads and scans the g structs lo to hi.
func (s *scanner) scan(out *gScan, lo, hi int) error {
	t := s.t
	L := t.Layout
	gsize := int(L.G.Size)
	failed, err := t.readGs(s.ranges[lo:hi], s.offs[lo:hi], s.base, gsize, s.dst)
	if err != nil {
		return err
	}
	out.failed = len(failed)
	running, syscall, waiting := t.status.running, t.status.syscall, t.status.waiting
	for i := lo; i < hi; i++ {
		if len(failed) > 0 && failed[i-lo] {
			continue
		}
		o := s.offs[i] - s.base
		gb := s.dst[o : o+gsize : o+gsize]
		// The stamp holds most of what the scan reads from the g.
		stamp, parked := t.stamp(gb)
		st := stamp.status
		if t.status.isDead(st) {
			continue
		}
		out.live = append(out.live, int32(i))
		addr := s.ranges[i].Addr
		stack := s.pre.stackOf(i, addr, stamp, parked)
		m := t.u64(gb, L.G.M)
		onThread := m != 0 && (st == running || st == syscall)
		labels := stamp.labels
		var w waiter
		if st == waiting {
			w = waiter{g: addr, reason: stamp.reason, waiting: stamp.waiting}
			if W := &L.Wait; W.Known && W.GSleepWhen == runtimelayout.Missing {
				w.timer = t.u64(gb, W.GTimer)
			}
		}
		// A Cond waiter without g.waiting (before Go 1.26) is found
		// through its stack, read in the stop from its rawG.
		condWaiter := st == waiting && s.followConds && w.reason == s.condReason && w.waiting == 0
		if stack != nil {
			out.stacksBeforeStop++
		}
		if stack == nil || onThread || labels != 0 || condWaiter {
			rg := &s.pool[i]
			t.fillRawG(rg, addr, gb)
			rg.stack = stack
			if stack == nil {
				out.stackless = append(out.stackless, rg)
			}
			if onThread {
				rg.m = m
				out.onThread = append(out.onThread, rg)
			}
			if labels != 0 {
				out.labelled = append(out.labelled, rg)
			}
			if condWaiter {
				w.rg = rg
			}
		}
		if st == waiting {
			out.waiters = append(out.waiters, w)
		}
	}
	return nil
}

// fillRawG fills rg from the g at addr, whose bytes are gb.
func (t *Target) fillRawG(rg *rawG, addr uint64, gb []byte) {
	L := t.Layout
	state := t.u32(gb, L.G.AtomicStatus)
	s := state &^ L.ScanBit
	*rg = rawG{
		addr:       addr,
		filled:     true,
		goid:       t.u64(gb, L.G.Goid),
		state:      state,
		lockedM:    t.u64(gb, L.G.LockedM) != 0,
		parentGoid: t.u64(gb, L.G.ParentGoid),
		waitSince:  t.u64(gb, L.G.WaitSince),
		startPC:    t.u64(gb, L.G.StartPC),
		goPC:       t.u64(gb, L.G.GoPC),
		stackLo:    t.u64(gb, L.G.StackLo),
		stackHi:    t.u64(gb, L.G.StackHi),
		labelsAt:   t.u64(gb, L.G.Labels),
	}
	if o := L.G.WaitReason; o >= 0 && o < int64(len(gb)) {
		rg.reason = gb[o]
	}
	if o := L.G.TrackingSeq; o >= 0 && o < int64(len(gb)) {
		rg.trackingSeq = gb[o]
	}
	if W := &L.Wait; W.Known {
		rg.waiting, rg.sleepWhen = t.u64(gb, W.GWaiting), t.u64(gb, W.GSleepWhen)
	}
	if s == t.status.syscall || (s != t.status.running && t.u64(gb, L.G.SchedSP) == 0) {
		rg.pc, rg.sp = t.u64(gb, L.G.SyscallPC), t.u64(gb, L.G.SyscallSP)
	} else {
		rg.pc, rg.sp, rg.lr = t.u64(gb, L.G.SchedPC), t.u64(gb, L.G.SchedSP), t.u64(gb, L.G.SchedLR)
	}
}

// gsAfterStop makes, after the stop, the rawGs the stop did not need:
// those of goroutines whose stack was copied before it, unchanged.
func (t *Target) gsAfterStop(raw *rawSnapshot) {
	gs := make([]*rawG, 0, len(raw.live))
	gsize := int(t.Layout.G.Size)
	for _, i := range raw.live {
		rg := &raw.pool[i]
		if !rg.filled {
			o := raw.offs[i]
			t.fillRawG(rg, raw.ranges[i].Addr, raw.gbuf[o:o+gsize:o+gsize])
			rg.stack = raw.pre.stacks[i]
		}
		gs = append(gs, rg)
	}
	raw.gs, raw.live, raw.gbuf = gs, nil, nil
}

// onEveryCPU runs do(0) … do(n-1) on one goroutine per CPU (the process
// is stopped: gi has the machine) and returns when all have returned.
func onEveryCPU(n int, do func(i int)) {
	workers := min(n, runtime.NumCPU())
	if workers <= 1 {
		for i := 0; i < n; i++ {
			do(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				do(i)
			}
		}()
	}
	wg.Wait()
}

// readAllgs reads runtime.allgs: the address of every g, 8 bytes each
// (into into when it has room), and a warning when allglen and the slice
// disagree.
func (t *Target) readAllgs(into []byte) (ptrs []byte, warning string, err error) {
	L := t.Layout
	allglen, err := t.readWord(L.AllGLen + t.Bias)
	if err != nil {
		return nil, "", fmt.Errorf("read runtime.allglen: %w", err)
	}
	var hdr [24]byte
	if _, err := t.Mem.ReadAt(hdr[:], L.AllGs+t.Bias); err != nil {
		return nil, "", fmt.Errorf("read runtime.allgs: %w", err)
	}
	ptr := binary.LittleEndian.Uint64(hdr[0:])
	slen := binary.LittleEndian.Uint64(hdr[8:])
	if allglen > maxGoroutines || slen > maxGoroutines {
		return nil, "", fmt.Errorf("corrupt runtime.allgs: allglen %d, len %d", allglen, slen)
	}
	n := allglen
	if slen < n {
		// allglen is published after the slice grows; a smaller len means
		// memory we cannot trust.
		warning = fmt.Sprintf("runtime.allglen %d > len(allgs) %d: reading %d", allglen, slen, slen)
		n = slen
	}
	if n == 0 {
		return nil, warning, nil
	}
	if uint64(cap(into)) >= n*8 {
		ptrs = into[:n*8]
	} else {
		ptrs = make([]byte, n*8)
	}
	if _, err := t.Mem.ReadAt(ptrs, ptr); err != nil {
		return nil, "", fmt.Errorf("read allgs array at %#x (%d entries): %w", ptr, n, err)
	}
	return ptrs, warning, nil
}

// gRanges returns the ranges that read the g structs at ptrs (8 bytes
// each), where each starts in a buffer of total bytes holding them all;
// in b's slices when they have room.
// A g followed by the next one within its heap slot's size (slots of one
// span) is read up to it: a run of them is one iovec, which halves the
// time to copy 100k g structs.
func gRanges(ptrs []byte, gsize int, b *buffers) (ranges []proc.Range, offs []int, total int) {
	n := len(ptrs) / 8
	if len(b.gRanges) >= n && len(b.gOffs) >= n {
		ranges, offs = b.gRanges[:n], b.gOffs[:n]
	} else {
		ranges, offs = make([]proc.Range, n), make([]int, n)
	}
	for i := 0; i < n; i++ {
		r := proc.Range{Addr: binary.LittleEndian.Uint64(ptrs[i*8:]), Len: gsize}
		if i+1 < n {
			if next := binary.LittleEndian.Uint64(ptrs[(i+1)*8:]); next > r.Addr && next-r.Addr > uint64(gsize) && next-r.Addr <= uint64(gSlot(gsize)) {
				r.Len = int(next - r.Addr)
			}
		}
		offs[i] = total
		total += r.Len
		ranges[i] = r
	}
	return ranges, offs, total
}

// readGs reads the g structs of ranges into dst, each at its offset in
// offs less base, and returns the indexes (in ranges) of those that could
// not be read; an error means none could.
func (t *Target) readGs(ranges []proc.Range, offs []int, base, gsize int, dst []byte) (map[int]bool, error) {
	failed := map[int]bool{}
	err := t.Mem.ReadBatch(ranges, dst)
	if err == nil {
		return failed, nil
	}
	var be *proc.BatchError
	if !errors.As(err, &be) {
		return nil, err
	}
	for _, i := range be.Failed {
		// Read past its end up to the next g: the g alone may still be
		// readable (a memory image holds the g's bytes only).
		if ranges[i].Len > gsize {
			if _, err := t.Mem.ReadAt(dst[offs[i]-base:offs[i]-base+gsize], ranges[i].Addr); err == nil {
				continue
			}
		}
		failed[i] = true
	}
	return failed, nil
}

// mapNewThreads adds to nsTIDs the stopped threads it lacks: threads
// created after the map was made, before the stop. It runs at most once per
// stop, and only for a target in another PID namespace.
func (t *Target) mapNewThreads(stopped []ptrace.Thread, nsTIDs map[int]int) {
	hosts := make(map[int]bool, len(nsTIDs))
	for _, h := range nsTIDs {
		hosts[h] = true
	}
	var missing []int
	for _, th := range stopped {
		if !hosts[th.TID] {
			missing = append(missing, th.TID)
		}
	}
	if len(missing) == 0 {
		return
	}
	more, _ := proc.NamespaceTIDs(t.PID, missing)
	for ns, host := range more {
		nsTIDs[ns] = host
	}
}

// gSlot returns the size of the heap slot a g of gsize bytes takes: Go's
// size classes from 256 to 512 bytes, where a g's size falls in every
// release, are the multiples of 32. A g followed by the next one of allgs
// at most a slot later is read with the bytes between them.
func gSlot(gsize int) int { return (gsize + 31) &^ 31 }

// buffers are allocated and touched before the process is stopped: on this
// class of machine a page fault on fresh memory costs microseconds, and
// faulting in tens of megabytes while the target waits would dominate the
// pause.
type buffers struct {
	g, stacks []byte
	pre       []byte // the rest of the chunk preCopyBytes carves from
	// allgs and the g structs' ranges and offsets in the stop
	// (readAllgs, gRanges).
	allgs   []byte
	gRanges []proc.Range
	gOffs   []int
	sudogs  []byte // what goroutines wait on: one sudog each, mostly
	waits   *waitScratch
	polls   map[uint64]int // pollDesc address → descriptor, found before the stop
	gs      []rawG         // one per allgs index
	// The stop's scan lists, one slot per allgs index: each chunk of
	// g's fills its own part (gScan).
	scanLists
	mapped []mapping
}

// hugeMin is the size from which byte buffers the stop reads into are
// mapped populated, in huge pages where there are (mapPopulated): the
// kernel faults every page in within the call, several times faster than
// touching each, and on a machine with shadow page tables a small page
// the kernel writes into for the first time costs microseconds in the
// stop even when gi's code has touched it (allgs, 800 KB at 100k
// goroutines: 2-7 ms read into touched small pages, 0.5 ms into a huge
// page). Below it, small pages cost less than populating a whole huge
// page (1.3 ms for 2 MB on a PVM guest, before the stop but in every run
// of gi on a small process).
const hugeMin = 256 << 10

// huge returns a pre-faulted byte buffer of n bytes, outside the Go heap
// from hugeMin bytes. Release frees it.
func (b *buffers) huge(n int) []byte {
	if n < hugeMin {
		return prefault(make([]byte, n))
	}
	if m := b.mapPopulated(n); m != nil {
		return m
	}
	return prefault(make([]byte, n))
}

// mapPopulated maps n bytes outside the heap, faulted in within the call
// in huge pages where there are (hugemem.Populated), for release to
// unmap; nil if the kernel refuses. In a huge page, what process_vm_readv
// writes in the stop costs 0.2 µs per 4 KiB instead of microseconds
// (figures in bench_test.go).
func (b *buffers) mapPopulated(n int) []byte {
	out, whole, ok := hugemem.Populated(n)
	if !ok {
		return nil
	}
	b.mapped = append(b.mapped, mapping{whole: whole, start: &out[0]})
	return out
}

// mapping is one region mapped outside the heap: whole is what to unmap,
// start where the buffer given out begins.
type mapping struct {
	whole []byte
	start *byte
}

// preStackChunk is the size of the chunks stacks copied before the stop
// are carved from.
const preStackChunk = 4 << 20

// preCopyBytes returns n bytes outside the Go heap for what is copied before
// the stop, carved from populated chunks of preStackChunk (faulted in
// before the stop or not, it costs the target nothing; in the mmap call
// it costs gi least). Release frees them.
func (b *buffers) preCopyBytes(n int) []byte {
	if n < hugeMin && len(b.pre) < n {
		return make([]byte, n) // a small process: not worth a huge page
	}
	if len(b.pre) < n {
		m := b.mapPopulated(max(n, preStackChunk))
		if m == nil {
			return make([]byte, n)
		}
		b.pre = m
	}
	out := b.pre[:n:n]
	b.pre = b.pre[n:]
	return out
}

// unmap releases the mapping that begins where b does, if any, early.
func (b *buffers) unmap(buf []byte) {
	if len(buf) == 0 {
		return
	}
	for i, m := range b.mapped {
		if m.start == &buf[0] {
			unix.Munmap(m.whole)
			b.mapped = append(b.mapped[:i], b.mapped[i+1:]...)
			return
		}
	}
}

// release unmaps the buffers mapped outside the heap. Nothing may refer to
// them afterwards: decoding copies what it keeps.
func (b *buffers) release() {
	for _, m := range b.mapped {
		unix.Munmap(m.whole)
	}
	b.mapped = nil
}

// Estimated bytes of used stack per goroutine, for pre-allocating, and
// the most memory reserved ahead of a snapshot.
const (
	stackEstimate = 512
	maxPrefault   = 1 << 30
)

// prepareBuffers reserves, right before the stop, what the stop copies
// into, sized from what was copied before it (pre), else from a racy read
// of runtime.allglen, with room for a few more goroutines.
func (t *Target) prepareBuffers(b *buffers, pre *preCopy) {
	var n, gBytes, stacks uint64
	gslot := uint64(gSlot(int(t.Layout.G.Size)))
	if pre != nil {
		n = uint64(len(pre.stacks))
		gBytes = uint64(pre.gBytes)
		stacks = uint64(max(pre.live-pre.kept, 0))
	} else {
		var err error
		if n, err = t.readWord(t.Layout.AllGLen + t.Bias); err != nil || n > maxGoroutines {
			return
		}
		gBytes, stacks = n*gslot, n
	}
	more := n/64 + 64
	n += more
	gBytes += more * gslot
	stacks += more
	if gBytes+stacks*stackEstimate+n*(uint64(unsafe.Sizeof(rawG{}))+8) > maxPrefault {
		return // too many to reserve ahead: allocate while copying
	}
	b.g = b.huge(int(gBytes))
	b.stacks = b.huge(int(stacks) * stackEstimate)
	if w := &t.Layout.Wait; w.Known && !t.SkipWaits {
		// Sudogs are read merged with the holes between them (readAll):
		// room for a hole after each, or the stop faults in the rest.
		b.sudogs = b.huge(int(n)*int(w.Sudog.Size+maxMergeGap) + 1<<16)
		ws := &waitScratch{reads: prefaulted[waitRead](int(n))[:0], sorted: prefaulted[waitRead](int(n)), bufs: prefaulted[[]byte](int(n)), member: prefaulted[int32](int(n)),
			ranges: prefaulted[proc.Range](int(n))[:0], offs: prefaulted[int](int(n))}
		b.waits = ws
	}
	b.gs = prefaulted[rawG](int(n))
	b.scanLists = newScanLists(int(n))
	b.allgs = b.huge(int(n) * 8)
	b.gRanges, b.gOffs = prefaulted[proc.Range](int(n)), prefaulted[int](int(n))
}

// prefaulted returns a slice of n zero Ts whose pages are faulted in.
func prefaulted[T any](n int) []T {
	s := make([]T, n)
	if n > 0 {
		var zero T
		prefault(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n*int(unsafe.Sizeof(zero))))
	}
	return s
}

// take returns n bytes from *pool, allocating if it is too small.
func (b *buffers) take(pool *[]byte, n int) []byte {
	if len(*pool) >= n {
		out := (*pool)[:n:n]
		*pool = (*pool)[n:]
		return out
	}
	return make([]byte, n)
}

// prefault touches every page of b so that later writes do not fault.
func prefault(b []byte) []byte {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
	return b
}
