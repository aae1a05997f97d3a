package runtimelayout_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestHeapBitsOfBinary builds the layout probe with the Go releases and
// experiments that decide where the runtime keeps its heap objects'
// pointer maps — 1.21 (arena bitmap), 1.22 with and without
// noallocheaders, 1.25 with and without greenteagc, 1.26 with and without
// nogreenteagc — with DWARF and stripped, and checks what Load says of
// them: the format and the Green Tea collector from the pclntab, the
// arena bitmap's offset and the inline mark bits' size from the DWARF
// or the generated table (which has the default builds': a stripped
// noallocheaders build has no offset of its bitmap, a stripped 1.25
// greenteagc build no size of its mark bits).
func TestHeapBitsOfBinary(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		tc, exp         string
		arena, greenTea bool
		// bitmap, marks: the arena bitmap's offset and the mark bits'
		// size read with DWARF, and stripped.
		bitmap, strippedBitmap int64
		marks, strippedMarks   int64
	}{
		{"go1.21.13", "", true, false, 0, 0, 0, 0},
		{"go1.22.12", "", false, false, runtimelayout.Missing, runtimelayout.Missing, 0, 0},
		{"go1.22.12", "noallocheaders", true, false, 0, runtimelayout.Missing, 0, 0},
		{"go1.25.14", "", false, false, runtimelayout.Missing, runtimelayout.Missing, 0, 0},
		{"go1.25.14", "greenteagc", false, true, runtimelayout.Missing, runtimelayout.Missing, 128, 0},
		{"go1.26.11", "", false, true, runtimelayout.Missing, runtimelayout.Missing, 128, 128},
		{"go1.26.11", "nogreenteagc", false, false, runtimelayout.Missing, runtimelayout.Missing, 0, 128},
	} {
		for _, stripped := range []bool{false, true} {
			name := c.tc + "-" + c.exp
			if stripped {
				name += "-stripped"
			}
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(dir, name)
				args := []string{"build", "-o", out}
				if stripped {
					args = append(args, "-ldflags=-s -w")
				}
				cmd := exec.Command("go", append(args, ".")...)
				cmd.Dir = targets.ProbeDir()
				cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+c.tc, "GOEXPERIMENT="+c.exp, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
				if msg, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("build: %v\n%s", err, msg)
				}
				b, err := elfbin.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				l, _, err := runtimelayout.Load(b.Layout())
				if err != nil {
					t.Fatal(err)
				}
				hb := &l.Heap.Bits
				bitmap, marks := c.bitmap, c.marks
				if stripped {
					bitmap, marks = c.strippedBitmap, c.strippedMarks
				}
				if hb.Reason != "" || hb.ArenaFormat != c.arena || hb.GreenTea != c.greenTea || hb.ArenaBitmap != bitmap || hb.InlineMarkBits != marks {
					t.Errorf("heap bits %+v; want arena format %v, Green Tea %v, bitmap at %d, mark bits of %d", *hb, c.arena, c.greenTea, bitmap, marks)
				}
				if !c.arena && (hb.SpanLargeType <= 0 || hb.MinSizeForMallocHeader != 512 || hb.MallocHeaderSize != 8) {
					t.Errorf("malloc headers: largeType at %d, headers from %d bytes, of %d", hb.SpanLargeType, hb.MinSizeForMallocHeader, hb.MallocHeaderSize)
				}
			})
		}
	}
}
