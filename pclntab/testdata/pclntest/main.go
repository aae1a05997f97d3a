// Command pclntest reports what the Go runtime itself knows about its own
// stacks, for pclntab's tests (and elfbin's) to compare against a static
// decoding of the same binary.
//
// Without arguments it prints, for a set of call sites (inlined calls, deep
// nesting, closures, methods, wrappers, generics, panics, goroutines), the raw
// runtime.Callers pcs and what runtime.CallersFrames makes of them:
//
//	FUNC\t<label>\t<entry>\t<name>            runtime.FuncForPC of a function value
//	STACK <tag>                                a call site
//	PC <pc> <entry of runtime.FuncForPC(pc-1)> one line per runtime.Callers pc
//	FRAME <pc> <entry> <startline> <function>\t<file>\t<line>
//	END
//
// With -panic it prints the FUNC line of main.main and then panics from a
// deep call with goroutines parked in various ways, so that a run with
// GOTRACEBACK=system prints every physical frame's pc, sp and fp.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

var out = bufio.NewWriter(os.Stdout)

// sink defeats dead-code elimination.
var sink int

//go:noinline
func record(tag string) int {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(0, pcs)
	dump(tag, pcs[:n])
	return n
}

// capture is small enough to be inlined: runtime.Callers's caller is then an
// inlined frame.
func capture(tag string) int {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(1, pcs)
	dump(tag, pcs[:n])
	return n
}

func dump(tag string, pcs []uintptr) {
	fmt.Fprintf(out, "STACK %s\n", tag)
	for _, pc := range pcs {
		var entry uintptr
		if f := runtime.FuncForPC(pc - 1); f != nil {
			entry = f.Entry()
		}
		fmt.Fprintf(out, "PC %#x %#x\n", pc, entry)
	}
	frames := runtime.CallersFrames(pcs)
	for {
		fr, more := frames.Next()
		fmt.Fprintf(out, "FRAME %#x %#x %d %s\t%s\t%d\n", fr.PC, fr.Entry, startLine(fr), fr.Function, fr.File, fr.Line)
		if !more {
			break
		}
	}
	fmt.Fprintf(out, "END\n")
}

// startLine returns Frame.startLine, which is unexported; 0 if unknown.
func startLine(fr runtime.Frame) int {
	v := reflect.ValueOf(fr).FieldByName("startLine")
	if !v.IsValid() {
		return 0
	}
	return int(v.Int())
}

func funcLine(name string, fn interface{}) {
	pc := reflect.ValueOf(fn).Pointer()
	f := runtime.FuncForPC(pc)
	fmt.Fprintf(out, "FUNC\t%s\t%#x\t%s\n", name, f.Entry(), f.Name())
}

// An inlined chain: leaf, mid and top are all inlined into physical.
func leaf(tag string) int { return record(tag) + 1 }
func mid(tag string) int  { return leaf(tag) * 2 }
func top(tag string) int  { return mid(tag) - 3 }

//go:noinline
func physical(tag string) int { return top(tag) }

// captureChain inlines capture (and so runtime.Callers's direct caller).
func captureLeaf(tag string) int { return capture(tag) + 1 }
func captureMid(tag string) int  { return captureLeaf(tag) + 2 }

//go:noinline
func capturePhysical(tag string) int { return captureMid(tag) }

//go:noinline
func recurse(depth int, tag string) int {
	if depth == 0 {
		return top(tag)
	}
	return recurse(depth-1, tag) + mid("x"+tag)*0 + 1
}

type point struct{ x, y int }

//go:noinline
func (p point) value(tag string) int { return record(tag) + p.x }

//go:noinline
func (p *point) ptr(tag string) int { return leaf(tag) + p.y }

// inl is an inlinable method.
func (p point) inl(tag string) int { return leaf(tag) + p.x }

type valuer interface{ value(string) int }

//go:noinline
func apply(f func(string) int, tag string) int { return f(tag) }

//go:noinline
func callIface(v valuer, tag string) int { return v.value(tag) }

//go:noinline
func gen[T any](v T, tag string) int {
	_ = v
	return leaf(tag)
}

