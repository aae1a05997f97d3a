package ptrace

import (
	"errors"
	"math/rand"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestReadBatch reads this process's own memory through ReadBatch: many
// scattered ranges (coalesced and read in parallel), ranges next to an
// unmapped hole, and ranges that cannot be read at all.
func TestReadBatch(t *testing.T) {
	m, err := OpenMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	// Punch a hole: unmap the middle page (/proc/pid/mem reads even
	// PROT_NONE pages, so only an unmapped page is unreadable).
	if _, _, errno := unix.Syscall(unix.SYS_MUNMAP, uintptr(base)+uintptr(page), uintptr(page), 0); errno != 0 {
		t.Fatal(errno)
	}
	defer func() {
		unix.Syscall(unix.SYS_MUNMAP, uintptr(base), uintptr(page), 0)
		unix.Syscall(unix.SYS_MUNMAP, uintptr(base)+uintptr(2*page), uintptr(page), 0)
	}()

	big := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(big)
	bigBase := uint64(uintptr(unsafe.Pointer(&big[0])))

	var ranges []Range
	var want [][]byte
	var wantFailed []int
	add := func(addr uint64, n int, data []byte) {
		if data == nil {
			wantFailed = append(wantFailed, len(ranges))
		}
		ranges = append(ranges, Range{Addr: addr, Len: n})
		want = append(want, data)
	}
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 5000; i++ {
		off := r.Intn(len(big) - 600)
		n := r.Intn(500)
		add(bigBase+uint64(off), n, big[off:off+n])
	}
	add(base+uint64(page)-64, 64, mem[page-64:page])    // just before the hole
	add(base+uint64(2*page), 64, mem[2*page:2*page+64]) // just after it
	add(base+uint64(page)-32, 64, nil)                  // across its start
	add(base+uint64(page)+100, 10, nil)                 // inside it
	add(0x10, 8, nil)                                   // never mapped
	add(bigBase+100, 0, []byte{})                       // empty
	r.Shuffle(len(ranges), func(i, j int) {
		ranges[i], ranges[j] = ranges[j], ranges[i]
		want[i], want[j] = want[j], want[i]
	})
	wantFailed = wantFailed[:0]
	total := 0
	for i, w := range want {
		if w == nil {
			wantFailed = append(wantFailed, i)
		}
		total += ranges[i].Len
	}
	dst := make([]byte, total)
	err = m.ReadBatch(ranges, dst)
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("want a *BatchError, got %v", err)
	}
	if len(be.Failed) != len(wantFailed) {
		t.Fatalf("failed ranges %v, want %v", be.Failed, wantFailed)
	}
	for i := range wantFailed {
		if be.Failed[i] != wantFailed[i] {
			t.Fatalf("failed ranges %v, want %v", be.Failed, wantFailed)
		}
	}
	off := 0
	for i, rg := range ranges {
		got := dst[off : off+rg.Len]
		off += rg.Len
		if want[i] == nil {
			continue
		}
		if string(got) != string(want[i]) {
			t.Fatalf("range %d (%#x+%d): wrong bytes", i, rg.Addr, rg.Len)
		}
	}
}

func TestReadAtErrors(t *testing.T) {
	m, err := OpenMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var b [8]byte
	if _, err := m.ReadAt(b[:], 0x10); err == nil {
		t.Error("reading address 0x10 succeeded")
	}
	if _, err := m.ReadAt(b[:], 1<<63+5); err == nil {
		t.Error("reading a non-canonical address succeeded")
	}
	if _, err := OpenMemory(999999999); !errors.Is(err, ErrNoSuchProcess) {
		t.Errorf("missing pid: %v", err)
	}
}
