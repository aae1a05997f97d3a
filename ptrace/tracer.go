package ptrace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gi-debug/gi/proc"
)

// Limits that keep Stop bounded whatever the target does.
const (
	maxThreads      = 1 << 16
	maxListRounds   = 1000
	stopTimeout     = 5 * time.Second
	resumeAllBudget = 2 * time.Second
)

// Tracer owns the OS thread every ptrace request is made from.
// Its methods may be called from any goroutine.
type Tracer struct {
	// WhileStopped, if set, is called as a stop begins; the function it
	// returns is called when the process is resumed (or the stop failed).
	// A command uses it to keep its own garbage collector from competing
	// with the copy for the CPUs while a target waits.
	WhileStopped func() (done func())

	reqs chan func()
	quit chan struct{}
	once sync.Once

	mu      sync.Mutex
	stopped map[*Stopped]struct{}
	frozen  map[*Frozen]struct{}
}

// NewTracer starts the thread-locked goroutine that serves ptrace requests.
func NewTracer() *Tracer {
	t := &Tracer{
		reqs:    make(chan func()),
		quit:    make(chan struct{}),
		stopped: map[*Stopped]struct{}{},
	}
	go t.serve()
	return t
}

func (t *Tracer) serve() {
	// Never unlocked: when this goroutine returns its thread exits with it,
	// and the kernel detaches anything still attached to that thread.
	runtime.LockOSThread()
	for {
		select {
		case f := <-t.reqs:
			f()
		case <-t.quit:
			return
		}
	}
}

// do runs f on the tracer thread and waits for it. A panic in f is returned
// as an error instead of killing the thread that holds the tracees.
func (t *Tracer) do(f func() error) (err error) {
	done := make(chan struct{})
	wrapped := func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("ptrace: panic: %v", r)
			}
		}()
		err = f()
	}
	select {
	case t.reqs <- wrapped:
	case <-t.quit:
		return ErrClosed
	}
	<-done
	return err
}

// Close resumes every process still stopped and ends the tracer thread.
func (t *Tracer) Close() error {
	t.ResumeAll()
	t.once.Do(func() { close(t.quit) })
	return nil
}

// ResumeAll resumes every process this tracer holds stopped and ends
// every Frozen copy it made. It is meant for
// signal handlers and panic paths; it gives up after a short budget (the
// kernel resumes the tracees anyway when gi exits).
func (t *Tracer) ResumeAll() {
	t.mu.Lock()
	list := make([]*Stopped, 0, len(t.stopped))
	for s := range t.stopped {
		list = append(list, s)
	}
	copies := make([]*Frozen, 0, len(t.frozen))
	for f := range t.frozen {
		copies = append(copies, f)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range list {
			s.Resume()
		}
		for _, f := range copies {
			f.Release()
		}
	}()
	select {
	case <-done:
	case <-time.After(resumeAllBudget):
	}
}

// Regs are the registers of a stopped thread that goroutine inspection needs.
type Regs struct {
	PC, SP, BP uint64
	// LR is the link register (arm64 x30); 0 on amd64.
	LR uint64
	// FSBase is the thread pointer (amd64 fs base, arm64 TPIDR_EL0).
	FSBase uint64
	// G is the register that holds the current g in Go code (r14, x28).
	G uint64
	// Syscall is the number of the system call the thread is in (amd64
	// orig_rax; arm64 its NT_ARM_SYSTEM_CALL register set), -1 when it is
	// in none or gi cannot tell; Arg0 is the call's first argument (a
	// descriptor for read, write, accept, ...: amd64 rdi; arm64 orig_x0,
	// in no register set, from /proc/<tid>/syscall).
	Syscall int64
	Arg0    uint64
	// All is every general register as a core file's NT_PRSTATUS holds
	// them (its pr_reg): amd64's user_regs_struct (27 words), arm64's
	// user_pt_regs (34: x0–x30, sp, pc, pstate).
	All [34]uint64
}

// Thread is one stopped thread of a process.
type Thread struct {
	TID  int
	Regs Regs
	// RegsErr is set when the registers could not be read.
	RegsErr error
	// Vector is the thread's vector and floating-point register set, as
	// the kernel's regset VectorNote gives it (amd64: NT_X86_XSTATE, the
	// XSAVE area, or NT_PRFPREG, the FXSAVE area; arm64: NT_PRFPREG,
	// user_fpsimd_state), read by Stopped.ReadVector; VectorErr says why
	// it could not be.
	Vector     []byte
	VectorNote uint32
	VectorErr  error

	sig int // signal to re-inject on detach
}

// Register sets of PTRACE_GETREGSET, and the notes of a core that hold
// them.
const (
	NotePRFPREG   = 2     // NT_PRFPREG
	NoteX86XState = 0x202 // NT_X86_XSTATE
	NoteARMSVE    = 0x405 // NT_ARM_SVE: gdb writes arm64's vector registers there alone where the CPU has SVE
)

