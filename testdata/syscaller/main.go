// Command syscaller keeps threads inside system calls whose results it
// checks — blocking pipe reads of numbered records, raw nanosleeps, timed
// sleeps, child processes it runs and waits for — and a counter it
// increments without pause. gi stops it and makes one of its threads call
// clone and wait4 (ptrace.Freeze); none of that may change what the
// program sees.
//
// It prints "READY" once everything runs. On stdin, "check" answers
// "DONE bad=<n> reads=<n> sleeps=<n> children=<n> interrupted=<n>": bad
// counts results
// that were wrong (a short read, an out-of-order record, an error from a
// call that cannot fail), the others what was checked. Each bad result is
// also printed as "BAD <what>".
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var denyCopies = flag.Bool("seccomp", false, "run under a seccomp filter that refuses clone(CLONE_FILES), the call gi makes a thread of it make")

// sockFilter and sockFprog are the kernel's struct sock_filter and
// sock_fprog.
type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	len    uint16
	filter *sockFilter
}

// installFilter puts every thread under a seccomp filter that makes
// clone(CLONE_FILES) fail with EPERM and allows everything else: gi
// freezes the process only by suspending it.
func installFilter() error {
	const (
		ldAbsW  = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jeqK    = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		retK    = 0x06 // BPF_RET|BPF_K
		allow   = 0x7fff0000
		deny    = 0x00050000 | uint32(syscall.EPERM)
		tsync   = 1
		setMode = 1 // SECCOMP_SET_MODE_FILTER
	)
	prog := []sockFilter{
		{ldAbsW, 0, 0, 0},                         // nr
		{jeqK, 0, 3, uint32(syscall.SYS_CLONE)},   // clone?
		{ldAbsW, 0, 0, 16},                        // args[0], low half
		{jeqK, 0, 1, uint32(syscall.CLONE_FILES)}, // exactly CLONE_FILES?
		{retK, 0, 0, deny},
		{retK, 0, 0, allow},
	}
	fp := sockFprog{len: uint16(len(prog)), filter: &prog[0]}
	const prSetNoNewPrivs = 38
	sysSeccomp := uintptr(317) // x86_64
	if runtime.GOARCH == "arm64" {
		sysSeccomp = 277
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); errno != 0 {
		return errno
	}
	if _, _, errno := syscall.RawSyscall(sysSeccomp, setMode, tsync, uintptr(unsafe.Pointer(&fp))); errno != 0 {
		return errno
	}
	return nil
}

// counter is incremented without pause; a test reads it from the copy.
var counter atomic.Uint64

var bad, reads, sleeps, children, interrupted atomic.Int64

func fail(format string, args ...any) {
	bad.Add(1)
	fmt.Printf("BAD "+format+"\n", args...)
}

// pipeReader reads numbered records with blocking read(2) on a thread of
// its own: each read must return one whole record, the next number.
func pipeReader(fd int) {
	runtime.LockOSThread()
	var want uint64
	buf := make([]byte, 8)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil || n != 8 {
			fail("read: n=%d err=%v", n, err)
			continue
		}
		if got := binary.LittleEndian.Uint64(buf); got != want {
			fail("read: record %d, want %d", got, want)
			want = got
		}
		want++
		reads.Add(1)
	}
}

func pipeWriter(fd int) {
	buf := make([]byte, 8)
	for i := uint64(0); ; i++ {
		binary.LittleEndian.PutUint64(buf, i)
		if n, err := syscall.Write(fd, buf); err != nil || n != 8 {
			fail("write: n=%d err=%v", n, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sleeper sleeps with raw nanosleep(2) on a thread of its own: the kernel
// restarts an interrupted sleep, which must not end early, nor fail other
// than with EINTR.
func sleeper() {
	runtime.LockOSThread()
	for {
		ts := syscall.Timespec{Nsec: 20e6}
		start := time.Now()
		err := syscall.Nanosleep(&ts, nil)
		if err == syscall.EINTR {
			// A ptrace stop of the thread, gi's plain one included,
			// ends its sleep this way about once in a hundred: the
			// call's contract, which the program must handle.
			interrupted.Add(1)
			continue
		}
		if err != nil {
			fail("nanosleep: %v", err)
		} else if d := time.Since(start); d < 20*time.Millisecond {
			fail("nanosleep ended after %v", d)
		}
		sleeps.Add(1)
	}
}

// timedSleeper sleeps through the runtime's timers (futex waits with a
// timeout on idle threads).
func timedSleeper() {
	for {
		start := time.Now()
		time.Sleep(7 * time.Millisecond)
		if d := time.Since(start); d < 7*time.Millisecond {
			fail("time.Sleep ended after %v", d)
		}
		sleeps.Add(1)
	}
}

// parent runs a child process and waits for it: the wait4 gi makes the
// process call must never take a child of its own.
func parent() {
	for {
		if err := exec.Command(self, "-child").Run(); err != nil {
			fail("run a child: %v", err)
		}
		children.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// self is this program's executable: its children run it with -child,
// and exit at once.
var self string

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		return
	}
	flag.Parse()
	if *denyCopies {
		if err := installFilter(); err != nil {
			fmt.Println("seccomp:", err)
			os.Exit(1)
		}
	}
	var err error
	if self, err = os.Executable(); err != nil {
		fmt.Println("executable:", err)
		os.Exit(1)
	}
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		fmt.Println("pipe:", err)
		os.Exit(1)
	}
	go pipeReader(p[0])
	go pipeWriter(p[1])
	go sleeper()
	for i := 0; i < 3; i++ {
		go timedSleeper()
	}
	go parent()
	go func() {
		for {
			counter.Add(1)
		}
	}()
	for reads.Load() == 0 || sleeps.Load() == 0 || children.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "check":
			fmt.Printf("DONE bad=%d reads=%d sleeps=%d children=%d interrupted=%d\n", bad.Load(), reads.Load(), sleeps.Load(), children.Load(), interrupted.Load())
		default:
			fmt.Println("DONE error unknown command")
		}
	}
}
