package inspect

import "encoding/binary"

// What unwinding and describing a goroutine depend on in the target's
// architecture, chosen by its executable (elfbin.Binary.Arch), never by
// the machine gi runs on: a memory image or a core from arm64 decodes on
// amd64 too.

// callerFrameFunc returns the return address and the caller's stack
// pointer of a frame of size delta at sp. stack is a copy of target memory
// starting at address base; innermost says the frame is the goroutine's
// innermost, whose link register (arm64) is lr.
type callerFrameFunc func(stack []byte, base, sp uint64, delta int64, innermost bool, lr uint64) (pc, callerSP uint64, ok bool)

// callerFrameFor returns the frame walk of arch ("amd64" or "arm64").
func callerFrameFor(arch string) callerFrameFunc {
	if arch == "arm64" {
		return callerFrameARM64
	}
	return callerFrameAMD64
}

// callerFrameAMD64: the CALL pushed the return address just below the
// caller's stack pointer.
func callerFrameAMD64(stack []byte, base, sp uint64, delta int64, innermost bool, lr uint64) (pc, callerSP uint64, ok bool) {
	fp := sp + uint64(delta) + 8
	if delta < 0 || fp-8 < base || fp-base > uint64(len(stack)) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(stack[fp-8-base:]), fp, true
}

// callerFrameARM64: a function with a frame saves the link register at the
// bottom of its frame (0(RSP)) in its prologue; a frameless leaf keeps it
// in LR, known only for the innermost frame (g.sched.lr or the thread's
// x30).
func callerFrameARM64(stack []byte, base, sp uint64, delta int64, innermost bool, lr uint64) (pc, callerSP uint64, ok bool) {
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

// fdSyscall is a system call whose first argument is the descriptor a
// goroutine blocked in it waits on: its name and the side ("read" or
// "write", "" for neither).
type fdSyscall struct{ name, dir string }

// fdSyscallsFor returns arch's fd system calls by number. On arm64 ptrace
// finds the argument (Regs.Arg0) where the stop left it: x0, restored from
// orig_x0 for the call's restart.
func fdSyscallsFor(arch string) map[int64]fdSyscall {
	if arch == "arm64" {
		return fdSyscallsARM64
	}
	return fdSyscallsAMD64
}

// The fd system calls of Linux amd64 (arch/x86/entry/syscalls) and arm64
// (the generic table, include/uapi/asm-generic/unistd.h), checked against
// golang.org/x/sys's tables for both (TestFdSyscallNumbers).
var (
	fdSyscallsAMD64 = map[int64]fdSyscall{
		0: {"read", "read"}, 1: {"write", "write"}, 16: {"ioctl", ""}, 17: {"pread64", "read"}, 18: {"pwrite64", "write"},
		19: {"readv", "read"}, 20: {"writev", "write"}, 40: {"sendfile", "write"}, 42: {"connect", "write"}, 43: {"accept", "read"},
		44: {"sendto", "write"}, 45: {"recvfrom", "read"}, 46: {"sendmsg", "write"}, 47: {"recvmsg", "read"}, 72: {"fcntl", ""},
		73: {"flock", ""}, 74: {"fsync", "write"}, 75: {"fdatasync", "write"}, 77: {"ftruncate", "write"}, 217: {"getdents64", "read"},
		288: {"accept4", "read"}, 295: {"preadv", "read"}, 296: {"pwritev", "write"}, 299: {"recvmmsg", "read"}, 307: {"sendmmsg", "write"},
	}
	fdSyscallsARM64 = map[int64]fdSyscall{
		63: {"read", "read"}, 64: {"write", "write"}, 29: {"ioctl", ""}, 67: {"pread64", "read"}, 68: {"pwrite64", "write"},
		65: {"readv", "read"}, 66: {"writev", "write"}, 71: {"sendfile", "write"}, 203: {"connect", "write"}, 202: {"accept", "read"},
		206: {"sendto", "write"}, 207: {"recvfrom", "read"}, 211: {"sendmsg", "write"}, 212: {"recvmsg", "read"}, 25: {"fcntl", ""},
		32: {"flock", ""}, 82: {"fsync", "write"}, 83: {"fdatasync", "write"}, 46: {"ftruncate", "write"}, 61: {"getdents64", "read"},
		242: {"accept4", "read"}, 69: {"preadv", "read"}, 70: {"pwritev", "write"}, 243: {"recvmmsg", "read"}, 269: {"sendmmsg", "write"},
	}
)
