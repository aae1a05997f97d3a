// Command vecspin keeps a known value in a vector register of a running
// thread, and nowhere else in its registers: the target of the test of
// reading a stopped thread's vector registers (ptrace.Stopped.ReadVector).
// A goroutine locked to its thread loads the value into X1 (amd64) or
// V1 (arm64), clears the general register it came in, and spins. The
// program prints "TID <thread>" and "VALUE <hex>", then READY once the
// value is in the register. With -chan the value is the address of a
// channel a goroutine waits on in main.waiter, which nothing else holds:
// not leaked, since the spinning thread could send on it, whatever the
// waiter's own stack holds.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// spin loads *v into a vector register, clears *v, stores 1 at
// *loaded, and spins until *stop is not 0.
func spin(v *uint64, loaded, stop *uint32)

// slot is the value until spin takes it.
var slot uint64

// waiter receives from c.
//
//go:noinline
func waiter(c chan int) { <-c }

// startWaiter starts main.waiter on a new channel and puts its address
// in slot, once the waiter is parked.
//
//go:noinline
func startWaiter() {
	c := make(chan int)
	go waiter(c)
	for {
		buf := make([]byte, 1<<16)
		if n := runtime.Stack(buf, true); bytesContains(buf[:n], "[chan receive]:\nmain.waiter(") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	slot = uint64(*(*uintptr)(unsafe.Pointer(&c)))
}

func bytesContains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

func main() {
	// spin cannot be preempted: another P for the rest of the program,
	// and no collection, whose stop of the world would wait for it.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	debug.SetGCPercent(-1)
	chanMode := flag.Bool("chan", false, "hold only a waited-on channel's address in the vector register")
	flag.Parse()
	v := uint64(0x5ec7)<<48 | uint64(os.Getpid())
	if *chanMode {
		startWaiter()
		v = slot
	} else {
		slot = v
	}
	var loaded, stop uint32
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		tid <- syscall.Gettid()
		spin(&slot, &loaded, &stop)
	}()
	fmt.Println("TID", <-tid)
	for atomic.LoadUint32(&loaded) == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("VALUE %#x\n", v)
	fmt.Println("READY")
	select {}
}
