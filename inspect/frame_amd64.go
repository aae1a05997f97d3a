package inspect

import "encoding/binary"

// callerFrame returns the return address and the caller's stack pointer of
// a frame of size delta at sp. On amd64 the CALL pushed the return address
// just below the caller's stack pointer. stack is a copy of target memory
// starting at address base.
func callerFrame(stack []byte, base, sp uint64, delta int64, innermost bool, lr uint64) (pc, callerSP uint64, ok bool) {
	fp := sp + uint64(delta) + 8
	if delta < 0 || fp-8 < base || fp-base > uint64(len(stack)) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(stack[fp-8-base:]), fp, true
}
