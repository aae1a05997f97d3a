// Command tracee runs workloads on command, for gi trace's tests. It reads
// commands on stdin, one per line, runs them, and prints what it measured
// itself (the ground truth) as one "DONE" line:
//
//	chain N        N calls of main.chainA → main.chainB → main.chainC (sleeps 1, 2, 5 ms)
//	parallel G N   G goroutines, each N calls of main.parWorker → main.parLeaf
//	panic N        N calls of main.recoverer → main.panicky → main.thrower, which panics
//	grow N         N calls of main.grower, which needs a deep stack (morestack)
//	multi N        N calls of main.multiRet, which has several returns
//	churn G        G goroutines that call main.churnWork once and exit
//	tiny N         N calls of main.tiny; prints the ns per call it measured
//	args N         N calls of main.withArgs (three ints and a string); prints
//	               the ns per call it measured
//	floatargs N    N calls of main.withFloats (two floats and an int in
//	               registers); prints the ns per call it measured
//	goexit N       N goroutines calling main.exiter, which calls runtime.Goexit
//	tinypar G N    G goroutines, each N calls of main.tiny; prints the wall time
//	framedpar G N  the same with main.framed, whose entry is PUSHQ BP
//	worker N       starts a goroutine in main.workerLoop, which never returns,
//	               and hands it N jobs, each a call of main.workerTask; prints
//	               when the loop began (wall clock) and the tasks' mean time
//	doom N         N calls of main.doomCatcher → main.doomed, which always
//	               panics (it has no RET)
//
// It prints READY at start and runs until killed.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var sink atomic.Int64

//go:noinline
func chainC() { time.Sleep(5 * time.Millisecond) }

//go:noinline
func chainB() {
	time.Sleep(2 * time.Millisecond)
	chainC()
}

//go:noinline
func chainA() {
	time.Sleep(1 * time.Millisecond)
	chainB()
}

//go:noinline
func parLeaf(i int) int {
	time.Sleep(100 * time.Microsecond)
	return i * 2
}

//go:noinline
func parWorker(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += parLeaf(i)
	}
	return s
}

//go:noinline
func thrower(i int) {
	if i >= 0 {
		panic(fmt.Sprintf("boom %d", i))
	}
}

//go:noinline
func panicky(i int) {
	thrower(i)
	sink.Add(1) // never reached
}

//go:noinline
func recoverer(i int) (recovered bool) {
	defer func() {
		if recover() != nil {
			recovered = true
		}
	}()
	panicky(i)
	return false
}

// grower's frame is large enough that each call on a fresh goroutine grows
// the stack: the runtime runs morestack and restarts the function.
//
//go:noinline
func grower(depth int) int {
	var pad [4096]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return int(pad[0])
	}
	return grower(depth-1) + int(pad[depth%len(pad)])
}

//go:noinline
func multiRet(i int) int {
	switch i % 3 {
	case 0:
		return 10
	case 1:
		time.Sleep(time.Microsecond)
		return 20
	}
	if i%2 == 0 {
		return 30
	}
	return 40
}

//go:noinline
func churnWork(i int) int { return i + 1 }

//go:noinline
func tiny(i int) int { return i ^ 0x5a }

// withArgs takes three ints and a string: the argument-capture benchmark.
//
//go:noinline
func withArgs(a, b, c int, s string) int { return a ^ b ^ c ^ len(s) }

// withFloats takes floats in registers: the benchmark of reading them.
// It has a frame (it calls tiny), as most traced functions do.
//
//go:noinline
func withFloats(x float64, k float32, n int) float64 { return x*float64(k) + float64(tiny(n)) }

// framed has a frame (it calls tiny), so its entry probe sits on PUSHQ BP,
// an instruction the kernel emulates instead of single-stepping.
//
//go:noinline
func framed(i int) int { return tiny(i) + 1 }

//go:noinline
func exiter() {
	runtime.Goexit()
}

//go:noinline
func workerTask(j int) int {
	time.Sleep(time.Millisecond)
	return j * 2
}

// workerLoop is a worker that never returns: it has no RET instruction.
// It reports its goroutine and when it began on started, then serves jobs,
// answering each with the time main.workerTask took.
//
//go:noinline
func workerLoop(jobs <-chan int, poke <-chan struct{}, done chan<- time.Duration, started chan<- [2]int64) {
	started <- [2]int64{goid(), time.Now().UnixNano()}
	for {
		select {
		case j := <-jobs:
			t := time.Now()
			sink.Add(int64(workerTask(j)))
			done <- time.Since(t)
		case <-poke:
			sink.Add(1)
		}
	}
}

// doomed always panics: it has no RET instruction.
//
//go:noinline
func doomed(i int) {
	panic(fmt.Sprintf("doomed %d", i))
}

//go:noinline
func doomCatcher(i int) (recovered bool) {
	defer func() {
		if recover() != nil {
			recovered = true
		}
	}()
	doomed(i)
	return false
}

