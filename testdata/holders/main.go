// Command holders holds sync objects the ways Go code does, for the tests
// of gi's lock holders: a goroutine takes a lock with the idiom
// mu.Lock(); defer mu.Unlock() and then blocks on a channel, holding it,
// while -n others wait for it. The locks: a global sync.Mutex
// (main.cacheMu), a mutex field reached through a pointer receiver
// (main.reg's), a global sync.RWMutex held for writing (main.table), one
// taken without defer (main.plainMu: its holder cannot be seen), and one
// whose would-be holder registered the defer before it took the lock and
// waits in Lock itself (main.lateMu, held by a plain Lock). Also: a mutex
// embedded in a heap struct (main.emb.Mutex, locked as emb.Lock()), and a
// RWMutex two goroutines hold for reading (main.shared) while a writer
// waits for them. Once every waiter is parked (as the runtime's own dump says) it prints, then
// READY:
//
//	HOLD <goid> <lock> <function> <line of the defer statement>
//	READ <goid> <lock> <function> <line of the defer statement>
//	WAIT <goid> <lock>
//	PLAIN <goid> <lock> <function>   (a holder without defer)
//
// With -deadlock, two goroutines also take main.abA and main.abB in
// opposite orders, each with its first lock's unlock deferred (a
// deadlock), three take main.ring0, ring1 and ring2 each and then the
// next (a cycle of three), and one takes main.selfMu and, holding it, calls a function
// that locks it again (a deadlock of one); it prints
//
//	CYCLE <goid> <lock it holds> <lock it waits for>
//	SELF <goid> <lock>
//
// and runs until killed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	cacheMu sync.Mutex
	table   sync.RWMutex
	plainMu sync.Mutex
	lateMu  sync.Mutex
	abA     sync.Mutex
	abB     sync.Mutex
	selfMu  sync.Mutex
	ring0   sync.Mutex
	ring1   sync.Mutex
	ring2   sync.Mutex
	shared  sync.RWMutex
	emb     = &embedded{}
	reg     = &registry{name: "reg"}
)

type embedded struct {
	sync.Mutex
	n int
}

type registry struct {
	name string
	mu   sync.Mutex
	n    int
}

// event is what a goroutine reports once it holds or is about to wait.
type event struct {
	kind, lock, fn string
	goid           uint64
	line           int
}

var (
	events = make(chan event, 64)
	block  = make(chan struct{}) // never closed: holders hold for good
)

//go:noinline
func holdGlobal() {
	cacheMu.Lock()
	_, _, line, _ := runtime.Caller(0)
	defer cacheMu.Unlock()
	events <- event{kind: "HOLD", lock: "main.cacheMu", fn: "main.holdGlobal", goid: goid(), line: line + 1}
	<-block
}

//go:noinline
func (r *registry) hold() {
	r.mu.Lock()
	_, _, line, _ := runtime.Caller(0)
	defer r.mu.Unlock()
	r.n++
	events <- event{kind: "HOLD", lock: "main.reg.mu", fn: "main.(*registry).hold", goid: goid(), line: line + 1}
	<-block
}

//go:noinline
func holdTable() {
	table.Lock()
	_, _, line, _ := runtime.Caller(0)
	defer table.Unlock()
	events <- event{kind: "HOLD", lock: "main.table", fn: "main.holdTable", goid: goid(), line: line + 1}
	<-block
}

//go:noinline
func holdEmbedded() {
	emb.Lock()
	_, _, line, _ := runtime.Caller(0)
	defer emb.Unlock()
	emb.n++
	events <- event{kind: "HOLD", lock: "main.emb.Mutex", fn: "main.holdEmbedded", goid: goid(), line: line + 1}
	<-block
}

//go:noinline
func holdShared() {
	shared.RLock()
	_, _, line, _ := runtime.Caller(0)
	defer shared.RUnlock()
	events <- event{kind: "READ", lock: "main.shared", fn: "main.holdShared", goid: goid(), line: line + 1}
	<-block
}

//go:noinline
func waitWrite() {
	events <- event{kind: "WAIT", lock: "main.shared", goid: goid()}
	shared.Lock()
	shared.Unlock()
}

//go:noinline
func holdPlain() {
	plainMu.Lock()
	events <- event{kind: "PLAIN", lock: "main.plainMu", goid: goid()}
	<-block
	plainMu.Unlock()
}

