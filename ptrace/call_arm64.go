package ptrace

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// System call numbers the calls use (arm64).
const (
	sysClone = unix.SYS_CLONE
	sysWait4 = unix.SYS_WAIT4
)

// callRegs are a thread's registers, as a call saves, changes and
// restores them.
type callRegs struct{ r unix.PtraceRegsArm64 }

func readCallRegs(tid int) (*callRegs, error) {
	c := &callRegs{}
	if err := unix.PtraceGetRegSetArm64(tid, unix.NT_PRSTATUS, &c.r); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *callRegs) write(tid int) error {
	return unix.PtraceSetRegSetArm64(tid, unix.NT_PRSTATUS, &c.r)
}

// setPC sets the program counter.
func (c *callRegs) setPC(pc uint64) { c.r.Pc = pc }

// result is the system call's return value (a negative errno on failure).
func (c *callRegs) result() int64 { return int64(c.r.Regs[0]) }

// cloneArgs orders clone's arguments (flags, stack, parent_tid, tls,
// child_tid) as arm64 takes them.
func cloneArgs(flags, stack uint64) [6]uint64 { return [6]uint64{flags, stack} }

// callFrame returns the registers that make the thread call nr(args) at
// pc; the rest as they were, the stack pointer and the link register
// included (runtime.futex's: Gadget).
func callFrame(saved *callRegs, pc, nr uint64, args [6]uint64) *callRegs {
	f := *saved
	r := &f.r
	r.Pc = pc
	r.Regs[8] = nr
	copy(r.Regs[:6], args[:])
	return &f
}

// cloneMark is the word runtime.clone's child checks 32 bytes under its
// stack before it goes on.
const cloneMark = 1234

// cloneSetup returns how the parked thread tid, its stack pointer sp,
// makes the clone at g.Clone (runtime.clone's SVC): the copy starts on a
// stack 512 bytes under sp, under which scratch writes what runtime.clone's
// child reads there — its mark, then fn (the gadget's Exit), g and m, nil
// — for the copy to end the moment it runs. The words must lie on the
// thread's own stack, above the g's stack.lo (g.stack is the g's first
// field; R28 holds the g): a stack with less room is refused.
func cloneSetup(tid int, g Gadget, sp uint64) (stack uint64, mem *scratch, regs func(*callRegs), err error) {
	stack = (sp - 512) &^ 15
	r, err := readCallRegs(tid)
	if err != nil {
		return 0, nil, nil, err
	}
	var lo [8]byte
	if n, err := peek(tid, r.r.Regs[28], lo[:]); err != nil || n != 8 {
		return 0, nil, nil, fmt.Errorf("read the stack bounds of g %#x: %v", r.r.Regs[28], err)
	}
	if l := binary.LittleEndian.Uint64(lo[:]); stack-32 < l || stack > sp {
		return 0, nil, nil, fmt.Errorf("%w: thread %d: %d bytes of stack under sp %#x, too few for the copy's", ErrFreezeRefused, tid, sp-l, sp)
	}
	data := make([]byte, 32)
	binary.LittleEndian.PutUint64(data[0:], cloneMark)
	binary.LittleEndian.PutUint64(data[8:], g.Exit)
	return stack, &scratch{addr: stack - 32, data: data}, nil, nil
}

// futexOp is the futex operation a thread stopped in runtime.futex
// passes: x1.
func futexOp(th *Thread) uint64 { return th.Regs.All[1] }

// Calls whose interrupted state arm64's stop does not show whole: the
// kernel rewinds a thread blocked in a call to its SVC before the stop,
// but arranges restart_syscall (for a call with a timeout that must
// resume where it was) only after it, and only if the pc it left is
// still there.
const (
	sysNanosleep      = 101
	sysClockNanosleep = 115
	sysFutex          = 98
	sysRestartSyscall = 128
)

// callable tells whether the stopped thread can make a call and be put
// back exactly: not rewound to restart a call that restarts through
// restart_syscall (a sleep, a futex wait with a timeout), nor in a call
// that swapped its signal mask for its duration (maskSwapped).
func callable(th *Thread) bool {
	r := &th.Regs
	if r.Syscall < 0 {
		return true
	}
	if maskSwapped(r.Syscall, r.All[4], unix.SYS_EPOLL_PWAIT,
		unix.SYS_PPOLL, unix.SYS_PSELECT6, unix.SYS_RT_SIGSUSPEND, unix.SYS_EPOLL_PWAIT2, unix.SYS_IO_PGETEVENTS) {
		return false
	}
	switch r.Syscall {
	case sysNanosleep, sysClockNanosleep, sysRestartSyscall:
		return false
	case sysFutex:
		return r.All[3] == 0 // x3: the timeout
	}
	return true
}