// ReadVector reads the vector registers of the stopped threads not in a
// system call (Thread.Vector): what the general registers do not hold of
// a thread stopped anywhere, in the middle of a copy through vector
// registers (memmove) say. A thread in a system call is left without
// (the kernel saved its user state on entry; gi's walk reads only the
// threads at work). Read after the process resumed, or with the tracer
// gone, every thread gets the error.
func (s *Stopped) ReadVector() {
	if s.resumed {
		s.vectorFailed(errors.New("the process was resumed"))
		return
	}
	err := s.t.do(func() error {
		scratch := make([]byte, 16<<10)
		for i := range s.Threads {
			th := &s.Threads[i]
			if th.RegsErr == nil && th.Regs.Syscall >= 0 {
				continue
			}
			th.Vector, th.VectorNote, th.VectorErr = getVector(th.TID, scratch)
		}
		return nil
	})
	if err != nil {
		s.vectorFailed(err)
	}
}

// vectorFailed sets err as every thread's VectorErr.
func (s *Stopped) vectorFailed(err error) {
	for i := range s.Threads {
		s.Threads[i].Vector, s.Threads[i].VectorErr = nil, fmt.Errorf("thread %d: vector registers: %w", s.Threads[i].TID, err)
	}
}

// getRegSet reads register set note of thread tid into buf, and returns
// a copy of the part the kernel filled.
func getRegSet(tid int, note uint32, buf []byte) ([]byte, error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(tid), uintptr(note), uintptr(unsafe.Pointer(&iov)), 0, 0); errno != 0 {
		return nil, fmt.Errorf("thread %d: register set %#x: %w", tid, note, errno)
	}
	return append([]byte(nil), buf[:iov.Len]...), nil
}

// Stopped is a process with all its threads stopped by a Tracer.
type Stopped struct {
	Pid     int
	Threads []Thread

	t       *Tracer
	begin   time.Time
	pause   time.Duration
	resumed bool
	resErr  error

	// Marks end the steps of the stop, in order: "begin" (the stop
	// begins: the pause is counted from here), "seize" (threads
	// listed, seized and interrupted, until no new one appears), "wait"
	// (until each reports its stop), "regs" (their registers read).
	Marks []Mark

	threadsState map[int]*seized
	onResume     func() // from Tracer.WhileStopped
	leftReaped   int    // copies earlier gis left, reaped (Frozen.LeftReaped)
	finishOnce   sync.Once
}

// Pause returns how long the process was stopped: from the first interrupt
// to the last thread resumed. Zero before Resume.
func (s *Stopped) Pause() time.Duration { return s.pause }

// Stop stops every thread of process pid and reads their registers.
// The caller must call Resume on the result, on every path.
func (t *Tracer) Stop(pid int) (*Stopped, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("process %d: %w", pid, proc.ErrNoSuchProcess)
	}
	s := &Stopped{Pid: pid, t: t}
	if t.WhileStopped != nil {
		s.onResume = t.WhileStopped()
	}
	err := t.do(func() error { return s.stop() })
	if err != nil {
		// Whatever got seized must be released before reporting.
		t.do(func() error { s.detachAll(); return nil })
		s.finish()
		return nil, err
	}
	t.mu.Lock()
	t.stopped[s] = struct{}{}
	t.mu.Unlock()
	return s, nil
}

// Resume detaches from every thread, letting the process run. Calling it
// again does nothing and returns the first result.
func (s *Stopped) Resume() error {
	if s == nil {
		return nil
	}
	err := s.t.do(func() error {
		if !s.resumed {
			s.resErr = s.detachAll()
		}
		return s.resErr
	})
	s.t.mu.Lock()
	delete(s.t.stopped, s)
	s.t.mu.Unlock()
	s.finish()
	if errors.Is(err, ErrClosed) {
		// The tracer thread is gone, and with it every attachment.
		return nil
	}
	return err
}

// finish runs the Tracer's WhileStopped completion, once (Resume may run
// twice at once: from its caller and from ResumeAll on a signal).
func (s *Stopped) finish() {
	s.finishOnce.Do(func() {
		if s.onResume != nil {
			s.onResume()
		}
	})
}

// seized tracks one thread through the stop protocol.
type seized struct {
	tid     int
	stopped bool
	gone    bool
	sig     int
	// stopSig and event are what the stop reported: a pure interrupt
	// is SIGTRAP with PTRACE_EVENT_STOP.
	stopSig syscall.Signal
	event   int
}

