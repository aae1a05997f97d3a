package ptrace

import (
	"encoding/binary"

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

// childStack returns the stack a copy made by clone starts on, 512 bytes
// under the parked thread's sp (past any red zone), and what to write at
// addr for the copy to end the moment it runs: the word its RET pops,
// the gadget's Exit.
func childStack(g Gadget, sp uint64) (stack, addr uint64, data []byte) {
	stack = (sp - 512) &^ 15
	data = make([]byte, 8)
	binary.LittleEndian.PutUint64(data, g.Exit)
	return stack, stack, data
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
