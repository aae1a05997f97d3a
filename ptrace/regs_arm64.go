package ptrace

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ntArmSystemCall is NT_ARM_SYSTEM_CALL: the register set holding the
// number of the system call a stopped thread is in, -1 if none.
const ntArmSystemCall = 0x404

// getRegs reads the registers of a stopped thread.
func getRegs(tid int) (Regs, error) {
	var r unix.PtraceRegsArm64
	if err := unix.PtraceGetRegSetArm64(tid, unix.NT_PRSTATUS, &r); err != nil {
		return Regs{}, err
	}
	out := Regs{PC: r.Pc, SP: r.Sp, BP: r.Regs[29], LR: r.Regs[30], G: r.Regs[28], Syscall: -1}
	// unix.PtraceRegsArm64 is user_pt_regs: 34 words, in its order.
	copy(out.All[:], (*[unsafe.Sizeof(r) / 8]uint64)(unsafe.Pointer(&r))[:])
	// TPIDR_EL0 lives in its own register set.
	if tls, err := getRegSet(tid, unix.NT_ARM_TLS, make([]byte, 8)); err == nil && len(tls) == 8 {
		out.FSBase = binary.LittleEndian.Uint64(tls)
	}
	out.Syscall, out.Arg0 = syscallOf(tid, &r)
	return out, nil
}

// svc0 is the encoding of SVC #0, the arm64 system call instruction.
const svc0 = 0xd4000001

// syscallOf returns the system call the stopped thread tid is in and its
// first argument, or -1. A thread stopped while blocked in a call (the
// stop interrupts it) stands on its SVC instruction: the kernel rewinds the
// pc and restores x0 from orig_x0 before the stop, for the call to restart
// when the thread resumes; the number is in x8. Otherwise the call is the
// one its NT_ARM_SYSTEM_CALL register set names, its argument in
// /proc/<tid>/syscall (x0 holds the result once a call is interrupted).
func syscallOf(tid int, r *unix.PtraceRegsArm64) (nr int64, arg0 uint64) {
	var word [8]byte
	if n, err := unix.PtracePeekText(tid, uintptr(r.Pc), word[:]); err == nil && n >= 4 &&
		uint32(word[0])|uint32(word[1])<<8|uint32(word[2])<<16|uint32(word[3])<<24 == svc0 {
		return int64(r.Regs[8]), r.Regs[0]
	}
	b, err := getRegSet(tid, ntArmSystemCall, make([]byte, 4))
	if err != nil || len(b) != 4 {
		return -1, 0
	}
	sysno := int32(binary.LittleEndian.Uint32(b))
	if sysno < 0 {
		return -1, 0
	}
	a, err := syscallArg0(tid, int64(sysno))
	if err != nil {
		return -1, 0
	}
	return int64(sysno), a
}

// syscallArg0 reads the first argument of system call nr, which the
// stopped thread tid is in, from /proc/<tid>/syscall ("nr arg0 ... sp
// pc"); an error if the file names another call.
func syscallArg0(tid int, nr int64) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/syscall: %q", tid, b)
	}
	if n, err := strconv.ParseInt(f[0], 10, 64); err != nil || n != nr {
		return 0, fmt.Errorf("/proc/%d/syscall: in %s, registers say %d", tid, f[0], nr)
	}
	return strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
}

// getVector reads the vector registers of a stopped thread: V0-V31,
// FPSR and FPCR (user_fpsimd_state).
// scratch is a buffer to read into, 528 bytes at least.
func getVector(tid int, scratch []byte) ([]byte, uint32, error) {
	b, err := getRegSet(tid, NotePRFPREG, scratch[:528])
	if err != nil {
		return nil, 0, err
	}
	return b, NotePRFPREG, nil
}
