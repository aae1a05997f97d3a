package hugemem

import (
	"testing"
	"unsafe"
)

// TestPopulated maps sizes below, at and above a huge page: n zero,
// writable bytes aligned to a huge page (Linux 5.14+), inside the
// mapping to unmap.
func TestPopulated(t *testing.T) {
	for _, n := range []int{1, 4096, PageSize, 3*PageSize + 123} {
		buf, whole, ok := Populated(n)
		if !ok {
			t.Fatalf("Populated(%d) refused", n)
		}
		if len(buf) != n || cap(buf) != n {
			t.Fatalf("Populated(%d): len %d cap %d", n, len(buf), cap(buf))
		}
		start := uintptr(unsafe.Pointer(&buf[0]))
		lo, hi := uintptr(unsafe.Pointer(&whole[0])), uintptr(unsafe.Pointer(&whole[0]))+uintptr(len(whole))
		aligned := len(whole) == n || start%PageSize == 0 // before Linux 5.14: a plain populated mapping
		if !aligned || start < lo || start+uintptr(n) > hi {
			t.Errorf("Populated(%d) at %#x: not aligned to a huge page, or outside its mapping [%#x, %#x)", n, start, lo, hi)
		}
		for i := 0; i < n; i += 4096 {
			if buf[i] != 0 {
				t.Fatalf("Populated(%d): byte %d is %d", n, i, buf[i])
			}
			buf[i] = 1
		}
	}
}
