package proc

import (
	"errors"
	"math/rand"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pagesAroundHole maps three pages of this process filled with byte(i*mul)
// and unmaps the middle one (/proc/pid/mem reads even PROT_NONE pages, so
// only an unmapped page is unreadable); the rest are unmapped when the test
// ends. mem[page:2*page] must not be touched.
func pagesAroundHole(t *testing.T, mul int) (mem []byte, base uint64) {
	t.Helper()
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i * mul)
	}
	base = uint64(uintptr(unsafe.Pointer(&mem[0])))
	if _, _, errno := unix.Syscall(unix.SYS_MUNMAP, uintptr(base)+uintptr(page), uintptr(page), 0); errno != 0 {
		t.Fatal(errno)
	}
	t.Cleanup(func() {
		unix.Syscall(unix.SYS_MUNMAP, uintptr(base), uintptr(page), 0)
		unix.Syscall(unix.SYS_MUNMAP, uintptr(base)+uintptr(2*page), uintptr(page), 0)
	})
	return mem, base
}

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
	mem, base := pagesAroundHole(t, 7)

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

// TestReadBatchAdjacentRuns reads ranges that follow each other in memory,
// as the g structs of one heap span do: they are read as one iovec, and a
// run that runs into an unmapped page still gives every range before the
// hole and fails only the ranges in it.
func TestReadBatchAdjacentRuns(t *testing.T) {
	m, err := OpenMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	page := os.Getpagesize()
	mem, base := pagesAroundHole(t, 13)
	big := make([]byte, 4<<20)
	rand.New(rand.NewSource(3)).Read(big)
	bigBase := uint64(uintptr(unsafe.Pointer(&big[0])))

	var ranges []Range
	var want [][]byte
	// 3000 g-sized ranges back to back (more than one system call's iovecs
	// if they were not merged), then a gap, then more.
	const gsize = 448
	for i := 0; i < 3000; i++ {
		ranges = append(ranges, Range{Addr: bigBase + uint64(i*gsize), Len: gsize})
		want = append(want, big[i*gsize:(i+1)*gsize])
	}
	for i := 0; i < 10; i++ {
		off := 3_000_000 + i*gsize
		ranges = append(ranges, Range{Addr: bigBase + uint64(off), Len: gsize})
		want = append(want, big[off:off+gsize])
	}
	// A run into the hole: the three before it read, the two in it fail,
	// the one after it reads.
	for i := 3; i >= 1; i-- {
		ranges = append(ranges, Range{Addr: base + uint64(page-32*i), Len: 32})
		want = append(want, mem[page-32*i:page-32*(i-1)])
	}
	ranges = append(ranges, Range{Addr: base + uint64(page), Len: 32}, Range{Addr: base + uint64(page+32), Len: 32})
	want = append(want, nil, nil)
	ranges = append(ranges, Range{Addr: base + uint64(2*page), Len: 64})
	want = append(want, mem[2*page:2*page+64])

	total := 0
	for _, r := range ranges {
		total += r.Len
	}
	dst := make([]byte, total)
	err = m.readInOrder(ranges, dst) // one reader: the runs stay whole
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed[0] != len(ranges)-3 || be.Failed[1] != len(ranges)-2 {
		t.Fatalf("want the two ranges in the hole failed, got %v", err)
	}
	off := 0
	for i, r := range ranges {
		got := dst[off : off+r.Len]
		off += r.Len
		if want[i] != nil && string(got) != string(want[i]) {
			t.Fatalf("range %d (%#x+%d): wrong bytes", i, r.Addr, r.Len)
		}
	}
}
