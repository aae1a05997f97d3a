package heap_test

import (
	"debug/elf"
	"errors"
	"fmt"
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

// TestPointersOfTargetObjects reads, in the heap of testdata/ptrmaps,
// the runtime's pointer map of one object of each kind it keeps them
// for — a 24-byte T{*int; uintptr; *int}, a []T of five, a *int, an
// object with a malloc header, a large one, and a large one whose mask
// is a GC program (Go 1.20-1.23) or built on demand (1.24+: once built
// by a collection, once maybe not) — and checks it word by word against
// the types: on every release under test, default, PIE and stripped,
// and the experiments that move the maps (Go 1.21's arena bitmap, 1.22
// with noallocheaders, 1.25 with greenteagc, 1.26 with nogreenteagc).
// Where the binary does not say enough (a stripped build of an
// experiment the generated table lacks) the map is unknown, and says
// why: the walk then scans conservatively.
func TestPointersOfTargetObjects(t *testing.T) {
	targets.RequirePrivilege(t, "reading another process's memory")
	var builds []targets.BuildOptions
	for _, tc := range targets.Toolchains() {
		builds = append(builds, targets.BuildOptions{Toolchain: tc}, targets.BuildOptions{Toolchain: tc, PIE: true}, targets.BuildOptions{Toolchain: tc, Stripped: true})
	}
	for _, o := range []targets.BuildOptions{{Toolchain: "go1.21.13"}, {Toolchain: "go1.22.12", Experiment: "noallocheaders"}, {Toolchain: "go1.25.14", Experiment: "greenteagc"}, {Toolchain: "go1.26.11", Experiment: "nogreenteagc"}} {
		stripped := o
		stripped.Stripped = true
		builds = append(builds, o, stripped)
	}
	for _, opts := range builds {
		t.Run(opts.String(), func(t *testing.T) {
			p := targets.Start(t, targets.Build(t, "ptrmaps", opts))
			addrs := map[string]uint64{}
			for _, line := range p.Lines() {
				if f := strings.Fields(line); len(f) == 2 {
					if v, err := strconv.ParseUint(f[1], 0, 64); err == nil {
						addrs[f[0]] = v
					}
				}
			}
			if len(addrs) != 7 {
				t.Fatalf("the target printed %v", addrs)
			}
			pr, layout := openProcess(t, p.Pid)
			h, err := heap.Read(pr.Mem, layout, pr.Exe.Arch, pr.Bias, heap.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := heap.Copy(pr.Mem, h, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			lo, hi := ^uint64(0), uint64(0)
			for _, ph := range pr.Exe.File.Progs {
				if ph.Type == elf.PT_LOAD {
					lo, hi = min(lo, ph.Vaddr), max(hi, ph.Vaddr+ph.Memsz)
				}
			}
			ptrs := heap.ReadPointers(pr.Mem, c, layout, heap.PointerOptions{Bias: pr.Bias, ExeLo: lo + pr.Bias, ExeHi: hi + pr.Bias})
			t.Logf("pointer maps: %q %s", ptrs.Format(), ptrs.Unknown())
			switch {
			case opts.Experiment == "noallocheaders" && opts.Stripped:
				if !strings.Contains(ptrs.Unknown(), "noallocheaders") {
					t.Errorf("a stripped noallocheaders build: format %q, unknown %q", ptrs.Format(), ptrs.Unknown())
				}
				return
			case ptrs.Unknown() != "":
				t.Fatalf("no pointer maps: %s", ptrs.Unknown())
			}
			words := func(lo, hi int) []int {
				var w []int
				for i := lo; i < hi; i++ {
					w = append(w, i)
				}
				return w
			}
			big := append(words(0, 20000), 40000)
			for _, o := range []struct {
				name string
				n    int   // words checked
				want []int // the pointer words among them
			}{{"SMALL", 3, []int{0, 2}}, {"SLICE", 16, []int{0, 2, 3, 5, 6, 8, 9, 11, 12, 14}}, {"TINY", 1, []int{0}},
				{"HEADER", 101, []int{0}}, {"LARGE", 5002, []int{0, 5001}}, {"BIG", 40001, big}, {"FRESH", 40001, big}} {
				a := addrs[o.name]
				k, ok := h.Find(a)
				if !ok {
					t.Errorf("%s %#x: in no span", o.name, a)
					continue
				}
				s := &h.Spans[k]
				slot, start, _ := s.Object(a)
				skip := int(a-start) / 8 // the malloc header
				if skip != 0 && (o.name != "HEADER" || skip != 1) {
					t.Errorf("%s %#x: in slot %d at %#x of span %+v", o.name, a, slot, start, *s)
					continue
				}
				m, why := ptrs.Object(k, slot)
				if why != "" {
					if opts.Experiment == "greenteagc" && opts.Stripped && s.ElemSize >= 16 && s.ElemSize <= 512 && strings.Contains(why, "inline mark bits") {
						continue // the table has no Green Tea for Go 1.25
					}
					t.Errorf("%s %#x: no map: %s", o.name, a, why)
					continue
				}
				var got, each []int
				for w := 0; w < o.n; w++ {
					if m.Pointer(uint64(skip + w)) {
						got = append(got, w)
					}
				}
				m.Each(uint64(skip+o.n), func(w uint64) {
					if int(w) >= skip {
						each = append(each, int(w)-skip)
					}
				})
				if fmt.Sprint(each) != fmt.Sprint(got) {
					t.Errorf("%s: Each gives %v, Pointer %v", o.name, trim(each), trim(got))
				}
				if skip == 1 && m.Pointer(0) {
					t.Errorf("%s: its malloc header is a pointer word", o.name)
				}
				if fmt.Sprint(got) != fmt.Sprint(o.want) {
					t.Errorf("%s %#x (slot of %d bytes): pointer words %v, want %v", o.name, a, s.ElemSize, trim(got), trim(o.want))
				}
			}
		})
	}
}

// trim shortens a long list of words for a message.
func trim(w []int) string {
	if len(w) > 12 {
		return fmt.Sprintf("%v ... %v (%d)", w[:6], w[len(w)-6:], len(w))
	}
	return fmt.Sprint(w)
}
