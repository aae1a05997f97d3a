package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/proc"
)

// Bounds of the system calls gi makes a stopped thread run.
const (
	injectTimeout = 2 * time.Second
	injectStops   = 4096
	releaseWait   = 10 * time.Second
)

// ErrFreezeRefused wraps the reasons a process cannot be frozen: a
// seccomp filter gi may not suspend, no thread in a state to make the
// call, the kernel or the process's limits refusing a new process. The
// process is unharmed; the caller reads it in the stop instead.
var ErrFreezeRefused = errors.New("cannot freeze a copy of the process")

// Frozen is a copy of a stopped process's memory, made by the process
// itself (a thread made to call clone without CLONE_VM in the stop): a
// new process, stopped by gi before it runs a single instruction, whose
// memory is the process's as it was in the stop, page for page, however
// the process changes its own after it resumes. Reading it costs the
// process nothing but the pages it writes while the copy lives (the
// kernel copies each on its first write). Release ends it.
type Frozen struct {
	// Pid is the copy's process id, in gi's PID namespace.
	Pid int
	// Took is how long the copy took, in the stop; ReapPause how long
	// Release stopped the process again to reap the copy (all its stops).
	Took, ReapPause time.Duration
	// LeftReaped counts the copies an earlier gi, killed before it
	// could reap them, had left as zombies of the process, reaped in
	// this stop.
	LeftReaped int

	parent  int    // the process the copy was made of
	gadget  Gadget // its runtime.exit, for the call that reaps the copy
	nsPid   int    // the copy's id in the process's own PID namespace
	t       *Tracer
	once    sync.Once
	release error
}

// Freeze makes a Frozen copy of the stopped process, with the Gadget of
// its runtime.exit. The copy shares the process's descriptor table
// (CLONE_FILES: no descriptor gains a reference) and sends no signal when
// it ends. A refusal (ErrFreezeRefused) leaves the process as it was.
func (s *Stopped) Freeze(g Gadget) (*Frozen, error) { return s.freezeOn(0, g) }

// freezeOn is Freeze with the thread that calls clone chosen: tid, or
// the first callable one if 0.
func (s *Stopped) freezeOn(tid int, g Gadget) (*Frozen, error) {
	if s.resumed {
		return nil, fmt.Errorf("process %d: freeze after resume", s.Pid)
	}
	var f *Frozen
	err := s.t.do(func() error {
		start := time.Now()
		child, err := s.freeze(tid, g)
		if err != nil {
			return err
		}
		f = &Frozen{Pid: child, parent: s.Pid, gadget: g, t: s.t, Took: time.Since(start), LeftReaped: s.leftReaped}
		f.nsPid = namespacePid(child)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.t.mu.Lock()
	if s.t.frozen == nil {
		s.t.frozen = map[*Frozen]struct{}{}
	}
	s.t.frozen[f] = struct{}{}
	s.t.mu.Unlock()
	return f, nil
}

// freeze runs on the tracer thread.
func (s *Stopped) freeze(tid int, g Gadget) (int, error) {
	st, err := s.callThread(tid, g)
	if err != nil {
		return 0, err
	}
	if err := g.check(st.tid, runtime.GOARCH); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrFreezeRefused, err)
	}
	// Copies an earlier gi left (killed before it could reap them) are
	// reaped first: zombies of the process, nothing else.
	s.leftReaped += s.reapLeftCopies(st, g)
	th := s.thread(st.tid)
	stack, mem, regs, err := cloneSetup(st.tid, g, th.Regs.SP)
	if err != nil {
		return 0, err
	}
	ret, child, err := s.callWith(st, g.Clone, sysClone, cloneArgs(unix.CLONE_FILES, stack), mem, regs)
	// A copy made but not kept is ended and reaped in this stop.
	abandon := func(err error) (int, error) {
		ns := namespacePid(child)
		endCopy(child)
		s.reapCopy(ns, g)
		return 0, err
	}
	if err != nil {
		if child > 0 {
			return abandon(err)
		}
		return 0, err
	}
	if ret < 0 {
		return 0, fmt.Errorf("%w: clone in process %d: %v", ErrFreezeRefused, s.Pid, unix.Errno(-ret))
	}
	if child <= 0 {
		return 0, fmt.Errorf("process %d: clone returned %d but no new process was reported", s.Pid, ret)
	}
	// The copy stops before its first instruction (it is seized, as its
	// parent thread was).
	ws, err := waitStop(child, injectTimeout)
	if err != nil {
		return abandon(fmt.Errorf("process %d: its copy %d: %w", s.Pid, child, err))
	}
	if !ws.Stopped() {
		return abandon(fmt.Errorf("process %d: its copy %d ended: %v", s.Pid, child, ws))
	}
	testPoint("copy-stopped")
	// The copy is pointed at the gadget's Exit, so that, let go, it
	// ends whatever its memory holds; and its memory is made the
	// process's, but for the words its own stack was given (arm64):
	// they are put back as they were.
	if err := pointAt(child, g.Exit); err != nil {
		return abandon(fmt.Errorf("process %d: its copy %d: %w", s.Pid, child, err))
	}
	if mem != nil {
		if _, err := unix.PtracePokeData(child, uintptr(mem.addr), mem.old); err != nil {
			return abandon(fmt.Errorf("process %d: restore its copy %d's memory at %#x: %w", s.Pid, child, mem.addr, err))
		}
	}
	return child, nil
}

