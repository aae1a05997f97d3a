package trace

import (
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestStackGuard0MatchesDWARF checks the offset of g.stackguard0, which the
// probe-site decoder recognises the stack-check prologue by (a stripped
// binary has no DWARF to give it), against the DWARF of every Go release
// in the generated table.
func TestStackGuard0MatchesDWARF(t *testing.T) {
	for _, tc := range runtimelayout.TableToolchains() {
		b, err := elfbin.Open(targets.Build(t, "tracee", targets.BuildOptions{Toolchain: tc}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := runtimelayout.LoadDebug(b.File)
		if err != nil {
			t.Fatal(err)
		}
		g, err := d.Struct("runtime.g")
		if err != nil {
			t.Fatal(err)
		}
		if off, ft, err := runtimelayout.FieldOffset(g, "stackguard0"); err != nil || off != stackguard0Offset || ft.Size() != 8 {
			t.Errorf("%s: g.stackguard0 at %d (%v), probe sites assume %d", tc, off, err, stackguard0Offset)
		}
		b.Close()
	}
}
