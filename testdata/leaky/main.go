// Command leaky parks goroutines on channels and sync objects, -n of
// each kind, for the tests of gi ps --leaks: half of them leaked (the
// object they wait on is held by nothing but themselves and the runtime's
// queues) and half kept (the object is in a global, or on the stack of a
// goroutine that sleeps and can run again). Before READY it prints one
// line per parked goroutine:
//
//	G <goid> <class> leaked|kept
//
// once every one of them is parked (as the runtime's own dump says).
// With -ballast-mb M, a global holds M MiB of heap objects that hold
// pointers (a heap large enough for gi to copy it into a buffer of its
// own). With -churn-mb M, a goroutine keeps writing every page of M MiB.
// With -finq, a kept goroutine waits on a channel that only a queued
// finalizer holds. With -cleanup (Go 1.24+), a leaked goroutine waits
// on a channel that only an object with a cleanup holds. With -clock, a goroutine spins reading the clock. With -mover, one kept goroutine waits on a channel that a goroutine
// moves, every few microseconds, between two heap objects far apart: a
// copy of the heap taken while the program runs, unless made exact at
// the stop, can miss it in both. With -stale, the addresses of the
// objects the leaked goroutines wait on are kept too, as integers, in a
// heap object that also holds a pointer: a conservative scan of the heap
// takes them for pointers and finds none of those goroutines leaked; the
// garbage collector, and a scan by its pointer maps, does not.
// Commands on stdin: "leakprofile" asks the runtime for its goroutineleak
// profile (Go 1.26 with GOEXPERIMENT=goroutineleakprofile, Go 1.27+) and
// answers "DONE leaked=<goids>", or "DONE unsupported" before it; "grow K"
// leaks K more goroutines, created in main.grow, and answers "DONE
// grown=K total=<all it grew>" once they are parked.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Boxes hold sync objects beside a pointer: objects of their own size
// class, never tiny-allocated (the runtime marks tiny blocks 16 bytes at
// a time, and its own detector misses a tiny mutex that shares its block).
type mutexBox struct {
	mu   sync.Mutex
	name *string
}

type rwBox struct {
	mu   sync.RWMutex
	name *string
}

type wgBox struct {
	wg   sync.WaitGroup
	name *string
}

// record is what a parked goroutine reports before it parks.
type record struct {
	goid   int64
	class  string
	leaked bool
}

// staleBox keeps addresses as integers beside a pointer (so that its
// span is one the collector scans).
type staleBox struct {
	name  *string
	addrs [1024]uintptr
}

var (
	// stale keeps, with -stale, the leaked goroutines' objects' addresses
	// as integers.
	stale     *staleBox
	staleNext int
	report    = make(chan record, 1<<16)
	// kept holds the objects the kept goroutines wait on.
	kept []any
	// ballast is -ballast-mb of heap that holds pointers.
	ballast *ballastNode
	name    = "box"
)

// churn writes a byte of every page of b, again and again: each page the
// process shares with a copy of itself is copied as soon as written.
func churn(b []byte) {
	for n := byte(1); ; n++ {
		for i := 0; i < len(b); i += 4096 {
			b[i] = n
		}
	}
}

// ballastNode is a 4 KiB heap object in a chain.
type ballastNode struct {
	next *ballastNode
	_    [4096 - 8]byte
}

func main() {
	n := flag.Int("n", 5, "goroutines of each kind")
	mover := flag.Bool("mover", false, "keep a channel moving between two heap objects")
	clock := flag.Bool("clock", false, "keep a goroutine reading the clock (in the vDSO, on its thread's system stack)")
	finq := flag.Bool("finq", false, "park a goroutine on a channel only a queued finalizer holds")
	cleanup := flag.Bool("cleanup", false, "park a leaked goroutine on a channel only an object with a cleanup holds (Go 1.24+)")
	staleWords := flag.Bool("stale", false, "keep the leaked goroutines' objects' addresses as integers in a heap object")
	ballastMB := flag.Int("ballast-mb", 0, "hold this many MiB of 4 KiB objects that point at each other, from a global")
	churnMB := flag.Int("churn-mb", 0, "keep writing every page of this many MiB, from a goroutine that never blocks")
	flag.Parse()
	if *churnMB > 0 {
		go churn(make([]byte, *churnMB<<20))
	}
	for i := 0; i < *ballastMB<<8; i++ {
		ballast = &ballastNode{next: ballast}
	}
	if *staleWords {
		stale = &staleBox{name: &name}
	}
	if *clock {
		go readClock()
	}
	// The goroutines that outlive the spawning start first: their
	// stacks hold no stale word of it.
	go commands()
	go holder()
	spawned := make(chan int)
	total := 0
	if *finq {
		// First: its collections run before any object of the others
		// exists (a collection leaves pointers behind in the runtime's
		// buffers, which a conservative scan of the heap may take for
		// references).
		total++
		go func() { spawned <- spawnQueued() }()
		<-spawned
	}
	go func() { spawned <- spawn(*n) }() // its stack is gone once it returns
	total += <-spawned
	if *mover {
		total++
		go func() { spawned <- spawnMoved() }()
		<-spawned
	}
	if *cleanup {
		go func() { spawned <- spawnCleanup() }()
		total += <-spawned
	}
	got := make([]record, 0, total)
	for len(got) < total {
		got = append(got, <-report)
	}
	waitParked(got)
	sort.Slice(got, func(i, j int) bool { return got[i].goid < got[j].goid })
	for _, r := range got {
		state := "kept"
		if r.leaked {
			state = "leaked"
		}
		fmt.Printf("G %d %s %s\n", r.goid, r.class, state)
	}
	// Two collections: the heap swept, and waits stamped.
	runtime.GC()
	runtime.GC()
	fmt.Println("READY")
	select {} // the main goroutine's select {}: never reported leaked
}

