package hugemem

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
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

// TestLazy maps 64 MiB lazily: zero, writable, and resident only where
// written.
func TestLazy(t *testing.T) {
	const n = 64 << 20
	buf, whole, ok := Lazy(n)
	if !ok {
		t.Fatal("Lazy refused")
	}
	defer unix.Munmap(whole)
	if len(buf) != n {
		t.Fatalf("Lazy(%d): %d bytes", n, len(buf))
	}
	// Nothing is resident before it is written; what is written is.
	if r := resident(t, buf); r != 0 {
		t.Errorf("%d pages resident before any write", r)
	}
	for i := 0; i < n/2; i += 4096 {
		if buf[i] != 0 {
			t.Fatalf("byte %d is %d", i, buf[i])
		}
		buf[i] = 1
	}
	if r := resident(t, buf); r != n/2/4096 {
		t.Errorf("%d pages resident after writing %d", r, n/2/4096)
	}
}

// resident counts the resident pages of b (mincore).
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
