// Command hotcold runs the workloads of gi trace's overhead tests, each
// in a goroutine of its own, and measures its own pace:
//
//	-hot        calls main.hot in a loop (hundreds of millions of calls a
//	            second untraced); with -hotwait, only from the first
//	            SIGUSR1 on (it prints "hot started"): a function idle, then
//	            hot; with -hottoggle, each SIGUSR1 starts the hot loop
//	            or pauses it (paused at first), and it prints "hot started
//	            <ns>" (CLOCK_MONOTONIC, just before its first call) or
//	            "hot paused <ns>"
//	-work N     calls main.work in a loop, each call spinning N rounds of
//	            arithmetic (a CPU-bound loop of calls of known length)
//	-light D    calls main.light every D (a service-like function called a
//	            few times a second); with -lightsleep S each call sleeps S,
//	            with -lightwork N each call first calls main.work N times,
//	            each spinning -lightrounds rounds (a handler calling a
//	            helper: exactly N nested calls per call)
//	-switch     two goroutines pass a value back and forth over unbuffered
//	            channels, a goroutine switch per pass (what gi trace
//	            --why's probes on the scheduler cost); its rate line
//	            counts passes, against the process's CPU time (the pair
//	            is not locked to a thread)
//	-spawn      starts goroutines that end at once, 1024 at a time, and
//	            waits for them (what the probe on goroutine exits costs);
//	            its rate line counts goroutines, against the process's
//	            CPU time
//	-procs N    sets GOMAXPROCS (goroutines started and ended on one P
//	            keep a steadier pace)
//
// Every -every (250 ms) it prints one line per loop: "rate <loop>
// <calls per second over the interval> <calls per second of the loop
// thread's CPU time over the interval> <calls so far> <the loop thread's
// CPU time so far, in ns>"; after each call
// of main.light, "light <calls so far>". The second rate is the one
// probes lower and nothing else: a probe's traps are charged to the
// thread's CPU time, while other processes taking the CPU lower the
// first. It prints READY once the loops run, and runs until killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var (
	hotCalls, workCalls, lightCalls, passes, spawned atomic.Uint64
	// hotCPU and workCPU are the loop threads' CPU time, in ns, at their
	// last count; switchCPU and spawnCPU the process's.
	hotCPU, workCPU, switchCPU, spawnCPU atomic.Int64
	sink                                 atomic.Uint64
)

// threadCPU is the calling thread's CPU time in ns.
func threadCPU() int64 {
	// CLOCK_THREAD_CPUTIME_ID is 3 on Linux.
	return clockNS(3)
}

// processCPU is the process's CPU time in ns.
func processCPU() int64 {
	// CLOCK_PROCESS_CPUTIME_ID is 2 on Linux.
	return clockNS(2)
}

func clockNS(clock uintptr) int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

//go:noinline
func hot(x uint64) uint64 { return x*2654435761 + 1 }

