package inspect

import "encoding/binary"

// callerFrame returns the return address and the caller's stack pointer of
// a frame of size delta at sp. On arm64 a function with a frame saves the
// link register at the bottom of its frame (0(RSP)) in its prologue; a
// frameless leaf keeps it in LR, known only for the innermost frame
// (g.sched.lr or the thread's x30). stack is a copy of target memory
// starting at address base.
func callerFrame(stack []byte, base, sp uint64, delta int64, innermost bool, lr uint64) (pc, callerSP uint64, ok bool) {
	if delta < 0 {
		return 0, 0, false
	}
	if delta == 0 {
		if !innermost {
			return 0, 0, false
		}
		return lr, sp, true
	}
	if sp < base || sp+8-base > uint64(len(stack)) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(stack[sp-base:]), sp + uint64(delta), true
}
