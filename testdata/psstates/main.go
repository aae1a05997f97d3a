// Command psstates parks goroutines in every common state, takes its own
// goroutine dump with the runtime (the ground truth gi is compared with),
// prints where it wrote it, and then holds still.
//
// Lines printed on stdout, in order: "DUMPER <goid>", "DUMPDURATION <ns>",
// "DUMP <path>", "READY".
//
// With -felt, a goroutine measures the pauses the process feels (the
// longest gap between two of its 200 µs sleeps; see gapMeter) and
// commands on stdin are answered by one "DONE" line:
//
//	gap [FROM TO]  the longest gap since the previous gap command (or the
//	               start), and the longest overlapping [FROM, TO] (Unix ns):
//	               "DONE gap max_ns=N in_ns=M"
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

var (
	dumpPath = flag.String("dump", "", "where to write the runtime's goroutine dump (default: a temporary file)")
	park     = flag.Int("park", 1000, "goroutines parked on a channel in main.parked")
	parkOn   = flag.String("park-on", "chan", `what the parked goroutines wait on: "chan" (main.parked) or "cond", one sync.Cond (main.parkedOnCond)`)
	depth    = flag.Int("depth", 300, "recursion depth of main.recurse")
	spinners = flag.Int("spin", 3, "goroutines spinning in main.spin (more than CPUs leaves some runnable)")
	felt     = flag.Bool("felt", false, "measure the longest gap between 200 µs sleeps (main.gapMeter) and answer \"gap\" on stdin")
)

var (
	never   = make(chan int) // nobody ever sends on it
	noRecv  = make(chan int) // nobody ever receives from it
	noSel   = make(chan int) // used by the select only
	mu      sync.Mutex
	rw      sync.RWMutex
	cond    = sync.NewCond(&sync.Mutex{})
	wg      sync.WaitGroup
	sink    int
	started sync.WaitGroup
)

//go:noinline
func parked(i int) {
	started.Done()
	<-never
	sink = i
}

var (
	parkMu   sync.Mutex
	parkCond = sync.NewCond(&parkMu)
)

//go:noinline
func parkedOnCond(i int) {
	parkMu.Lock()
	started.Done()
	for {
		parkCond.Wait() // nobody ever signals it
	}
}

//go:noinline
func sender() {
	started.Done()
	noRecv <- 1
}

//go:noinline
func selecter() {
	started.Done()
	select {
	case <-noSel:
	case noSel <- 2:
	}
}

//go:noinline
func mutexWaiter() {
	started.Done()
	mu.Lock()
	sink++
	mu.Unlock()
}

//go:noinline
func rwWriter() {
	started.Done()
	rw.Lock()
	sink++
	rw.Unlock()
}

//go:noinline
func condWaiter() {
	cond.L.Lock()
	started.Done()
	cond.Wait()
	cond.L.Unlock()
}

//go:noinline
func wgWaiter() {
	started.Done()
	wg.Wait()
}

//go:noinline
func sleeper() {
	started.Done()
	time.Sleep(24 * time.Hour)
}

//go:noinline
func ioWaiter(ln net.Listener) {
	started.Done()
	c, err := ln.Accept()
	if err == nil {
		c.Close()
	}
}

//go:noinline
func rawRead(fd int) {
	started.Done()
	var b [1]byte
	syscall.Read(fd, b[:]) // blocking read on a blocking pipe: the syscall state
}

//go:noinline
func locked() {
	runtime.LockOSThread()
	started.Done()
	<-never
}

//go:noinline
func labelled() {
	pprof.Do(context.Background(), pprof.Labels("worker", "w1", "shard", "3"), func(context.Context) {
		started.Done()
		<-never
	})
}

// waitOn is inlined into its caller: the dump shows it as main.waitOn(...).
func waitOn(c chan int) int { return <-c }

//go:noinline
func withInlined() {
	started.Done()
	sink = waitOn(never)
}

//go:noinline
func spawner() {
	started.Add(1)
	go child()
	<-never
}

//go:noinline
func child() {
	started.Done()
	<-never
}

//go:noinline
func recurse(n int) int {
	if n == 0 {
		started.Done()
		<-never
		return 0
	}
	return recurse(n-1) + 1
}

//go:noinline
func spin(i int) {
	started.Done()
	x := i
	for {
		x = x*1664525 + 1013904223
		if x == 42 {
			sink = x
		}
	}
}

// gapSleep is the sleep of gapMeter.
var gapSleep = syscall.Timespec{Nsec: 200_000}

// gapRing holds the gaps gapMeter saw longer than minGap since the last
// "gap" command (the latest maxGaps of them), as Unix nanoseconds: when
// each began and ended.
const (
	minGap  = int64(time.Millisecond)
	maxGaps = 4096
)

var gapRing struct {
	sync.Mutex
	gaps    [][2]int64
	longest int64
}

