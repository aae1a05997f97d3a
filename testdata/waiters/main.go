// Command waiters blocks goroutines on every kind of object a goroutine can
// wait on and says, for each, what it waits on as the program itself sees
// it: the object's address as fmt's %p prints it, its name, and what is
// known about it. That is the ground truth of gi ps's "waiting on".
//
// Lines printed on stdout before READY, one per blocked goroutine:
//
//	WAIT goid=N kind=K addr=0x… [name=main.slowMu] [dir=recv|send] [fd=N] [more=…]
//
// A descriptor's line has addr=fd (netpoller) or addr=syscall (blocked in
// read(2)) and more=kind,local,remote.
//
// A select prints one WAIT line per case. READY comes once every goroutine
// that announced itself is blocked (checked in the runtime's own dump).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

var fan = flag.Int("fan", 100, "goroutines receiving from one channel")

type job struct {
	id   int
	name string
}

var (
	slowMu sync.Mutex
	rw     sync.RWMutex // held by a writer: readers wait
	rwR    sync.RWMutex // held by a reader: a writer waits
	wg     sync.WaitGroup
	condMu sync.Mutex
	cond   = sync.NewCond(&condMu)
	// valueCond is a Cond held by value in a global: gi names it.
	valueMu   sync.Mutex
	valueCond = sync.Cond{L: &valueMu}

	printMu sync.Mutex
	waiting = map[uint64]string{} // goid → wait reason expected
)

func goid() uint64 {
	var b [64]byte
	s := strings.TrimPrefix(string(b[:runtime.Stack(b[:], false)]), "goroutine ")
	n, _ := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	return n
}

// announce prints a WAIT line for the calling goroutine and records the
// wait reason the runtime should show once it blocks ("a|b": either).
func announce(reason string, fields ...string) {
	id := goid()
	printMu.Lock()
	defer printMu.Unlock()
	waiting[id] = reason
	for _, f := range fields {
		fmt.Printf("WAIT goid=%d %s\n", id, f)
	}
}

//go:noinline
func recvJob(jobs chan job) {
	announce("chan receive", fmt.Sprintf("kind=chan addr=%p dir=recv", jobs))
	<-jobs
}

//go:noinline
func sendOut(out chan int) {
	announce("chan send", fmt.Sprintf("kind=chan addr=%p dir=send", out))
	out <- 1
}

//go:noinline
func selectBoth(a chan string, b chan int) {
	announce("select", fmt.Sprintf("kind=chan addr=%p dir=recv", a), fmt.Sprintf("kind=chan addr=%p dir=send", b))
	select {
	case <-a:
	case b <- 1:
	}
}

//go:noinline
func fanIn(c chan struct{}) {
	announce("chan receive", fmt.Sprintf("kind=chan addr=%p dir=recv", c))
	<-c
}

//go:noinline
func nilRecv() {
	var c chan int
	announce("chan receive (nil chan)", fmt.Sprintf("kind=chan addr=%p dir=recv", c))
	<-c
}

//go:noinline
func lockSlow() {
	announce("sync.Mutex.Lock", fmt.Sprintf("kind=mutex addr=%p name=main.slowMu", &slowMu))
	slowMu.Lock()
}

//go:noinline
func lockHeap(m *sync.Mutex) {
	announce("sync.Mutex.Lock", fmt.Sprintf("kind=mutex addr=%p", m))
	m.Lock()
}

//go:noinline
func readLock() {
	announce("sync.RWMutex.RLock", fmt.Sprintf("kind=rwmutex addr=%p name=main.rw dir=read", &rw))
	rw.RLock()
}

// edgeMutex returns a sync.RWMutex at the first byte of a mapping whose
// page before is not mapped: two pages are mapped at a fixed low address,
// far below where the kernel and the runtime map anything (none replaced:
// MAP_FIXED_NOREPLACE), and the first is unmapped.
func edgeMutex() (*sync.RWMutex, error) {
	const mapFixedNoReplace = 0x100000
	page := uintptr(os.Getpagesize())
	for _, at := range []uintptr{0x20000000, 0x28000000, 0x30000000, 0x38000000} {
		addr, _, errno := syscall.Syscall6(syscall.SYS_MMAP, at, 2*page, syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_ANON|syscall.MAP_PRIVATE|mapFixedNoReplace, ^uintptr(0), 0)
		if errno != 0 || addr != at {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, addr, page, 0); errno != 0 {
			return nil, errno
		}
		first := addr + page // memory the Go runtime does not manage: no pointer of its
		return *(**sync.RWMutex)(unsafe.Pointer(&first)), nil
	}
	return nil, errors.New("no free address for it")
}

// readLockEdge read-locks m, a sync.RWMutex at the first byte of a
// mapping whose page before is not mapped: its semaphores are at its
// start, and the bytes before them cannot be read.
//
//go:noinline
func readLockEdge(m *sync.RWMutex) {
	announce("sync.RWMutex.RLock", fmt.Sprintf("kind=rwmutex addr=%p dir=read", m))
	m.RLock()
}

//go:noinline
func writeLock() {
	announce("sync.RWMutex.Lock", fmt.Sprintf("kind=rwmutex addr=%p name=main.rwR dir=write", &rwR))
	rwR.Lock()
}