// remember keeps, with -stale, the address p points to as an integer.
func remember(p unsafe.Pointer) {
	if stale != nil && staleNext < len(stale.addrs) {
		stale.addrs[staleNext] = uintptr(p)
		staleNext++
	}
}

// chanAddr returns where a channel is.
func chanAddr(ch chan int) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&ch)) }

// spawn starts n goroutines of each kind and returns how many.
func spawn(n int) int {
	count := 0
	park := func(class string, leaked bool, f func()) {
		count++
		go func() {
			report <- record{goid(), class, leaked}
			f()
		}()
	}
	var held []any // what the sleeping holder keeps
	for i := 0; i < n; i++ {
		// Leaked: nothing but the goroutine itself holds the object.
		{
			ch := make(chan int)
			remember(chanAddr(ch))
			park("chanrecv", true, func() { <-ch })
		}
		{
			ch := make(chan int)
			remember(chanAddr(ch))
			park("chansend", true, func() { ch <- 1 })
		}
		{
			a, b := make(chan int), make(chan int)
			remember(chanAddr(a))
			remember(chanAddr(b))
			park("select", true, func() {
				select {
				case <-a:
				case b <- 1:
				}
			})
		}
		{
			m := &mutexBox{name: &name}
			m.mu.Lock()
			remember(unsafe.Pointer(m))
			park("mutex", true, func() { m.mu.Lock() })
		}
		{
			rw := &rwBox{name: &name}
			rw.mu.Lock()
			remember(unsafe.Pointer(rw))
			park("rwmutex", true, func() { rw.mu.RLock() })
		}
		{
			wg := &wgBox{name: &name}
			wg.wg.Add(1)
			remember(unsafe.Pointer(wg))
			park("waitgroup", true, func() { wg.wg.Wait() })
		}
		{
			c := sync.NewCond(&sync.Mutex{})
			remember(unsafe.Pointer(c))
			park("cond", true, func() {
				c.L.Lock()
				c.Wait()
			})
		}
		park("nilchan", true, func() {
			var ch chan int
			<-ch
		})
		park("selectnone", true, func() { select {} })
		{
			// A chain: the second goroutine would wake the first,
			// but nothing can wake the second.
			first, second := make(chan int), make(chan int)
			remember(chanAddr(first))
			remember(chanAddr(second))
			park("chain", true, func() { <-first })
			park("chain", true, func() {
				<-second
				first <- 1
			})
		}

		// Kept: the object is in a global, or held by the sleeper.
		{
			ch := make(chan int)
			kept = append(kept, ch)
			park("chanrecv", false, func() { <-ch })
		}
		{
			ch := make(chan int)
			held = append(held, ch)
			park("chansend", false, func() { ch <- 1 })
		}
		{
			a, b := make(chan int), make(chan int)
			held = append(held, b)
			park("select", false, func() {
				select {
				case <-a:
				case b <- 1:
				}
			})
		}
		{
			m := &mutexBox{name: &name}
			m.mu.Lock()
			kept = append(kept, m)
			park("mutex", false, func() { m.mu.Lock() })
		}
		{
			rw := &rwBox{name: &name}
			rw.mu.Lock()
			held = append(held, rw)
			park("rwmutex", false, func() { rw.mu.RLock() })
		}
		{
			wg := &wgBox{name: &name}
			wg.wg.Add(1)
			kept = append(kept, wg)
			park("waitgroup", false, func() { wg.wg.Wait() })
		}
		{
			c := sync.NewCond(&sync.Mutex{})
			held = append(held, c)
			park("cond", false, func() {
				c.L.Lock()
				c.Wait()
			})
		}
		{
			// A chain whose second channel is kept: the second
			// goroutine can run, and it holds the first's channel.
			first, second := make(chan int), make(chan int)
			kept = append(kept, second)
			park("chain", false, func() { <-first })
			park("chain", false, func() {
				<-second
				first <- 1
			})
		}
	}
	hold <- held
	return count
}

// slots are two heap objects a channel moves between; far apart, in
// spans of their own.
type slots struct {
	a *[64 << 10]chan int
	b *[64 << 10]chan int
}

