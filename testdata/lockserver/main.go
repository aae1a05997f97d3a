// Command lockserver is a service whose handler sometimes blocks for
// seconds on a lock: workers (labelled worker=wN) call main.handle in a
// loop; main.handle takes a shared mutex for about a millisecond. It
// measures every handle call itself, the ground truth for gi's latencies.
//
// Commands on stdin, answered by one "DONE" line:
//
//	stall D              a janitor holds the lock for duration D, from now
//	stats START END      count, p50, p99, max of the handle calls that began
//	                     and ended within [START, END] (Unix ns), then
//	                     p05, p10, p25, p75, p90, p95
//	calls                the number of handle calls so far
//
// It prints READY once the workers run.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	workers = flag.Int("workers", 6, "worker goroutines")
	hold    = flag.Duration("hold", time.Millisecond, "how long handle holds the lock")
	pause   = flag.Duration("pause", 5*time.Millisecond, "pause between a worker's calls")
	work    = flag.Int("work", 0, "with -hold 0: iterations of busy work under the lock instead of a sleep")
)

var sink int

var mu sync.Mutex

type record struct{ start, end int64 }

var (
	recMu   sync.Mutex
	records []record
)

//go:noinline
func handle() {
	start := time.Now()
	mu.Lock()
	if *hold > 0 {
		time.Sleep(*hold)
	}
	for i := 0; i < *work; i++ {
		sink += i * i
	}
	mu.Unlock()
	end := time.Now()
	recMu.Lock()
	records = append(records, record{start.UnixNano(), end.UnixNano()})
	recMu.Unlock()
}

//go:noinline
func worker() {
	for {
		handle()
		if *pause > 0 {
			time.Sleep(*pause)
		}
	}
}

//go:noinline
func janitor(d time.Duration, locked chan struct{}) {
	mu.Lock()
	close(locked)
	time.Sleep(d)
	mu.Unlock()
}

func main() {
	flag.Parse()
	for i := 0; i < *workers; i++ {
		go pprof.Do(context.Background(), pprof.Labels("worker", "w"+strconv.Itoa(i)), func(context.Context) { worker() })
	}
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "stall":
			d, err := time.ParseDuration(f[1])
			if err != nil {
				fmt.Println("DONE error", err)
				continue
			}
			locked := make(chan struct{})
			go janitor(d, locked)
			<-locked
			fmt.Println("DONE stall")
		case "stats":
			lo, _ := strconv.ParseInt(f[1], 10, 64)
			hi, _ := strconv.ParseInt(f[2], 10, 64)
			var ds []int64
			recMu.Lock()
			for _, r := range records {
				if r.start >= lo && r.end <= hi {
					ds = append(ds, r.end-r.start)
				}
			}
			recMu.Unlock()
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			q := func(p float64) int64 {
				if len(ds) == 0 {
					return 0
				}
				return ds[int(p*float64(len(ds)-1))]
			}
			fmt.Printf("DONE stats calls=%d p50_ns=%d p99_ns=%d max_ns=%d p05_ns=%d p10_ns=%d p25_ns=%d p75_ns=%d p90_ns=%d p95_ns=%d\n",
				len(ds), q(0.5), q(0.99), q(1), q(0.05), q(0.1), q(0.25), q(0.75), q(0.9), q(0.95))
		case "calls":
			recMu.Lock()
			n := len(records)
			recMu.Unlock()
			fmt.Printf("DONE calls calls=%d\n", n)
		default:
			fmt.Println("DONE error unknown command", f[0])
		}
	}
	select {}
}
