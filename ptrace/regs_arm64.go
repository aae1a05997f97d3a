package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// getRegs reads the registers of a stopped thread.
func getRegs(tid int) (Regs, error) {
	var r unix.PtraceRegsArm64
	if err := unix.PtraceGetRegSetArm64(tid, unix.NT_PRSTATUS, &r); err != nil {
		return Regs{}, err
	}
	// x0 holds the return value once a system call is interrupted: its
	// descriptor argument is not known here.
	out := Regs{PC: r.Pc, SP: r.Sp, BP: r.Regs[29], LR: r.Regs[30], G: r.Regs[28], Syscall: -1}
	// TPIDR_EL0 lives in its own register set.
	var tls uint64
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&tls)), Len: 8}
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(tid), uintptr(unix.NT_ARM_TLS), uintptr(unsafe.Pointer(&iov)), 0, 0); errno == 0 {
		out.FSBase = tls
	}
	return out, nil
}