// gapMeter measures the pauses the process feels: it sleeps 200 µs at a
// time and records the time between two wake-ups. A stop of the whole
// process (gi's) shows as one gap at least as long as the stop was for this
// thread. It sleeps in the system call itself, on its own thread and
// keeping its P (a raw nanosleep; main gives it a P of its own), so that
// the Go scheduler, whose Ps the spinners keep busy, delays its wake-ups
// only when it preempts it (every 10 ms); the kernel's scheduling latency
// with the spinners on every CPU remains. The benchmark measures both as a
// baseline: the longest gap in a window without gi.
func gapMeter() {
	runtime.LockOSThread()
	last := time.Now()
	for {
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&gapSleep)), 0, 0)
		now := time.Now()
		gap := int64(now.Sub(last))
		if gap >= minGap {
			gapRing.Lock()
			if len(gapRing.gaps) == maxGaps {
				gapRing.gaps = append(gapRing.gaps[:0], gapRing.gaps[1:]...)
			}
			gapRing.gaps = append(gapRing.gaps, [2]int64{last.UnixNano(), now.UnixNano()})
			gapRing.Unlock()
		}
		gapRing.Lock()
		if gap > gapRing.longest {
			gapRing.longest = gap
		}
		gapRing.Unlock()
		last = now
	}
}

// gapReport answers "gap [FROM TO]": the longest gap since the previous
// command, and with FROM and TO (Unix ns) the longest that overlaps
// [FROM, TO] (0 if none was 1 ms or more); then it forgets them.
func gapReport(args []string) string {
	gapRing.Lock()
	defer gapRing.Unlock()
	out := fmt.Sprintf("DONE gap max_ns=%d", gapRing.longest)
	if len(args) == 2 {
		from, _ := strconv.ParseInt(args[0], 10, 64)
		to, _ := strconv.ParseInt(args[1], 10, 64)
		var in int64
		for _, g := range gapRing.gaps {
			if g[0] <= to && g[1] >= from && g[1]-g[0] > in {
				in = g[1] - g[0]
			}
		}
		out += fmt.Sprintf(" in_ns=%d", in)
	}
	gapRing.gaps, gapRing.longest = gapRing.gaps[:0], 0
	return out
}

// commands answers the commands on stdin (with -felt).
func commands() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "gap":
			fmt.Println(gapReport(f[1:]))
		default:
			fmt.Println("DONE error unknown command", f[0])
		}
	}
}

// withTracebackLabels re-executes the program with GODEBUG
// tracebacklabels=1, so that the runtime's own dump prints pprof labels
// (Go 1.26+; older releases ignore the setting) and gi's --stacks can be
// compared with it label for label. The pid stays the same.
func withTracebackLabels() {
	if strings.Contains(os.Getenv("GODEBUG"), "tracebacklabels=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	env, godebug := []string{}, "tracebacklabels=1"
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok && v != "" {
			godebug = v + "," + godebug
			continue
		}
		env = append(env, kv)
	}
	syscall.Exec(exe, os.Args, append(env, "GODEBUG="+godebug)) // returns only on failure
}

func main() {
	withTracebackLabels()
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mu.Lock()
	rw.RLock()
	wg.Add(1)

	launch := func(f func()) {
		started.Add(1)
		go f()
	}
	for i := 0; i < *park; i++ {
		i := i
		if *parkOn == "cond" {
			launch(func() { parkedOnCond(i) })
			continue
		}
		launch(func() { parked(i) })
	}
	launch(sender)
	launch(selecter)
	launch(mutexWaiter)
	launch(rwWriter)
	launch(condWaiter)
	launch(wgWaiter)
	launch(sleeper)
	launch(func() { ioWaiter(ln) })
	launch(func() { rawRead(fds[0]) })
	launch(locked)
	launch(labelled)
	launch(withInlined)
	go spawner()
	launch(func() { recurse(*depth) })
	for i := 0; i < *spinners; i++ {
		i := i
		launch(func() { spin(i) })
	}
	go dumper()
	select {}
}

// dumper waits for every goroutine to block, takes the runtime's dump,
// reports it, and exits so that it is not part of what gi sees.
func dumper() {
	started.Wait()
	// Let every goroutine reach its blocking call, then keep the garbage
	// collector from changing anything between the dump and gi's snapshot.
	time.Sleep(300 * time.Millisecond)
	// Two collections: the runtime records g.waitsince (what the dump's
	// "N minutes" and gi's WAIT come from) at the first GC that sees a
	// goroutine blocked, with the start time of the previous GC, which is
	// 0 before any GC has finished.
	runtime.GC()
	runtime.GC()
	debug.SetGCPercent(-1)

	path := *dumpPath
	if path == "" {
		f, err := os.CreateTemp("", "psstates-dump-*.txt")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f.Close()
		path = f.Name()
	}
	var buf bytes.Buffer
	start := time.Now()
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	took := time.Since(start)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("DUMPER " + strconv.FormatInt(goid(), 10))
	fmt.Println("DUMPDURATION " + strconv.FormatInt(took.Nanoseconds(), 10))
	fmt.Println("DUMP " + path)
	if *felt {
		// After the dump: the runtime's own stop is not a pause to report.
		// A P for the meter, which keeps its own.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
		go gapMeter()
		go commands()
	}
	fmt.Println("READY")
}

// goid parses the current goroutine's id from its own stack header.
func goid() int64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	id, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return id
}
