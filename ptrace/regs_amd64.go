package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// getRegs reads the registers of a stopped thread.
func getRegs(tid int) (Regs, error) {
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &r); err != nil {
		return Regs{}, err
	}
	out := Regs{PC: r.Rip, SP: r.Rsp, BP: r.Rbp, FSBase: r.Fs_base, G: r.R14, Syscall: int64(r.Orig_rax), Arg0: r.Rdi}
	// unix.PtraceRegs is user_regs_struct: 27 words, in its order.
	copy(out.All[:], (*[unsafe.Sizeof(r) / 8]uint64)(unsafe.Pointer(&r))[:])
	return out, nil
}

// getVector reads the vector registers of a stopped thread: the XSAVE
// area (x87, SSE, AVX, AVX-512 and beyond: up to a few KiB, AMX's tiles
// 8 KiB more), or the FXSAVE area (x87 and SSE) where the kernel has no
// NT_X86_XSTATE.
// scratch is a buffer of 16 KiB to read into.
func getVector(tid int, scratch []byte) ([]byte, uint32, error) {
	if b, err := getRegSet(tid, NoteX86XState, scratch); err == nil {
		return b, NoteX86XState, nil
	}
	b, err := getRegSet(tid, NotePRFPREG, scratch[:512])
	if err != nil {
		return nil, 0, err
	}
	return b, NotePRFPREG, nil
}
