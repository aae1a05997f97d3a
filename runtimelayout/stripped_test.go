package runtimelayout_test

import (
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestFindAllgsWithoutSymbols finds runtime.allgs and runtime.allglen through
// the code of runtime.allgadd, runtime.semtable through the code of
// semacquire1 and semrelease1, runtime.mheap_ through the code of
// mcentral.grow, mcache.allocLarge and mallocinit, and the queues of
// finalizers and cleanups (runtime.allfin, runtime.gcCleanups) through
// queuefinalizer, runCleanups and markroot, as for a stripped binary, and checks
// the results against the symbol table, for every Go release in the
// table, amd64 and arm64, PIE and not.
func TestFindAllgsWithoutSymbols(t *testing.T) {
	for _, tc := range runtimelayout.TableToolchains() {
		for _, arch := range []string{"amd64", "arm64"} {
			for _, pie := range [][]string{nil, {"-buildmode=pie"}} {
				b, err := elfbin.Open(targets.BuildProbe(t, t.TempDir(), tc, arch, pie...))
				if err != nil {
					t.Fatal(err)
				}
				g, l, err := runtimelayout.FindAllgs(b.Layout())
				sg, _ := b.Symbol("runtime.allgs")
				sl, _ := b.Symbol("runtime.allglen")
				if err != nil || g != sg.Addr || l != sl.Addr || g == 0 {
					t.Errorf("%s %s %s: found allgs %#x allglen %#x (%v), symbols say %#x %#x", tc, arch, pie, g, l, err, sg.Addr, sl.Addr)
				}
				mh, mhErr := runtimelayout.FindMHeap(b.Layout())
				sm, _ := b.Symbol("runtime.mheap_")
				if mhErr != nil || mh != sm.Addr || mh == 0 {
					t.Errorf("%s %s %s: found mheap_ %#x (%v), the symbol says %#x", tc, arch, pie, mh, mhErr, sm.Addr)
				}
				af, afErr := runtimelayout.FindAllfin(b.Layout())
				sa, _ := b.Symbol("runtime.allfin")
				if afErr != nil || af != sa.Addr || af == 0 {
					t.Errorf("%s %s %s: found allfin %#x (%v), the symbol says %#x", tc, arch, pie, af, afErr, sa.Addr)
				}
				if sc, ok := b.Symbol("runtime.gcCleanups"); ok && b.Lines.FuncByName("runtime.runCleanups") != nil {
					l, _, err := b.RuntimeLayout()
					if err != nil {
						t.Fatal(err)
					}
					gc, gcErr := runtimelayout.FindGCCleanups(b.Layout(), l.Heap.Queues.CleanupQueueAll)
					if gcErr != nil || gc != sc.Addr {
						t.Errorf("%s %s %s: found gcCleanups %#x (%v), the symbol says %#x", tc, arch, pie, gc, gcErr, sc.Addr)
					}
				}
				sem, semErr := runtimelayout.FindSemtable(b.Layout())
				ss, _ := b.Symbol("runtime.semtable")
				if semErr != nil || sem != ss.Addr || sem == 0 {
					t.Errorf("%s %s %s: found semtable %#x (%v), the symbol says %#x", tc, arch, pie, sem, semErr, ss.Addr)
				}
				b.Close()
			}
		}
	}
}
