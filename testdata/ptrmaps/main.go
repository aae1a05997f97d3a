// Command ptrmaps allocates heap objects of known types, one in each of
// the runtime's ways of saying which of their words hold pointers, keeps
// them, and prints the address of each before READY, then waits on
// stdin, for the tests of gi's reading of the runtime's pointer maps:
//
//	SMALL  a T{*int; uintptr; *int} (24 bytes: bits at the span's end, Go 1.22+)
//	SLICE  make([]T, 5) (120 bytes in a 128-byte slot)
//	TINY   a *int (8 bytes: size class 1)
//	HEADER an H{*int; [100]uintptr} (808 bytes: a malloc header before it)
//	LARGE  an L{*int; [5000]uintptr; *int} (a large object: mspan.largeType)
//	BIG    a B{[20000]*int; [20000]int; *int}: its mask a GC program before
//	       Go 1.24, built on demand since (BIG allocated before two
//	       collections, its mask built by them)
//	FRESH  an F, a B of a type of its own allocated after them: its mask
//	       not built
//
// Every object also holds pointers, and stale pointer-looking integers
// in its scalar words.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

type T struct {
	p *int
	n uintptr
	q *int
}

type H struct {
	p   *int
	pad [100]uintptr
}

type L struct {
	p   *int
	pad [5000]uintptr
	q   *int
}

type B struct {
	a [20000]*int
	b [20000]int
	c *int
}

// F is B again, a type of its own: no collection scans one (the one is
// allocated after the last), so Go 1.24+ has not built its mask.
type F B

var (
	small  *T
	slice  []T
	tiny   **int
	header *H
	large  *L
	big    *B
	fresh  *F
	target = new(int)
)

func main() {
	fake := uintptr(unsafe.Pointer(target))
	small = &T{p: target, n: fake, q: target}
	slice = make([]T, 5)
	for i := range slice {
		slice[i] = T{target, fake, target}
	}
	tiny = new(*int)
	*tiny = target
	header = &H{p: target}
	header.pad[0] = fake
	large = &L{p: target, q: target}
	large.pad[0] = fake
	big = new(B)
	big.a[0], big.c, big.b[0] = target, target, int(fake)
	runtime.GC()
	runtime.GC()
	fresh = new(F)
	fresh.a[1], fresh.c = target, target
	for _, o := range []struct {
		name string
		p    unsafe.Pointer
	}{{"SMALL", unsafe.Pointer(small)}, {"SLICE", unsafe.Pointer(&slice[0])}, {"TINY", unsafe.Pointer(tiny)}, {"HEADER", unsafe.Pointer(header)},
		{"LARGE", unsafe.Pointer(large)}, {"BIG", unsafe.Pointer(big)}, {"FRESH", unsafe.Pointer(fresh)}} {
		fmt.Printf("%s %#x\n", o.name, uintptr(o.p))
	}
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(target)
}
