package ptrace

import (
	"golang.org/x/sys/unix"
)

// System call numbers the calls use (x86_64).
const (
	sysClone = unix.SYS_CLONE
	sysWait4 = unix.SYS_WAIT4
)

// callRegs are a thread's registers, as a call saves, changes and
// restores them.
type callRegs struct{ r unix.PtraceRegs }

func readCallRegs(tid int) (*callRegs, error) {
	c := &callRegs{}
	if err := unix.PtraceGetRegs(tid, &c.r); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *callRegs) write(tid int) error { return unix.PtraceSetRegs(tid, &c.r) }

// setPC sets the program counter.
func (c *callRegs) setPC(pc uint64) { c.r.Rip = pc }

// result is the system call's return value (a negative errno on failure).
func (c *callRegs) result() int64 { return int64(c.r.Rax) }

// cloneArgs orders clone's arguments (flags, stack, parent_tid,
// child_tid, tls) as x86_64 takes them.
func cloneArgs(flags, stack uint64) [6]uint64 { return [6]uint64{flags, stack} }

// callFrame returns the registers that make the thread call nr(args) at
// pc: orig_rax -1, so that the kernel does not restart the call the
// thread was stopped in; the rest as they were, the stack pointer
// included (runtime.futex's: Gadget).
func callFrame(saved *callRegs, pc, nr uint64, args [6]uint64) *callRegs {
	f := *saved
	r := &f.r
	r.Rip = pc
	r.Rax, r.Orig_rax = nr, ^uint64(0)
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = args[0], args[1], args[2], args[3], args[4], args[5]
	return &f
}

// cloneSetup returns how the parked thread tid, its stack pointer sp,
// makes the clone at g.Clone (runtime.clone's SYSCALL): the copy's stack
// is the thread's own (in the copy's memory: the call its child path
// makes writes there), and its child path, with no M and no G (R13 and
// R9 nil), calls fn (R12), the gadget's Exit. Nothing is written to the
// process's memory (scratch nil).
func cloneSetup(tid int, g Gadget, sp uint64) (stack uint64, mem *scratch, regs func(*callRegs), err error) {
	return sp, nil, func(c *callRegs) { c.r.R13, c.r.R9, c.r.R12 = 0, 0, g.Exit }, nil
}

// futexOp is the futex operation a thread stopped in runtime.futex
// passes: rsi, user_regs_struct's word 13.
func futexOp(th *Thread) uint64 { return th.Regs.All[13] }

// callable tells whether the stopped thread can make a call and be put
// back exactly: the kernel decides a restart after the stop, from the
// registers gi restores; but not a thread in a call that swapped its
// signal mask for its duration (maskSwapped).
func callable(th *Thread) bool {
	r := &th.Regs
	// user_regs_struct: r8 is word 9.
	return !maskSwapped(r.Syscall, r.All[9], unix.SYS_EPOLL_PWAIT,
		unix.SYS_PPOLL, unix.SYS_PSELECT6, unix.SYS_RT_SIGSUSPEND, unix.SYS_EPOLL_PWAIT2, unix.SYS_IO_PGETEVENTS)
}
