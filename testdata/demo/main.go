// Command demo is a small HTTP service that keeps itself busy: clients call
// /work, whose handler loads data (sometimes waiting on a contended cache
// lock) and queries a slow backend. It is what `make demo` points gi at.
// It has the commonest goroutine leak in Go services: a request that gives
// up on a backend call after a deadline leaves the goroutine making the
// call blocked forever on sending its late answer (prefetch).
//
// With -report D it prints, every D, "rate requests <requests per second
// over the interval> <requests per second of the process's CPU time over
// the interval> <requests so far> <the process's CPU time so far, in ns>":
// what tracing costs a service whose requests mostly wait shows in the
// second figure (gi trace's overhead benchmark).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var (
	addr    = flag.String("addr", "127.0.0.1:0", "listen address")
	clients = flag.Int("clients", 8, "client goroutines calling /work")
	report  = flag.Duration("report", 0, "print the request rates this often (0: never)")
)

// requests counts the answers the clients received.
var requests atomic.Uint64

// processCPU is the process's CPU time in ns.
func processCPU() int64 {
	var ts syscall.Timespec
	// CLOCK_PROCESS_CPUTIME_ID is 2 on Linux.
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 2, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// reportRates prints the request rates every d.
func reportRates(d time.Duration) {
	var last uint64
	lastCPU, prev := processCPU(), time.Now()
	for range time.Tick(d) {
		now, cpu, n := time.Now(), processCPU(), requests.Load()
		perCPU := 0.0
		if cpu > lastCPU {
			perCPU = float64(n-last) / (float64(cpu-lastCPU) / 1e9)
		}
		fmt.Printf("rate requests %.0f %.0f %d %d\n", float64(n-last)/now.Sub(prev).Seconds(), perCPU, n, cpu)
		last, lastCPU, prev = n, cpu, now
	}
}

var (
	cacheMu sync.Mutex
	cache   = map[int]int{}
)

//go:noinline
func query(key int) int {
	time.Sleep(time.Duration(2+rand.Intn(8)) * time.Millisecond)
	return key * 2
}

//go:noinline
func load(key int) int {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if v, ok := cache[key]; ok {
		return v
	}
	// A miss holds the lock while the backend answers: the others wait.
	v := query(key)
	if len(cache) > 64 {
		cache = map[int]int{}
	}
	cache[key] = v
	return v
}

// prefetch warms the next key, waiting for the backend 5 ms at most. The
// bug: the goroutine answering late sends on a channel nobody will read,
// and is never woken (gi ps --leaks).
//
//go:noinline
func prefetch(key int) {
	answer := make(chan int)
	go func() { answer <- query(key + 1) }()
	select {
	case <-answer:
	case <-time.After(5 * time.Millisecond):
	}
}

//go:noinline
func handle(w http.ResponseWriter, r *http.Request) {
	key := rand.Intn(128)
	var v int
	pprof.Do(r.Context(), pprof.Labels("route", "/work"), func(context.Context) {
		v = load(key)
		prefetch(key)
	})
	fmt.Fprintf(w, "%d\n", v)
}

//go:noinline
func client(url string) {
	for {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			requests.Add(1)
		}
		time.Sleep(time.Duration(rand.Intn(20)) * time.Millisecond)
	}
}

func main() {
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/work", handle)
	go http.Serve(ln, mux)
	for i := 0; i < *clients; i++ {
		go client("http://" + ln.Addr().String() + "/work")
	}
	fmt.Println("ADDR", ln.Addr())
	fmt.Println("READY")
	if *report > 0 {
		go reportRates(*report)
	}
	select {}
}
