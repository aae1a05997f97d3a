// Command whyphases is the ground truth of gi trace --why: its function
// main.phases spends known phases, each measured by the program itself,
// in this order:
//
//	cpu    burning CPU for -cpu, on a thread locked to it: cpu= is that
//	       thread's CPU time over the burn, and cpuwall= the burn's wall
//	       clock. The goroutine's time on a thread in Go's view lies
//	       between the two: the first leaves out the kernel's
//	       preemptions of the thread too, the second has what Go's own
//	       preemptions left runnable
//	mutex  blocked in sync.Mutex.Lock on main.cacheMu, which goroutine
//	       "holder" (main.holdLock) holds, until it unlocks it -mutex
//	       after phases told it it was about to lock
//	sleep  in time.Sleep(-sleep)
//	chan   blocked receiving from a channel until goroutine "sender"
//	       (main.sendLater) sends, -chan after it was asked
//	io     reading a TCP socket whose peer answers -io after the request
//	sys    in a blocking read(2) of a pipe that goroutine "writer"
//	       (main.writeLater) writes -sys after it was asked
//
// It prints READY, then reads commands from stdin: "run" calls
// main.phases once and answers "DONE goid=<its goroutine> cpu=<ns>
// cpuwall=<ns> mutex=<ns> holder=<goid> sleep=<ns> chan=<ns> sender=<goid> io=<ns>
// peer=<the socket's remote address> sys=<ns> total=<ns>", each phase's
// duration as measured around it.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

var (
	cacheMu sync.Mutex
	sink    uint64
)

// goid returns the calling goroutine's id, from its stack's header.
func goid() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := bytes.Fields(buf[:n])
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// result is one run's own measurements.
type result struct {
	goid, holder, sender                             uint64
	cpu, cpuWall, mutex, sleep, ch, io, sys, elapsed time.Duration
}

// threadCPU returns the calling thread's CPU time. RawSyscall: the
// runtime does not see it, so it adds no syscall to the phase.
func threadCPU() time.Duration {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return time.Duration(ts.Nano())
}

//go:noinline
func burn(d time.Duration) {
	start := time.Now()
	x := sink
	for time.Since(start) < d {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

// holdLock locks cacheMu, says so, and unlocks it hold after phases says
// it is about to lock it: phases waits about hold on a machine however
// busy (a hold counted from the lock would end before a burn slowed by
// other load is over).
//
//go:noinline
func holdLock(hold time.Duration, locked chan<- uint64, locking <-chan struct{}) {
	cacheMu.Lock()
	locked <- goid()
	<-locking
	time.Sleep(hold)
	cacheMu.Unlock()
}

// sendLater waits to be asked, then sends on ch after delay.
//
//go:noinline
func sendLater(ask <-chan struct{}, ch chan<- int, delay time.Duration, id chan<- uint64) {
	id <- goid()
	<-ask
	time.Sleep(delay)
	ch <- 1
}

// writeLater writes a byte to fd -sys after each request.
//
//go:noinline
func writeLater(ask <-chan struct{}, fd int, delay time.Duration) {
	for range ask {
		time.Sleep(delay)
		syscall.Write(fd, []byte{1})
	}
}

// peer answers each byte read on c with one byte, after delay.
func peer(c net.Conn, delay time.Duration) {
	var b [1]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return
		}
		time.Sleep(delay)
		if _, err := c.Write(b[:]); err != nil {
			return
		}
	}
}

//go:noinline
func phases(r *result, cpu, sleep time.Duration, locking chan<- struct{}, ask chan<- struct{}, ch <-chan int, conn net.Conn, write chan<- struct{}, pipe int) {
	begin := time.Now()
	r.goid = goid()

	runtime.LockOSThread()
	t, c := time.Now(), threadCPU()
	burn(cpu)
	r.cpu, r.cpuWall = threadCPU()-c, time.Since(t)
	runtime.UnlockOSThread()

	locking <- struct{}{}
	t = time.Now()
	cacheMu.Lock()
	r.mutex = time.Since(t)
	cacheMu.Unlock()

	t = time.Now()
	time.Sleep(sleep)
	r.sleep = time.Since(t)

	t = time.Now()
	ask <- struct{}{}
	<-ch
	r.ch = time.Since(t)

	t = time.Now()
	var b [1]byte
	conn.Write(b[:])
	conn.Read(b[:])
	r.io = time.Since(t)

	t = time.Now()
	write <- struct{}{}
	syscall.Read(pipe, b[:])
	r.sys = time.Since(t)

	r.elapsed = time.Since(begin)
}

func main() {
	cpu := flag.Duration("cpu", 30*time.Millisecond, "CPU phase")
	mutex := flag.Duration("mutex", 40*time.Millisecond, "mutex phase (the holder keeps the lock -cpu plus this)")
	sleep := flag.Duration("sleep", 20*time.Millisecond, "sleep phase")
	chanDelay := flag.Duration("chan", 30*time.Millisecond, "channel phase")
	ioDelay := flag.Duration("io", 25*time.Millisecond, "socket phase")
	sysDelay := flag.Duration("sys", 15*time.Millisecond, "system call phase")
	flag.Parse()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go peer(c, *ioDelay)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	// A pipe the runtime does not know: its reads block in the kernel.
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		fmt.Println("pipe:", err)
		os.Exit(1)
	}
	write := make(chan struct{}, 1)
	go writeLater(write, fds[1], *sysDelay)
	fmt.Println("READY")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "run" {
			fmt.Println("DONE error unknown command")
			continue
		}
		var r result
		locked, locking := make(chan uint64), make(chan struct{})
		go holdLock(*mutex, locked, locking)
		r.holder = <-locked
		ask, ch, ids := make(chan struct{}, 1), make(chan int), make(chan uint64)
		go sendLater(ask, ch, *chanDelay, ids)
		r.sender = <-ids
		phases(&r, *cpu, *sleep, locking, ask, ch, conn, write, fds[0])
		fmt.Printf("DONE goid=%d cpu=%d cpuwall=%d mutex=%d holder=%d sleep=%d chan=%d sender=%d io=%d peer=%s sys=%d total=%d\n",
			r.goid, r.cpu, r.cpuWall, r.mutex, r.holder, r.sleep, r.ch, r.sender, r.io, ln.Addr(), r.sys, r.elapsed)
	}
}
