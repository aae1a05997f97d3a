package inspect

import (
	"encoding/binary"

	"github.com/gi-debug/gi/ptrace"
)

// maxSignalStack bounds the signal stack read to find a signal's frame
// (the runtime's are 32 KiB).
const maxSignalStack = 64 << 10

// maxSignalFrames bounds the frames walked on a signal stack.
const maxSignalFrames = 64

// Where the kernel's signal frame keeps the interrupted registers,
// from the frame's start (the stack pointer the signal handler's first
// instruction sees, for arm64; one word above it, past the return
// address to the restorer, for amd64): ucontext's uc_mcontext, and in
// it rsp and rip (amd64: struct sigcontext, after uc_flags, uc_link and
// uc_stack), or x30, sp and pc (arm64: struct rt_sigframe's siginfo,
// then ucontext with its 128-byte signal mask, uc_mcontext aligned to
// 16: fault_address, then regs[31], sp, pc).
const (
	amd64Mcontext = 40
	amd64RSP      = amd64Mcontext + 15*8
	amd64RIP      = amd64Mcontext + 16*8
	arm64Mcontext = 128 + 176
	arm64LR       = arm64Mcontext + 8 + 30*8
	arm64SP       = arm64Mcontext + 8 + 31*8
	arm64PC       = arm64Mcontext + 8 + 32*8
)

// signalContext returns where a thread running a signal handler was
// interrupted, as the kernel saved it in the signal's frame: regs are
// the thread's registers, on the signal stack of the g its g register
// names (an M's gsignal); its frames are walked up to runtime.sigtramp,
// the function the kernel entered, whose caller's stack pointer is the
// frame. ok is false if the thread is not in a Go signal handler or its
// stack cannot be read.
func (t *Target) signalContext(regs ptrace.Regs) (pc, sp, lr uint64, ok bool) {
	L := t.Layout
	s := t.sym
	if regs.G == 0 || L.G.StackLo < 0 || L.G.StackHi < 0 {
		return 0, 0, 0, false
	}
	var b [16]byte
	if _, err := t.Mem.ReadAt(b[:8], regs.G+uint64(L.G.StackLo)); err != nil {
		return 0, 0, 0, false
	}
	if _, err := t.Mem.ReadAt(b[8:], regs.G+uint64(L.G.StackHi)); err != nil {
		return 0, 0, 0, false
	}
	lo, hi := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
	if regs.SP < lo || regs.SP >= hi || hi-regs.SP > maxSignalStack {
		return 0, 0, 0, false
	}
	stack := make([]byte, hi-regs.SP)
	if _, err := t.Mem.ReadAt(stack, regs.SP); err != nil {
		return 0, 0, 0, false
	}
	base := regs.SP
	pc, sp, lr = regs.PC, regs.SP, regs.LR
	innermost := true
	for n := 0; n < maxSignalFrames; n++ {
		f := s.funcFor(pc)
		if f == nil {
			return 0, 0, 0, false
		}
		delta, err := s.spDelta(f, pc)
		if err != nil {
			return 0, 0, 0, false
		}
		ret, callerSP, ok := s.callerFrame(stack, base, sp, delta, innermost, lr)
		innermost = false
		if f.Name == "runtime.sigtramp" || f.Name == "runtime.cgoSigtramp" {
			ipc, isp, ilr, ok := t.interrupted(sp + uint64(delta))
			if !ok || isp < lo || isp >= hi {
				return ipc, isp, ilr, ok
			}
			// A signal that came while the handler ran (the crash
			// dump's own raise): the handler it interrupted, on the
			// same stack, is walked on to its own frame.
			pc, sp, lr, innermost = ipc, isp, ilr, true
			continue
		}
		if !ok || ret == 0 {
			return 0, 0, 0, false
		}
		pc, sp = ret, callerSP
	}
	return 0, 0, 0, false
}

// interrupted reads the interrupted registers from the signal frame
// whose handler was entered with stack pointer entry.
func (t *Target) interrupted(entry uint64) (pc, sp, lr uint64, ok bool) {
	word := func(off uint64) (uint64, bool) {
		var b [8]byte
		if _, err := t.Mem.ReadAt(b[:], entry+off); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	var ok1, ok2, ok3 bool
	if t.Binary.Arch == "arm64" {
		pc, ok1 = word(arm64PC)
		sp, ok2 = word(arm64SP)
		lr, ok3 = word(arm64LR)
		return pc, sp, lr, ok1 && ok2 && ok3
	}
	pc, ok1 = word(8 + amd64RIP)
	sp, ok2 = word(8 + amd64RSP)
	return pc, sp, 0, ok1 && ok2
}