// pointAt sets the program counter of stopped thread tid.
func pointAt(tid int, pc uint64) error {
	r, err := readCallRegs(tid)
	if err != nil {
		return fmt.Errorf("registers: %w", err)
	}
	r.setPC(pc)
	if err := r.write(tid); err != nil {
		return fmt.Errorf("set registers: %w", err)
	}
	return nil
}

// thread returns the stopped thread tid.
func (s *Stopped) thread(tid int) *Thread {
	for i := range s.Threads {
		if s.Threads[i].TID == tid {
			return &s.Threads[i]
		}
	}
	return nil
}

// callThread picks the thread to make the calls (tid, or any if 0):
// parked in runtime.futex's wait (Gadget), stopped by gi's interrupt
// alone (no signal held, not in a group stop), its registers read, and
// not inside a system call whose restart the thread's state would not
// carry (callable).
func (s *Stopped) callThread(tid int, g Gadget) (*seized, error) {
	for i := range s.Threads {
		th := &s.Threads[i]
		if tid != 0 && th.TID != tid {
			continue
		}
		st := s.threadsState[th.TID]
		if st == nil || st.gone || !st.stopped || st.sig != 0 || th.RegsErr != nil {
			continue
		}
		if st.stopSig != syscall.SIGTRAP || st.event != unix.PTRACE_EVENT_STOP {
			continue
		}
		if !callable(th) || !g.parked(runtime.GOARCH, th.Regs.PC, futexOp(th)) {
			continue
		}
		return st, nil
	}
	return nil, fmt.Errorf("%w: process %d: no thread parked in runtime.futex to make a call", ErrFreezeRefused, s.Pid)
}

// scratch is memory a call writes before it runs, and puts back after:
// data at addr, old what was there.
type scratch struct {
	addr      uint64
	data, old []byte
}

// call makes the stopped thread st run system call nr(args) at pc, and
// puts it back as it was: in the same interrupt stop, its registers
// restored, the system call it was in restarting as it would have (the
// kernel decides that after the stop, from the restored registers), mem
// (if not nil) written before the call and restored after. A call that
// creates a process (clone) reports it, seized and stopped, as child. A
// signal that stops the thread meanwhile is suppressed: sent to the
// process, it is sent at once to another of its threads, in its stop;
// sent to the thread, it is sent again once the call is over. The
// thread's signal mask is left alone: a tracer that dies in the middle of
// a call leaves nothing of it changed but the call (Gadget).
func (s *Stopped) call(st *seized, pc, nr uint64, args [6]uint64, mem *scratch) (ret int64, child int, err error) {
	return s.callWith(st, pc, nr, args, mem, nil)
}

