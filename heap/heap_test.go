package heap_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gi-debug/gi/heap"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestHeapHoldsTargetObjects walks the heap of a target that allocated
// and keeps objects of known sizes, and prints their addresses: each of
// its 4000-byte objects is the start of an allocated slot of a
// 4096-byte span, its 1 MiB object the one allocated slot of a span of
// its own, and the 4096-byte spans hold at least as many allocated
// objects as it keeps. Default and PIE builds of each Go release under
// test (nelems and freeindex change width in Go 1.22, mheap_'s arena
// list its name in 1.25), and stripped ones (the layout from the
// generated table, runtime.mheap_ found in the runtime's code).
func TestHeapHoldsTargetObjects(t *testing.T) {
	targets.RequirePrivilege(t, "reading another process's memory")
	for _, tc := range targets.Toolchains() {
		for _, opts := range []targets.BuildOptions{{Toolchain: tc}, {Toolchain: tc, PIE: true}, {Toolchain: tc, Stripped: true}} {
			t.Run(opts.String(), func(t *testing.T) {
				p := targets.Start(t, targets.Build(t, "heapobjs", opts), "-n", "1000")
				var small []uint64
				var large uint64
				count := 0
				for _, line := range p.Lines() {
					f := strings.Fields(line)
					if len(f) != 2 {
						continue
					}
					v, err := strconv.ParseUint(f[1], 0, 64)
					if err != nil {
						continue
					}
					switch f[0] {
					case "SMALL":
						small = append(small, v)
					case "LARGE":
						large = v
					case "COUNT":
						count = int(v)
					}
				}
				if len(small) == 0 || large == 0 || count != 1000 {
					t.Fatalf("the target printed %d small objects, large %#x, count %d", len(small), large, count)
				}
				pr, layout := openProcess(t, p.Pid)
				h, err := heap.Read(pr.Mem, layout, pr.Exe.Arch, pr.Bias, heap.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				objects := 0
				for i := range h.Spans {
					if s := &h.Spans[i]; s.ElemSize == 4096 {
						objects += s.AllocatedCount()
					}
				}
				t.Logf("%d spans; %d allocated objects of 4096 bytes", len(h.Spans), objects)
				if objects < count {
					t.Errorf("%d allocated objects in 4096-byte spans, the target keeps %d", objects, count)
				}
				for _, a := range small {
					s, ok := h.SpanOf(a)
					if !ok {
						t.Errorf("object %#x: in no span", a)
						continue
					}
					slot, start, ok := s.Object(a)
					if !ok || start != a || s.ElemSize != 4096 || !s.Allocated(slot) || s.Noscan != true || s.Class == 0 {
						t.Errorf("object %#x: span %+v, slot %d at %#x (allocated %v); want the start of an allocated noscan 4096-byte slot", a, *s, slot, start, s.Allocated(slot))
					}
				}
				s, ok := h.SpanOf(large)
				if !ok || s.Start != large || s.NElems != 1 || s.Class != 0 || s.Pages*h.PageSize < 1<<20 || !s.Allocated(0) {
					t.Errorf("large object %#x: span %+v, %v; want a span of its own, one allocated slot", large, s, ok)
				}
			})
		}
	}
}

// TestHeapWithoutMHeap: a layout that does not know where runtime.mheap_
// is says so (ErrNoHeapLayout) rather than guess.
func TestHeapWithoutMHeap(t *testing.T) {
	l := &runtimelayout.HeapLayout{Known: true, PageSize: 8192, HeapArenaBytes: 64 << 20}
	if _, err := heap.Read(nil, l, "amd64", 0, heap.Limits{}); !errors.Is(err, heap.ErrNoHeapLayout) {
		t.Errorf("%v, want ErrNoHeapLayout", err)
	}
	if _, err := heap.Read(nil, &runtimelayout.HeapLayout{Reason: "no DWARF"}, "amd64", 0, heap.Limits{}); !errors.Is(err, heap.ErrNoHeapLayout) {
		t.Errorf("%v, want ErrNoHeapLayout", err)
	}
}

// openProcess opens process pid until the test ends, and returns its
// heap layout.
func openProcess(t *testing.T, pid int) (*proc.Process, *runtimelayout.HeapLayout) {
	t.Helper()
	pr, err := proc.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	layout, _, err := pr.RuntimeLayout()
	if err != nil {
		t.Fatal(err)
	}
	return pr, &layout.Heap
}
