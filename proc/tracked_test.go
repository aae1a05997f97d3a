package proc

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestTracked reads pages of this process through Track while it "runs",
// writes some of them, and checks that Sync reads again exactly those
// (soft-dirty) — the kept copy, views included, is then the memory as it
// is — and leaves the others as they were read.
func TestTracked(t *testing.T) {
	if err := softDirtyOnce(); errors.Is(err, ErrNoSoftDirty) {
		t.Skipf("%v: gi ps --leaks copies the heap in the stop here", err)
	}
	m, err := OpenMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const pages = 8
	// Between two guard pages: a mapping the runtime makes next to it
	// while the test runs cannot merge with it (a merged mapping reports
	// every page soft-dirty: the emulated 6.1 kernel's Sync read all 7).
	guarded, err := unix.Mmap(-1, 0, (pages+2)*pageSize, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(guarded)
	mem := guarded[pageSize : (pages+1)*pageSize]
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i / pageSize)
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	// Allocated before the tracking begins: nothing grows the heap
	// between Track and Sync.
	buf := make([]byte, 4*pageSize)
	tr, err := Track(os.Getpid(), m)
	if err != nil {
		t.Fatal(err)
	}
	// Pages 0-3 through ReadBatch (one range), 5 and 6 through ReadAt.
	if err := tr.ReadBatch([]Range{{Addr: base, Len: 4 * pageSize}}, buf); err != nil {
		t.Fatal(err)
	}
	var w [16]byte
	if _, err := tr.ReadAt(w[:], base+5*pageSize+100); err != nil || w[0] != 5 {
		t.Fatalf("ReadAt: %v %v", w, err)
	}
	if _, err := tr.ReadAt(w[:], base+7*pageSize-8); err != nil || w[0] != 6 || w[8] != 7 {
		t.Fatalf("ReadAt across pages: %v %v", w, err)
	}
	view := tr.View(base, 4*pageSize)
	if view == nil || !bytes.Equal(view, mem[:4*pageSize]) {
		t.Fatal("the view is not what was read")
	}
	// The process writes pages 1 and 5, and page 4, which was not read.
	mem[pageSize+10], mem[5*pageSize+100], mem[4*pageSize] = 0xaa, 0xbb, 0xcc
	if view[pageSize+10] != 1 {
		t.Fatal("the view changed before Sync")
	}
	if err := tr.Sync(); err != nil {
		t.Fatal(err)
	}
	if tr.Dirty != 2 || tr.Synced != 4+3 {
		t.Errorf("Sync read again %d of %d pages, want 2 of 7", tr.Dirty, tr.Synced)
	}
	if !bytes.Equal(view, mem[:4*pageSize]) {
		t.Error("the view is not the memory after Sync")
	}
	if _, err := tr.ReadAt(w[:], base+5*pageSize+100); err != nil || w[0] != 0xbb {
		t.Errorf("ReadAt after Sync: %#x %v, want 0xbb", w[0], err)
	}
	if _, err := tr.ReadAt(w[:1], base+4*pageSize); err != nil || w[0] != 0xcc {
		t.Errorf("ReadAt of a page not read before: %#x %v", w[0], err)
	}
}