// callWith is call with regs, if set, changing more of the registers the
// call is made with.
func (s *Stopped) callWith(st *seized, pc, nr uint64, args [6]uint64, mem *scratch, regs func(*callRegs)) (ret int64, child int, err error) {
	tid := st.tid
	saved, err := readCallRegs(tid)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: thread %d registers: %w", s.Pid, tid, err)
	}
	opts := unix.PTRACE_O_TRACESYSGOOD
	if nr == sysClone {
		opts |= unix.PTRACE_O_TRACECLONE
	}
	if seccompFiltered(tid) {
		opts |= unix.PTRACE_O_SUSPEND_SECCOMP
	}
	if err := unix.PtraceSetOptions(tid, opts); err != nil {
		if opts&unix.PTRACE_O_SUSPEND_SECCOMP != 0 {
			return 0, 0, fmt.Errorf("%w: process %d has a seccomp filter gi may not suspend (needs CAP_SYS_ADMIN): %v", ErrFreezeRefused, s.Pid, err)
		}
		return 0, 0, fmt.Errorf("process %d: thread %d options: %w", s.Pid, tid, err)
	}
	defer unix.PtraceSetOptions(tid, 0)
	if mem != nil {
		mem.old = make([]byte, len(mem.data))
		if n, err := peek(tid, mem.addr, mem.old); err != nil || n != len(mem.old) {
			return 0, 0, fmt.Errorf("process %d: thread %d stack at %#x: %v", s.Pid, tid, mem.addr, err)
		}
		if _, err := unix.PtracePokeData(tid, uintptr(mem.addr), mem.data); err != nil {
			return 0, 0, fmt.Errorf("process %d: thread %d stack at %#x: %w", s.Pid, tid, mem.addr, err)
		}
	}
	var signals []pendingSignal
	restore := func() error {
		var first error
		if err := saved.write(tid); err != nil {
			first = fmt.Errorf("process %d: restore thread %d registers: %w", s.Pid, tid, err)
		}
		if mem != nil {
			if _, err := unix.PtracePokeData(tid, uintptr(mem.addr), mem.old); err != nil && first == nil {
				first = fmt.Errorf("process %d: restore thread %d stack: %w", s.Pid, tid, err)
			}
		}
		for _, sig := range signals {
			sig.send(s.Pid, tid)
		}
		return first
	}
	frame := callFrame(saved, pc, nr, args)
	if regs != nil {
		regs(frame)
	}
	if err := frame.write(tid); err != nil {
		restore()
		return 0, 0, fmt.Errorf("process %d: thread %d registers: %w", s.Pid, tid, err)
	}
	testPoint("frame")
	// A signal sent to the process that came to this thread (the only
	// one running) goes at once to another thread of the process, in
	// its stop: it is delivered there when the stop ends, even if gi
	// dies first. One sent to this thread waits for the call's end.
	requeue := func(p pendingSignal) bool {
		if p.thread {
			return false
		}
		for _, th := range s.Threads {
			if other := s.threadsState[th.TID]; th.TID != tid && other != nil && !other.gone && unix.Tgkill(s.Pid, th.TID, p.sig) == nil {
				return true
			}
		}
		return false
	}
	ret, child, signals, err = runCall(tid, requeue)
	if err != nil {
		// Back in a stop, if it can be, before its registers go back.
		if !st.gone {
			unix.PtraceInterrupt(tid)
			waitStop(tid, injectTimeout)
		}
		restore()
		return 0, child, fmt.Errorf("process %d: thread %d call: %w", s.Pid, tid, err)
	}
	testPoint("returned")
	if err := restore(); err != nil {
		return 0, child, err
	}
	return ret, child, nil
}

// runCall resumes tid into the prepared system call and brings it back
// to an interrupt stop once the call has returned: syscall stops (entry,
// exit) until an exit that is not a restart, then an interrupt taken on
// its way back to user code — where the kernel decides a restart after
// the stop, so restoring the registers there restores the thread whole.
// Signal-delivery stops on the way are suppressed, and handed to requeue
// or returned.
func runCall(tid int, requeue func(pendingSignal) bool) (ret int64, child int, signals []pendingSignal, err error) {
	deadline := time.Now().Add(injectTimeout)
	if err := unix.PtraceSyscall(tid, 0); err != nil {
		return 0, 0, nil, err
	}
	entered, returned := false, false
	for i := 0; ; i++ {
		if i >= injectStops {
			return ret, child, signals, fmt.Errorf("no end after %d stops", i)
		}
		ws, err := waitStop(tid, time.Until(deadline))
		if err != nil {
			return ret, child, signals, err
		}
		if !ws.Stopped() {
			return ret, child, signals, fmt.Errorf("thread ended: %v", ws)
		}
		sig, event := ws.StopSignal(), int(ws)>>16&0xff
		resume := unix.PtraceSyscall
		switch {
		case sig == syscall.SIGTRAP|0x80:
			if !entered {
				entered = true
				testPoint("entry")
				break
			}
			entered = false
			r, err := readCallRegs(tid)
			if err != nil {
				return ret, child, signals, err
			}
			ret = r.result()
			if ret >= -516 && ret <= -512 {
				break // restarted after a signal: entered again
			}
			returned = true
			testPoint("exit")
			if err := unix.PtraceInterrupt(tid); err != nil {
				return ret, child, signals, err
			}
			resume = unix.PtraceCont
		case event == unix.PTRACE_EVENT_CLONE:
			msg, err := unix.PtraceGetEventMsg(tid)
			if err != nil {
				return ret, child, signals, err
			}
			child = int(msg)
		case event == unix.PTRACE_EVENT_STOP:
			if returned && sig == syscall.SIGTRAP {
				return ret, child, signals, nil
			}
			if returned {
				resume = unix.PtraceCont
			}
		case event == 0 && sig != syscall.SIGTRAP:
			if p := takenSignal(tid, sig); !requeue(p) {
				signals = append(signals, p)
			}
			if returned {
				resume = unix.PtraceCont
			}
		default:
			if returned {
				resume = unix.PtraceCont
			}
		}
		if err := resume(tid, 0); err != nil {
			return ret, child, signals, err
		}
	}
}