// spawnMoved parks a goroutine on a channel held only by the moving
// slots, and starts the goroutine that moves it.
func spawnMoved() int {
	s := &slots{a: new([64 << 10]chan int), b: new([64 << 10]chan int)}
	ch := make(chan int)
	s.a[0] = ch
	go func() {
		report <- record{goid(), "moved", false}
		<-ch
	}()
	go move(s)
	return 0
}

// move moves the channel from one slot to the other and back, forever,
// never holding it anywhere else for longer than a move.
func move(s *slots) {
	for {
		for i := 0; i < 64; i++ {
			if s.a[0] != nil {
				s.b[0], s.a[0] = s.a[0], nil
			} else {
				s.a[0], s.b[0] = s.b[0], nil
			}
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// finObj is an object whose finalizer closes a channel.
type finObj struct {
	ch  chan int
	pad [64]byte
}

// spawnQueued parks a kept goroutine on a channel that only a queued
// finalizer holds: the runtime's finalizer goroutine is kept busy by
// another object's finalizer, and the one that would close the channel
// waits in the queue behind it (off the heap, where the collector finds
// it as a root).
func spawnQueued() int {
	busy := make(chan struct{})
	func() {
		a := new([64]byte)
		runtime.SetFinalizer(a, func(*[64]byte) {
			close(busy)
			time.Sleep(24 * time.Hour)
		})
	}()
	for done := false; !done; {
		runtime.GC()
		select {
		case <-busy:
			done = true
		case <-time.After(time.Millisecond):
		}
	}
	ch := make(chan int)
	func() {
		b := &finObj{ch: ch}
		runtime.SetFinalizer(b, func(o *finObj) { close(o.ch) })
	}()
	go func() {
		report <- record{goid(), "finq", false}
		<-ch
	}()
	runtime.GC() // b is unreachable: its finalizer is queued
	runtime.GC()
	return 0
}

// clockSink keeps readClock's result.
var clockSink int64

// readClock reads the clock forever: running, and much of the time on
// its thread's g0 stack, where the runtime calls the vDSO.
func readClock() {
	for {
		clockSink += time.Now().UnixNano() & 1
	}
}

// hold hands the holder what it keeps.
var hold = make(chan []any)

// holder keeps what it is handed on its stack, asleep: a goroutine that
// can run again.
func holder() {
	held := <-hold
	for {
		time.Sleep(time.Hour)
		runtime.KeepAlive(held)
	}
}

var header = regexp.MustCompile(`^goroutine (\d+) \[([^\],]+)`)

// waitParked returns once every reported goroutine is parked, as the
// runtime's own dump says.
func waitParked(rs []record) {
	want := map[int64]bool{}
	for _, r := range rs {
		want[r.goid] = true
	}
	buf := make([]byte, 1<<20)
	for {
		for n := runtime.Stack(buf, true); n == len(buf); n = runtime.Stack(buf, true) {
			buf = make([]byte, 2*len(buf))
		}
		parked := 0
		for _, line := range strings.Split(string(buf), "\n") {
			m := header.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			id, _ := strconv.ParseInt(m[1], 10, 64)
			if want[id] && m[2] != "running" && m[2] != "runnable" {
				parked++
			}
		}
		if parked == len(want) {
			return
		}
		runtime.Gosched()
	}
}

// commands answers the test's commands on stdin.
func commands() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "leakprofile":
			p := pprof.Lookup("goroutineleak")
			if p == nil {
				fmt.Println("DONE unsupported")
				continue
			}
			var buf bytes.Buffer
			p.WriteTo(&buf, 2)
			var ids []string
			for _, line := range strings.Split(buf.String(), "\n") {
				if m := header.FindStringSubmatch(line); m != nil && strings.Contains(line, "(leaked)]") {
					ids = append(ids, m[1])
				}
			}
			fmt.Printf("DONE leaked=%s\n", strings.Join(ids, ","))
		default:
			var k int
			if _, err := fmt.Sscanf(in.Text(), "grow %d", &k); err == nil && k > 0 {
				grown += k
				fmt.Printf("DONE grown=%d total=%d\n", k, grow(k))
				continue
			}
			fmt.Println("DONE error unknown command")
		}
	}
}

// grown counts the goroutines grow leaked.
var grown int

// grow leaks k goroutines, each receiving on a channel only it holds, and
// returns once they are parked with how many it leaked in all.
func grow(k int) int {
	rs := make([]record, 0, k)
	for i := 0; i < k; i++ {
		ch := make(chan int)
		go func() {
			report <- record{goid(), "grown", true}
			<-ch
		}()
	}
	for len(rs) < k {
		rs = append(rs, <-report)
	}
	waitParked(rs)
	return grown
}

// goid returns the calling goroutine's id, from its own stack header.
func goid() int64 {
	var b [64]byte
	s := string(b[:runtime.Stack(b[:], false)])
	id, _ := strconv.ParseInt(strings.Fields(s)[1], 10, 64)
	return id
}