// callInParallel runs g goroutines, each calling f n times, and returns
// the wall time they took together.
func callInParallel(g, n int, f func(int) int) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for j := 0; j < g; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := 0
			for i := 0; i < n; i++ {
				s += f(i)
			}
			sink.Add(int64(s))
		}()
	}
	wg.Wait()
	return time.Since(start)
}

func goid() int64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	id, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return id
}

func main() {
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		arg := func(i int) int {
			if i >= len(f) {
				return 1
			}
			n, _ := strconv.Atoi(f[i])
			return n
		}
		switch f[0] {
		case "chain":
			n := arg(1)
			var total time.Duration
			for i := 0; i < n; i++ {
				start := time.Now()
				chainA()
				total += time.Since(start)
			}
			fmt.Printf("DONE chain calls=%d goid=%d avg_ns=%d\n", n, goid(), int64(total)/int64(n))
		case "parallel":
			g, n := arg(1), arg(2)
			var wg sync.WaitGroup
			ids := make([]string, g)
			for j := 0; j < g; j++ {
				wg.Add(1)
				go func(j int) {
					defer wg.Done()
					ids[j] = strconv.FormatInt(goid(), 10)
					sink.Add(int64(parWorker(n)))
				}(j)
			}
			wg.Wait()
			fmt.Printf("DONE parallel goroutines=%d calls=%d goids=%s\n", g, n, strings.Join(ids, ","))
		case "panic":
			n, rec := arg(1), 0
			for i := 0; i < n; i++ {
				if recoverer(i) {
					rec++
				}
			}
			fmt.Printf("DONE panic calls=%d recovered=%d goid=%d\n", n, rec, goid())
		case "grow":
			n := arg(1)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() { // a fresh, small stack every time
					defer wg.Done()
					sink.Add(int64(grower(3)))
				}()
				wg.Wait()
			}
			fmt.Printf("DONE grow calls=%d\n", n*4)
		case "multi":
			n := arg(1)
			for i := 0; i < n; i++ {
				sink.Add(int64(multiRet(i)))
			}
			fmt.Printf("DONE multi calls=%d\n", n)
		case "churn":
			g := arg(1)
			var wg sync.WaitGroup
			for j := 0; j < g; j++ {
				wg.Add(1)
				go func(j int) {
					defer wg.Done()
					sink.Add(int64(churnWork(j)))
				}(j)
			}
			wg.Wait()
			fmt.Printf("DONE churn goroutines=%d calls=%d\n", g, g)
		case "tiny":
			n := arg(1)
			start := time.Now()
			s := 0
			for i := 0; i < n; i++ {
				s += tiny(i)
			}
			el := time.Since(start)
			sink.Add(int64(s))
			fmt.Printf("DONE tiny calls=%d ns_per_call=%d\n", n, el.Nanoseconds()/int64(n))
		case "args":
			n := arg(1)
			keys := []string{"user:7", "session:1234", "k"}
			start := time.Now()
			s := 0
			for i := 0; i < n; i++ {
				s += withArgs(i, 2*i, 3*i, keys[i%3])
			}
			el := time.Since(start)
			sink.Add(int64(s))
			fmt.Printf("DONE args calls=%d ns_per_call=%d\n", n, el.Nanoseconds()/int64(n))
		case "floatargs":
			n := arg(1)
			start := time.Now()
			f := 0.0
			for i := 0; i < n; i++ {
				f += withFloats(float64(i), 0.5, i)
			}
			el := time.Since(start)
			sink.Add(int64(f))
			fmt.Printf("DONE floatargs calls=%d ns_per_call=%d\n", n, el.Nanoseconds()/int64(n))
		case "tinypar":
			g, n := arg(1), arg(2)
			fmt.Printf("DONE tinypar calls=%d wall_ns=%d\n", g*n, callInParallel(g, n, tiny).Nanoseconds())
		case "framedpar":
			g, n := arg(1), arg(2)
			fmt.Printf("DONE framedpar calls=%d wall_ns=%d\n", g*n, callInParallel(g, n, framed).Nanoseconds())
		case "goexit":
			n := arg(1)
			var wg sync.WaitGroup
			for j := 0; j < n; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					exiter()
				}()
			}
			wg.Wait()
			fmt.Printf("DONE goexit calls=%d\n", n)
		case "worker":
			n := arg(1)
			jobs, done := make(chan int), make(chan time.Duration)
			started := make(chan [2]int64)
			go workerLoop(jobs, nil, done, started)
			st := <-started
			var total time.Duration
			for i := 0; i < n; i++ {
				jobs <- i
				total += <-done
			}
			avg := int64(0)
			if n > 0 {
				avg = int64(total) / int64(n)
			}
			fmt.Printf("DONE worker goid=%d calls=%d start_unix_ns=%d avg_ns=%d\n", st[0], n, st[1], avg)
		case "doom":
			n, rec := arg(1), 0
			for i := 0; i < n; i++ {
				if doomCatcher(i) {
					rec++
				}
			}
			fmt.Printf("DONE doom calls=%d recovered=%d goid=%d\n", n, rec, goid())
		default:
			fmt.Printf("DONE error unknown command %q\n", f[0])
		}
	}
	select {}
}