// pendingSignal is a signal the thread took while making a call (one
// its blocked mask does not stop: the mask could not be set, or a call
// restored another), suppressed there and sent again once it is back.
type pendingSignal struct {
	sig    syscall.Signal
	thread bool // sent to the thread (tgkill), not to the process
}

// siTkill is SI_TKILL, the si_code of a signal sent by tgkill.
const siTkill = -6

// takenSignal describes the signal sig tid stopped to take.
func takenSignal(tid int, sig syscall.Signal) pendingSignal {
	var info [128]byte
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(&info[0])), 0, 0)
	code := int32(binary.LittleEndian.Uint32(info[8:]))
	return pendingSignal{sig: sig, thread: errno == 0 && code == siTkill}
}

// send sends the signal again, to the thread or the process, as it was.
func (p pendingSignal) send(pid, tid int) {
	if p.thread {
		unix.Tgkill(pid, tid, p.sig)
		return
	}
	unix.Kill(pid, p.sig)
}

// maskSwapped tells whether system call nr (its fifth argument arg4)
// is one of masked, calls that run with a signal mask of their own and
// put the thread's back as they return (the kernel's saved_sigmask),
// which a call made in their place would lose. epoll_pwait swaps only when given a mask (its fifth argument);
// Go's runtime gives none.
func maskSwapped(nr int64, arg4 uint64, epollPwait int, masked ...int) bool {
	if nr < 0 {
		return false
	}
	if nr == int64(epollPwait) {
		return arg4 != 0
	}
	for _, m := range masked {
		if nr == int64(m) {
			return true
		}
	}
	return false
}

// errNoStop says waitStop's bound passed with no stop or end reported.
var errNoStop = errors.New("no stop")

// waitStop waits, bounded, for tid's next stop or end: its status, or
// the error of wait4 (ECHILD: gone and collected), or errNoStop.
func waitStop(tid int, timeout time.Duration) (unix.WaitStatus, error) {
	deadline := time.Now().Add(timeout)
	nap := 2 * time.Microsecond
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return ws, err
		}
		if wpid == tid {
			return ws, nil
		}
		if time.Now().After(deadline) {
			return ws, fmt.Errorf("thread %d: %w within %v", tid, errNoStop, timeout)
		}
		time.Sleep(nap)
		if nap < time.Millisecond {
			nap *= 2
		}
	}
}

// seccompFiltered tells whether thread tid runs under a seccomp filter
// (unreadable counts as filtered: gi asks to suspend it, refused if it
// may not; a kernel without seccomp reports no field).
func seccompFiltered(tid int) bool {
	v, err := proc.StatusField(tid, 0, "Seccomp")
	return err != nil || v != "" && v != "0"
}

// namespacePid returns pid's id in its own PID namespace, pid itself
// where the kernel does not say.
func namespacePid(pid int) int {
	if ns, err := proc.NamespacePID(pid); err == nil {
		return ns
	}
	return pid
}

// peek reads len(p) bytes of tid's memory at addr.
func peek(tid int, addr uint64, p []byte) (int, error) {
	return unix.PtracePeekData(tid, uintptr(addr), p)
}

// endCopy kills a copy and collects its end (gi is its tracer). Its
// parent still holds its exit status: Release reaps it there.
func endCopy(pid int) {
	unix.Kill(pid, unix.SIGKILL)
	deadline := time.Now().Add(releaseWait)
	for {
		ws, err := waitStop(pid, time.Until(deadline))
		if err != nil || ws.Exited() || ws.Signaled() {
			return // collected, or given up
		}
	}
}

// Release ends the copy and reaps it in the process it was made of (a
// stop of a few milliseconds, the process made to call wait4 for it),
// so that no zombie is left behind. Calling it again does nothing.
func (f *Frozen) Release() error {
	if f == nil {
		return nil
	}
	f.once.Do(func() {
		f.release = f.t.do(func() error { endCopy(f.Pid); return nil })
		if errors.Is(f.release, ErrClosed) {
			// The tracer thread is gone: the copy, let go, ran its
			// exit gadget.
			f.release = nil
		} else if f.release == nil && proc.Alive(f.parent) {
			f.release = f.reap()
		}
		f.t.mu.Lock()
		delete(f.t.frozen, f)
		f.t.mu.Unlock()
	})
	return f.release
}