//go:noinline
func work(rounds int) uint64 {
	x := uint64(rounds)
	for i := 0; i < rounds; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// lightWork and lightRounds are -lightwork and -lightrounds.
var lightWork, lightRounds int

//go:noinline
func light(n uint64, sleep time.Duration) uint64 {
	for i := 0; i < lightWork; i++ {
		sink.Store(work(lightRounds))
	}
	if sleep > 0 {
		time.Sleep(sleep)
	}
	return n + 1
}

// returner answers each pass on ping with one on pong.
func returner(ping <-chan uint64, pong chan<- uint64) {
	for v := range ping {
		pong <- v + 1
	}
}

func main() {
	hotOn := flag.Bool("hot", false, "run the hot loop")
	hotWait := flag.Bool("hotwait", false, "start the hot loop at the first SIGUSR1")
	hotToggle := flag.Bool("hottoggle", false, "each SIGUSR1 starts or pauses the hot loop (paused at first)")
	rounds := flag.Int("work", 0, "run the work loop, each call spinning this many rounds")
	lightEvery := flag.Duration("light", 0, "call main.light this often")
	lightSleep := flag.Duration("lightsleep", 0, "each call of main.light sleeps this long")
	switchOn := flag.Bool("switch", false, "run the ping-pong of two goroutines")
	spawnOn := flag.Bool("spawn", false, "start goroutines that end at once, in a loop")
	procs := flag.Int("procs", 0, "set GOMAXPROCS (0: leave it)")
	flag.IntVar(&lightWork, "lightwork", 0, "each call of main.light calls main.work this many times")
	flag.IntVar(&lightRounds, "lightrounds", 50000, "rounds of each call of main.work made by main.light")
	every := flag.Duration("every", 250*time.Millisecond, "how often to print the rates")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}

	if *hotOn {
		var start chan os.Signal
		if *hotWait {
			start = make(chan os.Signal, 1)
			signal.Notify(start, syscall.SIGUSR1)
		}
		// Toggling: paused says the loop is to pause after its batch;
		// resume wakes it.
		var paused atomic.Bool
		resume := make(chan struct{}, 1)
		if *hotToggle {
			paused.Store(true)
			start = make(chan os.Signal, 1)
			signal.Notify(start, syscall.SIGUSR1)
			go func() {
				for range start {
					if paused.Load() {
						paused.Store(false)
						resume <- struct{}{}
					} else {
						paused.Store(true)
					}
				}
			}()
		}
		go func() {
			runtime.LockOSThread()
			if *hotToggle {
				<-resume
				hotCPU.Store(threadCPU())
				fmt.Printf("hot started %d\n", clockNS(1))
			} else if start != nil {
				<-start
				hotCPU.Store(threadCPU())
				fmt.Println("hot started")
			}
			var x uint64
			for {
				if *hotToggle && paused.Load() {
					fmt.Printf("hot paused %d\n", clockNS(1))
					<-resume
					hotCPU.Store(threadCPU())
					fmt.Printf("hot started %d\n", clockNS(1))
				}
				// Counted in batches: an atomic add per call would be most
				// of the loop's time.
				for i := 0; i < 1024; i++ {
					x = hot(x)
				}
				hotCPU.Store(threadCPU())
				hotCalls.Add(1024)
				sink.Store(x)
			}
		}()
	}
	if *rounds > 0 {
		go func() {
			runtime.LockOSThread()
			for {
				sink.Store(work(*rounds))
				workCPU.Store(threadCPU())
				workCalls.Add(1)
			}
		}()
	}
	if *switchOn {
		ping, pong := make(chan uint64), make(chan uint64)
		go returner(ping, pong)
		go func() {
			var v uint64
			for {
				for i := 0; i < 1024; i++ {
					ping <- v
					v = <-pong
				}
				switchCPU.Store(processCPU())
				passes.Add(1024)
			}
		}()
	}
	if *spawnOn {
		go func() {
			var wg sync.WaitGroup
			for {
				for i := 0; i < 1024; i++ {
					wg.Add(1)
					go func() { wg.Done() }()
				}
				wg.Wait()
				spawnCPU.Store(processCPU())
				spawned.Add(1024)
			}
		}()
	}
	if *lightEvery > 0 {
		go func() {
			for {
				time.Sleep(*lightEvery)
				light(lightCalls.Load(), *lightSleep)
				fmt.Printf("light %d\n", lightCalls.Add(1))
			}
		}()
	}
	fmt.Println("READY")
	type loop struct {
		name  string
		calls *atomic.Uint64
		cpu   *atomic.Int64
		on    bool
	}
	loops := []loop{{"hot", &hotCalls, &hotCPU, *hotOn}, {"work", &workCalls, &workCPU, *rounds > 0}, {"switch", &passes, &switchCPU, *switchOn}, {"spawn", &spawned, &spawnCPU, *spawnOn}}
	last := make([]uint64, len(loops))
	lastCPU := make([]int64, len(loops))
	prev := time.Now()
	for range time.Tick(*every) {
		now := time.Now()
		for i, l := range loops {
			if !l.on {
				continue
			}
			// The count and the CPU time it was reached at: the CPU time
			// is stored first, so a count read after it is at least the
			// one it belongs to (off by a batch at most).
			cpu := l.cpu.Load()
			n := l.calls.Load()
			rate := float64(n-last[i]) / now.Sub(prev).Seconds()
			cpuRate := 0.0
			if cpu > lastCPU[i] {
				cpuRate = float64(n-last[i]) / (float64(cpu-lastCPU[i]) / 1e9)
			}
			last[i], lastCPU[i] = n, cpu
			fmt.Printf("rate %s %.0f %.0f %d %d\n", l.name, rate, cpuRate, n, cpu)
		}
		prev = now
		if sink.Load() == 42 {
			fmt.Fprintln(os.Stderr, "unlikely")
		}
	}
}
