// Command heapobjs allocates objects of known sizes and keeps them, for
// the tests of gi's heap walk: -n objects of 4000 bytes (the 4096-byte
// size class), one of 1 MiB (a large object, its own span), and prints
// the address of each before READY ("SMALL <addr>" for the first few,
// "LARGE <addr>", "COUNT <n>"), then waits on stdin.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

type object [4000]byte

var (
	small []*object
	large *[1 << 20]byte
)

func main() {
	n := flag.Int("n", 1000, "objects of 4000 bytes to keep")
	flag.Parse()
	for i := 0; i < *n; i++ {
		o := new(object)
		o[0] = byte(i)
		small = append(small, o)
	}
	large = new([1 << 20]byte)
	large[0] = 1
	runtime.GC() // the heap settled: nothing of ours is freed, and no sweep is pending on it
	runtime.GC()
	for i := 0; i < len(small) && i < 8; i++ {
		fmt.Printf("SMALL %#x\n", uintptr(unsafe.Pointer(small[i])))
	}
	fmt.Printf("SMALL %#x\n", uintptr(unsafe.Pointer(small[len(small)-1])))
	fmt.Printf("LARGE %#x\n", uintptr(unsafe.Pointer(large)))
	fmt.Printf("COUNT %d\n", len(small))
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	runtime.KeepAlive(small)
	runtime.KeepAlive(large)
}