// stop runs on the tracer thread.
func (s *Stopped) stop() error {
	pid := s.Pid
	defer boost()()
	s.Marks = append(s.Marks, Mark{"begin", SampleUsage()})
	s.begin = s.Marks[0].Usage.At
	s.threadsState = map[int]*seized{}
	var order []int
	for round := 0; ; round++ {
		if round >= maxListRounds {
			return fmt.Errorf("process %d: thread list never settled after %d rounds", pid, round)
		}
		tids, err := proc.Threads(pid)
		if err != nil {
			if len(s.threadsState) == 0 {
				return err
			}
			return fmt.Errorf("process %d: %w", pid, proc.ErrProcessExited)
		}
		fresh := 0
		for _, tid := range tids {
			if _, ok := s.threadsState[tid]; ok {
				continue
			}
			if len(s.threadsState) >= maxThreads {
				return fmt.Errorf("process %d: more than %d threads", pid, maxThreads)
			}
			fresh++
			st := &seized{tid: tid}
			if err := unix.PtraceSeize(tid); err != nil {
				switch {
				case errors.Is(err, unix.ESRCH):
					st.gone = true
					s.threadsState[tid] = st
					if tid == pid {
						return fmt.Errorf("process %d: %w", pid, proc.ErrNoSuchProcess)
					}
					continue
				case errors.Is(err, unix.EPERM):
					return seizeRefused(pid, tid)
				default:
					return fmt.Errorf("process %d: seize thread %d: %w", pid, tid, err)
				}
			}
			s.threadsState[tid] = st
			order = append(order, tid)
			if err := unix.PtraceInterrupt(tid); err != nil {
				if errors.Is(err, unix.ESRCH) {
					st.gone = true
					continue
				}
				return fmt.Errorf("process %d: interrupt thread %d: %w", pid, tid, err)
			}
		}
		if fresh == 0 {
			break
		}
	}
	s.Marks = append(s.Marks, Mark{"seize", SampleUsage()})
	if err := s.waitStops(order); err != nil {
		return err
	}
	s.Marks = append(s.Marks, Mark{"wait", SampleUsage()})
	for _, tid := range order {
		st := s.threadsState[tid]
		if st.gone {
			continue
		}
		th := Thread{TID: tid, sig: st.sig}
		th.Regs, th.RegsErr = getRegs(tid)
		s.Threads = append(s.Threads, th)
	}
	s.Marks = append(s.Marks, Mark{"regs", SampleUsage()})
	if len(s.Threads) == 0 {
		return fmt.Errorf("process %d: %w", pid, proc.ErrProcessExited)
	}
	return nil
}

// waitStops waits until every seized thread reports a stop or exits, polling
// so that a thread that never stops cannot hang gi.
func (s *Stopped) waitStops(order []int) error {
	deadline := time.Now().Add(stopTimeout)
	pending := 0
	for _, tid := range order {
		if !s.threadsState[tid].gone {
			pending++
		}
	}
	nap := 5 * time.Microsecond
	for pending > 0 {
		progress := false
		for _, tid := range order {
			st := s.threadsState[tid]
			if st.gone || st.stopped {
				continue
			}
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
			if err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				// ECHILD: the thread is gone and already reaped.
				st.gone = true
				pending--
				progress = true
				continue
			}
			if wpid == 0 {
				continue
			}
			progress = true
			switch {
			case ws.Exited() || ws.Signaled():
				st.gone = true
				pending--
			case ws.Stopped():
				st.stopped = true
				pending--
				sig := ws.StopSignal()
				event := int(ws) >> 16 & 0xff
				st.stopSig, st.event = sig, event
				// A signal-delivery-stop (not our interrupt, not a group
				// stop) holds a signal that must be delivered on detach.
				if event == 0 && sig != syscall.SIGSTOP && sig != syscall.SIGTRAP {
					st.sig = int(sig)
				}
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			var stuck []string
			for _, tid := range order {
				if st := s.threadsState[tid]; !st.gone && !st.stopped {
					stuck = append(stuck, strconv.Itoa(tid))
				}
			}
			return fmt.Errorf("process %d: threads %v did not stop within %v (uninterruptible sleep?)", s.Pid, stuck, stopTimeout)
		}
		if progress {
			nap = 5 * time.Microsecond
			continue
		}
		time.Sleep(nap)
		if nap < time.Millisecond {
			nap *= 2
		}
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(s.Pid)); err != nil {
		return fmt.Errorf("process %d: %w", s.Pid, proc.ErrProcessExited)
	}
	return nil
}

// detachAll runs on the tracer thread. Threads that were seized but have not
// stopped yet are waited for (bounded), since PTRACE_DETACH needs a stopped
// tracee.
func (s *Stopped) detachAll() error {
	if s.resumed {
		return s.resErr
	}
	defer boost()()
	var first error
	for tid, st := range s.threadsState {
		if st.gone {
			continue
		}
		if !st.stopped {
			deadline := time.Now().Add(time.Second)
			for {
				ws, err := waitStop(tid, time.Until(deadline))
				if errors.Is(err, errNoStop) {
					break
				}
				if err != nil || ws.Exited() || ws.Signaled() {
					st.gone = true
					break
				}
				if ws.Stopped() {
					st.stopped = true
					if ev := int(ws) >> 16 & 0xff; ev == 0 && ws.StopSignal() != syscall.SIGSTOP && ws.StopSignal() != syscall.SIGTRAP {
						st.sig = int(ws.StopSignal())
					}
					break
				}
			}
			if st.gone || !st.stopped {
				// Left to the kernel: it detaches when the tracer thread exits.
				continue
			}
		}
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(tid), 0, uintptr(st.sig), 0, 0)
		if errno != 0 && errno != unix.ESRCH && first == nil {
			first = fmt.Errorf("detach thread %d: %w", tid, errno)
		}
		st.gone = true
	}
	s.resumed = true
	if !s.begin.IsZero() {
		s.pause = time.Since(s.begin)
	}
	return first
}