// ReleaseIn is Release for a caller that still holds the process the
// copy was made of stopped (s): the copy is reaped in that stop.
func (f *Frozen) ReleaseIn(s *Stopped) error {
	if f == nil {
		return nil
	}
	f.once.Do(func() {
		f.release = s.t.do(func() error {
			endCopy(f.Pid)
			if err := s.reapCopy(f.nsPid, f.gadget); err != nil {
				return fmt.Errorf("reap the copy %d: %w", f.Pid, err)
			}
			return nil
		})
		f.t.mu.Lock()
		delete(f.t.frozen, f)
		f.t.mu.Unlock()
	})
	return f.release
}

// reap stops the parent and has it collect the copy's exit status.
func (f *Frozen) reap() error {
	var err error
	for try := 0; try < reapTries; try++ {
		if try > 0 {
			time.Sleep(reapRetry)
		}
		// A stop that finds no thread parked in runtime.futex to make
		// the call (a busy process, at that instant) is made again.
		if err = f.reapOnce(); !errors.Is(err, ErrFreezeRefused) {
			return err
		}
	}
	return err
}

// Bounds of Release's stops to reap its copy: how many, how far apart.
const (
	reapTries = 20
	reapRetry = 10 * time.Millisecond
)

// reapOnce is reap in one stop.
func (f *Frozen) reapOnce() error {
	s, err := f.t.Stop(f.parent)
	if err != nil {
		if errors.Is(err, proc.ErrProcessExited) || errors.Is(err, proc.ErrNoSuchProcess) {
			return nil // its children go to init, which reaps them
		}
		return fmt.Errorf("reap the copy %d of process %d: %w", f.Pid, f.parent, err)
	}
	defer func() {
		s.Resume()
		f.ReapPause += s.Pause()
	}()
	return s.t.do(func() error {
		if err := s.reapCopy(f.nsPid, f.gadget); err != nil {
			return fmt.Errorf("reap the copy %d: %w", f.Pid, err)
		}
		return nil
	})
}

// reapCopy has the stopped process collect its ended copy nsPid (as its
// PID namespace numbers it) with wait4. It runs on the tracer thread.
func (s *Stopped) reapCopy(nsPid int, g Gadget) error {
	st, err := s.callThread(0, g)
	if err != nil {
		return err
	}
	ret, _, err := s.call(st, g.Syscall, sysWait4, [6]uint64{uint64(nsPid), 0, unix.WNOHANG | unix.WALL}, nil)
	if err != nil {
		return err
	}
	if ret != int64(nsPid) && ret != -int64(unix.ECHILD) {
		return fmt.Errorf("process %d: wait4 for %d returned %d", s.Pid, nsPid, ret)
	}
	return nil
}

// reapLeftCopies reaps, with thread st, the copies of the stopped
// process that a gi killed before it could reap them left: its children
// that ended (zombies) and were made to send no signal when they did
// (exit_signal 0), as gi's copies are; a Go program makes none (os/exec's
// children signal SIGCHLD). It runs on the tracer thread; what it cannot
// reap stays for the next.
func (s *Stopped) reapLeftCopies(st *seized, g Gadget) (reaped int) {
	for _, c := range proc.SilentChildren(s.Pid, true) {
		ret, _, err := s.call(st, g.Syscall, sysWait4, [6]uint64{uint64(namespacePid(c)), 0, unix.WNOHANG | unix.WALL}, nil)
		if err == nil && ret > 0 {
			reaped++
		}
	}
	return reaped
}

// FreezeBlocked tells, before any stop, what would make Freeze refuse
// process pid for certain: an architecture gi has no gadget for, or a
// seccomp filter on its threads and no CAP_SYS_ADMIN for gi to suspend
// it. nil does not promise Freeze succeeds (the kernel, the process's
// limits may still refuse).
func FreezeBlocked(pid int) error {
	if _, ok := gadgetCode[runtime.GOARCH]; !ok {
		return fmt.Errorf("%w: no exit gadget known for %s", ErrFreezeRefused, runtime.GOARCH)
	}
	if has, _ := proc.HasCapabilities(unix.CAP_SYS_ADMIN); seccompFiltered(pid) && !has {
		return fmt.Errorf("%w: process %d has a seccomp filter, and gi no CAP_SYS_ADMIN to suspend it", ErrFreezeRefused, pid)
	}
	return nil
}