//go:noinline
func waitGroup() {
	announce("sync.WaitGroup.Wait|semacquire", fmt.Sprintf("kind=waitgroup addr=%p name=main.wg", &wg))
	wg.Wait()
}

//go:noinline
func condWait(c *sync.Cond, name string) {
	c.L.Lock()
	announce("sync.Cond.Wait", fmt.Sprintf("kind=cond addr=%p%s", c, name))
	c.Wait()
}

//go:noinline
func sleeper(d time.Duration) {
	wake := time.Now().Add(d)
	announce("sleep", fmt.Sprintf("kind=timer addr=0x0 more=%d", wake.UnixNano()))
	time.Sleep(d)
}

// fdOf returns the descriptor number behind c.
func fdOf(c syscall.Conn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		panic(err)
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

//go:noinline
func acceptOne(ln *net.TCPListener) {
	announce("IO wait", fmt.Sprintf("kind=fd addr=fd fd=%d dir=read more=tcp,%s,", fdOf(ln), ln.Addr()))
	ln.Accept()
}

//go:noinline
func readConn(c *net.TCPConn) {
	announce("IO wait", fmt.Sprintf("kind=fd addr=fd fd=%d dir=read more=tcp,%s,%s", fdOf(c), c.LocalAddr(), c.RemoteAddr()))
	c.Read(make([]byte, 1))
}

//go:noinline
func readPipe(r *os.File) {
	announce("IO wait", fmt.Sprintf("kind=fd addr=fd fd=%d dir=read more=pipe,,", fdOf(r)))
	r.Read(make([]byte, 1))
}

//go:noinline
func readBlocking(fd int) {
	announce("syscall", fmt.Sprintf("kind=fd addr=syscall fd=%d dir=read more=pipe,,", fd))
	syscall.Read(fd, make([]byte, 1))
}

func main() {
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go acceptOne(ln.(*net.TCPListener))
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	client, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		panic(err)
	}
	server, err := srv.Accept() // kept open, never written to
	if err != nil {
		panic(err)
	}
	defer server.Close()
	go readConn(client.(*net.TCPConn))
	pr, pw, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	defer pw.Close()
	go readPipe(pr)
	var blocking [2]int // a pipe without O_NONBLOCK: read(2) blocks in the kernel
	if err := syscall.Pipe(blocking[:]); err != nil {
		panic(err)
	}
	go readBlocking(blocking[0])

	jobs := make(chan job)
	for i := 0; i < 3; i++ {
		go recvJob(jobs)
	}
	out := make(chan int, 2)
	out <- 1
	out <- 2
	for i := 0; i < 2; i++ {
		go sendOut(out)
	}
	a, b := make(chan string), make(chan int, 1)
	b <- 0
	go selectBoth(a, b)
	fanCh := make(chan struct{})
	for i := 0; i < *fan; i++ {
		go fanIn(fanCh)
	}
	go nilRecv()

	slowMu.Lock()
	for i := 0; i < 4; i++ {
		go lockSlow()
	}
	heapMu := new(sync.Mutex)
	heapMu.Lock()
	go lockHeap(heapMu)
	rw.Lock()
	for i := 0; i < 2; i++ {
		go readLock()
	}
	rwR.RLock()
	go writeLock()
	edge, err := edgeMutex()
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiters: a mapping for the RWMutex at its start:", err)
		os.Exit(1)
	}
	edge.Lock()
	go readLockEdge(edge)
	wg.Add(1)
	for i := 0; i < 2; i++ {
		go waitGroup()
	}
	for i := 0; i < 3; i++ {
		go condWait(cond, "")
	}
	go condWait(&valueCond, " name=main.valueCond")
	go sleeper(time.Hour)

	// READY once the runtime's own dump shows every announced goroutine
	// blocked with its reason.
	want := 4 + 3 + 2 + 1 + *fan + 1 + 4 + 1 + 2 + 1 + 1 + 2 + 4 + 1
	for {
		printMu.Lock()
		n := len(waiting)
		expect := make(map[uint64]string, n)
		for k, v := range waiting {
			expect[k] = v
		}
		printMu.Unlock()
		if n == want && allBlocked(expect) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("READY")
	for {
		time.Sleep(time.Hour)
	}
}

// allBlocked reports whether the runtime's dump shows each goroutine of
// expect waiting with its reason.
func allBlocked(expect map[uint64]string) bool {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	seen := 0
	for _, block := range strings.Split(buf.String(), "\n\n") {
		var id uint64
		var state string
		if _, err := fmt.Sscanf(block, "goroutine %d [", &id); err != nil {
			continue
		}
		if i, j := strings.IndexByte(block, '['), strings.IndexByte(block, ']'); i > 0 && j > i {
			state, _, _ = strings.Cut(block[i+1:j], ",")
		}
		if r, ok := expect[id]; ok {
			// Reasons differ between releases: "a|b" accepts either.
			if !strings.Contains("|"+r+"|", "|"+state+"|") {
				return false
			}
			seen++
		}
	}
	if seen != len(expect) {
		fmt.Fprintf(os.Stderr, "waiters: %d of %d goroutines in the dump\n", seen, len(expect))
		return false
	}
	return true
}
