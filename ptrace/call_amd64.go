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

// result is the system call's return value (a negative errno on failure).
func (c *callRegs) result() int64 { return int64(c.r.Rax) }

// cloneArgs orders clone's arguments (flags, stack, parent_tid,
// child_tid, tls) as x86_64 takes them.
func cloneArgs(flags uint64) [6]uint64 { return [6]uint64{flags} }

// callFrame returns the registers that make the thread call nr(args) at
// the gadget's SYSCALL: orig_rax -1, so that the kernel does not restart
// the call the thread was stopped in; the stack pointer 512 bytes under
// the thread's (past any red zone), where word (the gadget's exit) is to
// be written at scratch: a copy made by the call that ever ran would RET
// there and exit.
func callFrame(saved *callRegs, g Gadget, nr uint64, args [6]uint64) (frame *callRegs, scratch, word uint64) {
	f := *saved
	r := &f.r
	r.Rip = g.Syscall
	r.Rax, r.Orig_rax = nr, ^uint64(0)
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = args[0], args[1], args[2], args[3], args[4], args[5]
	scratch = (saved.r.Rsp - 512) &^ 15
	r.Rsp = scratch
	return &f, scratch, g.Exit
}

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