// lateDefer registers its unlock before it takes the lock, which
// another goroutine holds: it waits in Lock with the defer pending, and
// holds nothing.
//
//go:noinline
func lateDefer() {
	defer lateMu.Unlock()
	events <- event{kind: "WAIT", lock: "main.lateMu", goid: goid()}
	lateMu.Lock()
}

//go:noinline
func waitMutex(mu *sync.Mutex, name string) {
	events <- event{kind: "WAIT", lock: name, goid: goid()}
	mu.Lock()
	mu.Unlock()
}

//go:noinline
func waitRead() {
	events <- event{kind: "WAIT", lock: "main.table", goid: goid()}
	table.RLock()
	table.RUnlock()
}

// lockBoth takes first, then, once both of its pair hold their first,
// second: with the pair's orders opposite, neither gets its second.
//
//go:noinline
func lockBoth(first, second *sync.Mutex, holds, wants string, both *sync.WaitGroup) {
	first.Lock()
	defer first.Unlock()
	events <- event{kind: "CYCLE", lock: holds + " " + wants, goid: goid()}
	both.Done()
	both.Wait()
	second.Lock()
	defer second.Unlock()
}

// relock holds selfMu and calls lockAgain, which locks it again.
//
//go:noinline
func relock() {
	selfMu.Lock()
	defer selfMu.Unlock()
	events <- event{kind: "SELF", lock: "main.selfMu", goid: goid()}
	lockAgain()
}

//go:noinline
func lockAgain() {
	selfMu.Lock()
	selfMu.Unlock()
}

func main() {
	n := flag.Int("n", 3, "waiters on each lock")
	deadlock := flag.Bool("deadlock", false, "also deadlock two goroutines on two mutexes, and one on itself")
	flag.Parse()
	holders := []func(){holdGlobal, reg.hold, holdTable, holdPlain, holdEmbedded, holdShared, holdShared, func() { lateMu.Lock(); <-block }}
	for _, h := range holders {
		go h()
	}
	const reports = 7 // the holders' but lateMu's
	got := make([]event, 0, reports+5**n+2)
	for len(got) < reports {
		if e := <-events; e.kind != "WAIT" {
			got = append(got, e)
		}
	}
	time.Sleep(time.Millisecond) // lateMu's holder: no report of its own
	for i := 0; i < *n; i++ {
		go waitMutex(&cacheMu, "main.cacheMu")
		go waitMutex(&reg.mu, "main.reg.mu")
		go waitRead()
		go waitMutex(&plainMu, "main.plainMu")
		go waitMutex(&emb.Mutex, "main.emb.Mutex")
	}
	go lateDefer()
	go waitWrite()
	want, parked := reports+5**n+2, 5**n+2
	if *deadlock {
		var both sync.WaitGroup
		both.Add(2)
		go lockBoth(&abA, &abB, "main.abA", "main.abB", &both)
		go lockBoth(&abB, &abA, "main.abB", "main.abA", &both)
		go relock()
		var all sync.WaitGroup
		all.Add(3)
		go lockBoth(&ring0, &ring1, "main.ring0", "main.ring1", &all)
		go lockBoth(&ring1, &ring2, "main.ring1", "main.ring2", &all)
		go lockBoth(&ring2, &ring0, "main.ring2", "main.ring0", &all)
		want, parked = want+6, parked+6
	}
	for len(got) < want {
		got = append(got, <-events)
	}
	waitParked(parked)
	for _, e := range got {
		switch e.kind {
		case "HOLD", "READ":
			fmt.Printf("%s %d %s %s %d\n", e.kind, e.goid, e.lock, e.fn, e.line)
		case "WAIT":
			fmt.Printf("WAIT %d %s\n", e.goid, e.lock)
		case "CYCLE", "SELF":
			fmt.Printf("%s %d %s\n", e.kind, e.goid, e.lock)
		case "PLAIN":
			fmt.Printf("PLAIN %d %s main.holdPlain\n", e.goid, e.lock)
		}
	}
	fmt.Println("READY")
	for {
		time.Sleep(time.Hour) // a timer: the runtime sees no deadlock
	}
}

// waitParked waits until n goroutines are parked in Lock or RLock, as the
// runtime's own dump says.
func waitParked(n int) {
	buf := make([]byte, 1<<20)
	for {
		b := buf[:runtime.Stack(buf, true)]
		if bytes.Count(b, []byte("[sync.Mutex.Lock"))+bytes.Count(b, []byte("[sync.RWMutex.RLock"))+bytes.Count(b, []byte("[sync.RWMutex.Lock")) >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// goid is the calling goroutine's id, from its stack's header.
func goid() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _ := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	return id
}
