package inspect

import (
	"encoding/binary"
	"errors"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// Copying stacks before the stop.
//
// At 100k goroutines most of a snapshot's stop used to be their stacks: one
// read each, about half a microsecond apiece however small. A parked
// goroutine's stack does not change until the goroutine runs again, so a
// snapshot copies the stacks of parked goroutines before it stops the
// process, and in the stop copies again only those of goroutines that ran
// since.
//
// Whether a goroutine ran since is told from its g, which the stop copies
// anyway: its stamp must be equal. The stamp holds where the goroutine is
// parked (sched.sp, pc and lr, the system call's sp and pc), its stack's
// bounds, status, wait reason, sudog, labels and goid, and trackingSeq,
// the runtime's count of the g's transitions out of _Grunning through
// casgstatus. The garbage collector's suspension (preemptPark) is the one
// exit it does not count; it leaves the wait reason "preempted", and such
// goroutines' stacks are always copied in the stop. That count
// has 8 bits: a goroutine that ran a multiple of 256 times since and parked
// again at the very same sp, pc, wait and sudog looks unchanged. Its stack
// then differs from the copy only if it came back there through other
// callers (the frames above sp are its callers' and hold what the unwinder
// reads: return addresses, and for sync.Cond.Wait the cond).
//
// The bytes copied before the stop are those of a parked goroutine: a
// batch's g structs are read before and after its stacks (about 2 ms
// apart), and a stack is kept only if its g's stamp was the same both times.

const (
	// preCopyBatch is how many g's are read, then their stacks, then the
	// g's again: the window in which a goroutine must not have run.
	preCopyBatch = 2048
	// maxPreCopyStack bounds a stack copied before the stop; larger ones
	// (deep recursion) are copied in the stop, as they always were.
	maxPreCopyStack = 64 << 10
)

// parkStamp is what must be equal in a g before the stop and in it for the
// stack copied before the stop to stand for the stack in the stop.
type parkStamp struct {
	lo, hi, sp, pc, lr     uint64
	syscallSP, syscallPC   uint64
	goid, waiting, labels  uint64
	status                 uint32
	reason, trackingSeq    uint8
	hasReason, hasTracking bool
}

// stamp returns the stamp of the g in gb, and whether the g is parked with
// a stack worth copying early: runnable or waiting but not suspended by
// the garbage collector, on no thread, its sp inside its stack, the used
// part at most maxPreCopyStack.
func (t *Target) stamp(gb []byte) (parkStamp, bool) {
	G := &t.Layout.G
	s := parkStamp{
		lo:        t.u64(gb, G.StackLo),
		hi:        t.u64(gb, G.StackHi),
		sp:        t.u64(gb, G.SchedSP),
		pc:        t.u64(gb, G.SchedPC),
		lr:        t.u64(gb, G.SchedLR),
		syscallSP: t.u64(gb, G.SyscallSP),
		syscallPC: t.u64(gb, G.SyscallPC),
		goid:      t.u64(gb, G.Goid),
		labels:    t.u64(gb, G.Labels),
		status:    t.u32(gb, G.AtomicStatus) &^ t.Layout.ScanBit,
	}
	if W := &t.Layout.Wait; W.Known {
		s.waiting = t.u64(gb, W.GWaiting)
	}
	if o := G.WaitReason; o >= 0 && o < int64(len(gb)) {
		s.reason, s.hasReason = gb[o], true
	}
	if o := G.TrackingSeq; o >= 0 && o < int64(len(gb)) {
		s.trackingSeq, s.hasTracking = gb[o], true
	}
	// A goroutine the garbage collector suspended (preemptPark) left
	// _Grunning without counting in trackingSeq; its wait reason says
	// "preempted" until it parks again, and its stack is not trusted.
	preempted := !s.hasReason || !t.status.hasPreempted || s.reason == t.status.preempted
	parked := t.status.isParked(s.status) && !preempted && t.u64(gb, G.M) == 0 &&
		s.sp != 0 && s.sp >= s.lo && s.sp < s.hi && s.hi-s.sp <= maxPreCopyStack
	return s, parked
}

// statusValues are the goroutine status values the stop compares with.
type statusValues struct {
	dead, deadExtra, running, syscall, waiting uint32
	hasDeadExtra                               bool
	// parked has a bit set for each status of a goroutine off every
	// thread, its stack still: runnable, waiting (and leaked, Go 1.26+).
	parked uint64
	// preempted is the wait reason "preempted", if the release has it.
	preempted    uint8
	hasPreempted bool
}

// setPreempted finds the wait reason "preempted" among reasons.
func (v *statusValues) setPreempted(reasons []string) {
	for i, r := range reasons {
		if r == "preempted" && i < 256 {
			v.preempted, v.hasPreempted = uint8(i), true
			return
		}
	}
}

func statusValuesOf(l *runtimelayout.RuntimeLayout) statusValues {
	var v statusValues
	v.dead, _ = l.StatusValue("_Gdead")
	v.deadExtra, v.hasDeadExtra = l.StatusValue("_Gdeadextra")
	v.running, _ = l.StatusValue("_Grunning")
	v.syscall, _ = l.StatusValue("_Gsyscall")
	v.waiting, _ = l.StatusValue("_Gwaiting")
	for _, name := range []string{"_Gwaiting", "_Grunnable", "_Gleaked"} {
		if s, ok := l.StatusValue(name); ok && s < 64 {
			v.parked |= 1 << s
		}
	}
	return v
}

// isDead reports whether status (scan bit cleared) is a dead g's.
func (v *statusValues) isDead(status uint32) bool {
	return status == v.dead || (v.hasDeadExtra && status == v.deadExtra)
}

// isParked reports whether status (scan bit cleared) is a goroutine's off
// every thread, its stack still.
func (v *statusValues) isParked(status uint32) bool {
	return status < 64 && v.parked&(1<<status) != 0
}

// preCopy is what a snapshot copied before the stop, by allgs index.
type preCopy struct {
	addrs  []byte      // allgs as read before the stop, 8 bytes a g
	stamps []parkStamp // the g's stamp where stacks holds a stack
	stacks [][]byte    // the used part of the g's stack, nil if not copied
	kept   int         // stacks copied
	live   int         // g's not dead when read (dead ones have no stack)
	gBytes int         // the size of the g structs read as runs (gRanges)
}

// stackOf returns the stack copied before the stop for the g at allgs
// index i, whose stamp in the stop is s (parked as stamp says), if the g
// has not changed since.
func (p *preCopy) stackOf(i int, addr uint64, s parkStamp, parked bool) []byte {
	if p == nil || !parked || i >= len(p.stacks) || p.stacks[i] == nil ||
		binary.LittleEndian.Uint64(p.addrs[i*8:]) != addr || s != p.stamps[i] {
		return nil
	}
	return p.stacks[i]
}

// preCopyStacks copies, without stopping the process, the stacks of the
// goroutines that are parked, into chunks bufs releases, at most
// maxPrefault bytes of them. It returns nil when it cannot read allgs (the
// stop then copies every stack itself), and what it copied so far when a
// later read fails: the stop copies the rest.
func (t *Target) preCopyStacks(bufs *buffers) *preCopy {
	ptrs, _, err := t.readAllgs(nil)
	if err != nil || len(ptrs) == 0 {
		return nil
	}
	n := len(ptrs) / 8
	gsize := int(t.Layout.G.Size)
	ranges, offs, total := gRanges(ptrs, gsize, &buffers{})
	p := &preCopy{addrs: ptrs, stamps: make([]parkStamp, n), stacks: make([][]byte, n), gBytes: total}
	var before, after []byte
	var stackRanges []proc.Range
	var owners []int
	copied := 0
	for lo := 0; lo < n; lo += preCopyBatch {
		hi := min(lo+preCopyBatch, n)
		base, end := offs[lo], total
		if hi < n {
			end = offs[hi]
		}
		if cap(before) < end-base {
			before, after = make([]byte, end-base), make([]byte, end-base)
		}
		before, after = before[:end-base], after[:end-base]
		failed, err := t.readGs(ranges[lo:hi], offs[lo:hi], base, gsize, before)
		if err != nil {
			return p
		}
		stackRanges, owners = stackRanges[:0], owners[:0]
		size := 0
		for i := lo; i < hi; i++ {
			if failed[i-lo] {
				continue
			}
			o := offs[i] - base
			s, ok := t.stamp(before[o : o+gsize])
			if !t.status.isDead(s.status) {
				p.live++
			}
			if !ok {
				continue
			}
			p.stamps[i] = s
			stackRanges = append(stackRanges, proc.Range{Addr: s.sp, Len: int(s.hi - s.sp)})
			owners = append(owners, i)
			size += int(s.hi - s.sp)
		}
		if len(owners) == 0 {
			continue
		}
		if copied += size; copied > maxPrefault {
			return p
		}
		sbuf := bufs.preCopyBytes(size)
		var unread map[int]bool
		if err := t.Mem.ReadBatch(stackRanges, sbuf); err != nil {
			var be *proc.BatchError
			if !errors.As(err, &be) {
				return p
			}
			unread = map[int]bool{}
			for _, k := range be.Failed {
				unread[k] = true
			}
		}
		failed, err = t.readGs(ranges[lo:hi], offs[lo:hi], base, gsize, after)
		if err != nil {
			return p
		}
		off := 0
		for k, i := range owners {
			stack := sbuf[off : off+stackRanges[k].Len : off+stackRanges[k].Len]
			off += stackRanges[k].Len
			if unread[k] || failed[i-lo] {
				continue
			}
			o := offs[i] - base
			if s, ok := t.stamp(after[o : o+gsize]); ok && s == p.stamps[i] {
				p.stacks[i] = stack
				p.kept++
			}
		}
	}
	return p
}
