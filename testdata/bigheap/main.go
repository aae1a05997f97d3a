// Command bigheap holds a large live heap and many parked goroutines: the
// target of gi's benchmark of reading a large core file (BenchmarkPsCore).
//
// Half of the heap (-heap-mb) is 1 MiB byte slices, half 4 KiB objects
// that point at each other (so that the heap has many spans of a small
// size class, not a few large ones); every page is written, so that a
// core holds all of it. -goroutines goroutines park on a channel at the
// bottom of -depth frames of main.recurse.
//
// It prints "HEAP <bytes>" (the live heap after a collection) and then
// READY. With -quiet-crash its stderr goes to /dev/null after READY: the
// runtime's traceback of every goroutine when it crashes does not reach
// the benchmark's output.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

var (
	heapMB     = flag.Int("heap-mb", 2048, "MiB of live heap")
	goroutines = flag.Int("goroutines", 5000, "goroutines parked in main.parked")
	depth      = flag.Int("depth", 20, "frames of main.recurse above each parked goroutine's wait")
	quietCrash = flag.Bool("quiet-crash", false, "send stderr to /dev/null after READY")
)

var (
	never   = make(chan int) // nobody ever sends on it
	started sync.WaitGroup
	sink    int
)

// node is a 4 KiB heap object in a chain.
type node struct {
	next *node
	data [4096 - 8]byte
}

// heap is what the process holds live.
var heap struct {
	big   [][]byte
	small *node
}

//go:noinline
func parked() {
	started.Done()
	<-never
}

//go:noinline
func recurse(n int) int {
	if n == 0 {
		parked()
		return 0
	}
	return recurse(n-1) + 1
}

func main() {
	flag.Parse()
	// No collection while the heap grows: it holds on to all of it.
	debug.SetGCPercent(-1)
	total := int64(*heapMB) << 20
	for i := int64(0); i < total/2; i += 1 << 20 {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(i>>20) + byte(j) | 1
		}
		heap.big = append(heap.big, b)
	}
	for i := int64(0); i < total/2; i += 4096 {
		n := &node{next: heap.small}
		for j := 0; j < len(n.data); j += 512 {
			n.data[j] = byte(i) | 1
		}
		heap.small = n
	}
	for i := 0; i < *goroutines; i++ {
		started.Add(1)
		go func() { sink += recurse(*depth) }()
	}
	started.Wait()
	// Two collections: the runtime records when each goroutine began to
	// wait (g.waitsince) at the first that sees it blocked.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Println("HEAP", ms.HeapAlloc)
	if *quietCrash {
		if f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			syscall.Dup3(int(f.Fd()), 2, 0)
		}
	}
	fmt.Println("READY")
	// Asleep, not blocked forever: with every goroutine blocked on a
	// channel the runtime would find the process deadlocked.
	for {
		time.Sleep(time.Hour)
	}
}