type key struct {
	name string
	n    int
}

var keys = map[key]int{}

//go:noinline
func nilWrapper() (n int) {
	defer func() {
		if recover() != nil {
			n = record("panicwrap")
		}
	}()
	var p *point
	return callIface(p, "unreachable")
}

//go:noinline
func nilDeref(p *point) (n int) {
	defer func() {
		if recover() != nil {
			n = record("sigpanic")
		}
	}()
	return p.x + 1
}

//go:noinline
func deferred() int {
	defer leaf("defer")
	defer func() { sink += record("defer-closure") }()
	return 1
}

//go:noinline
func explicitPanic() (n int) {
	defer func() {
		if e := recover(); e != nil {
			n = mid("recover")
		}
	}()
	panic(errors.New("boom"))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-panic" {
		crash()
		return
	}
	funcLine("main.main", main)
	funcLine("main.physical", physical)
	funcLine("main.record", record)
	p := point{1, 2}
	funcLine("method value", p.value)
	funcLine("ptr method value", (&p).ptr)
	closure := func(tag string) int { return top(tag) + p.x }
	funcLine("closure", closure)
	funcLine("generic", gen[int])

	sink += physical("inlined-chain")
	sink += capturePhysical("inlined-capture")
	sink += recurse(20, "deep")
	sink += p.value("value-method")
	sink += (&p).ptr("pointer-method")
	sink += p.inl("inlined-method")
	sink += apply(p.value, "method-value")
	sink += apply((&p).ptr, "ptr-method-value")
	sink += apply(closure, "closure")
	sink += func(tag string) int { return leaf(tag) }("inlined-closure")
	sink += callIface(p, "iface-value")
	sink += callIface(&p, "iface-pointer-wrapper")
	sink += gen(1, "generic-int")
	sink += gen("s", "generic-string")
	sink += nilWrapper()
	sink += nilDeref(nil)
	sink += deferred()
	sink += explicitPanic()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sink += top("goroutine")
	}()
	wg.Wait()
	// Use struct keys so that the compiler generates type:.eq.main.key.
	keys[key{"a", 1}]++
	if keys[key{"a", 1}] != 1 || (key{"a", 1}) == (key{strings.Repeat("a", sink&1), 2}) {
		os.Exit(3)
	}
	sortStack()
	out.Flush()
}

type bySink []int

func (b bySink) Len() int           { return len(b) }
func (b bySink) Less(i, j int) bool { return b[i] < b[j] && record("sort-less") > 0 }
func (b bySink) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }

// sortStack records a stack through sort.Sort's interface calls.
func sortStack() {
	s := bySink{2, 1}
	sort.Sort(s)
}

// crash parks goroutines in various ways and panics from a deep call.
func crash() {
	funcLine("main.main", main)
	out.Flush()
	var mu sync.Mutex
	mu.Lock()
	ch := make(chan int)
	ready := make(chan bool)
	go func() { ready <- true; <-ch }()
	go func() { ready <- true; mu.Lock() }()
	go func() {
		ready <- true
		select {
		case <-ch:
		case <-time.After(time.Hour):
		}
	}()
	go func() { ready <- true; time.Sleep(time.Hour) }()
	go func() { ready <- true; recurseBlock(10, ch) }()
	for i := 0; i < 5; i++ {
		<-ready
	}
	time.Sleep(50 * time.Millisecond)
	recursePanic(8)
}

//go:noinline
func recurseBlock(depth int, ch chan int) int {
	if depth == 0 {
		return <-ch
	}
	return recurseBlock(depth-1, ch) + 1
}

//go:noinline
func recursePanic(depth int) int {
	if depth == 0 {
		return top2()
	}
	return recursePanic(depth-1) + 1
}

func top2() int { return mid2() + 1 }
func mid2() int { return boom() * 2 }

//go:noinline
func boom() int {
	var a [64]int
	for i := range a {
		a[i] = i + sink
	}
	panic(fmt.Sprintf("pclntest: deliberate panic %d", a[sink&63]))
}
