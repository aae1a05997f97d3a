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
