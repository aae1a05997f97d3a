package elfbin

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// FuzzBinary fuzzes the ELF and section reader with the pclntab and runtime
// layouts behind it; the pclntab decoder alone, the string-array reader and
// the probe-site decoder have fuzz tests in their own packages. Seeds
// are real binaries of every Go release in the generated table. `go test`
// runs the seeds; `make fuzz` fuzzes each target for a while.

var (
	seedOnce sync.Once
	seeds    [][]byte
	seedErr  error
)

// seedBinaries builds runtimelayout/testdata/layoutprobe stripped with every
// release in the table (no DWARF: layouts from the table and the allgadd
// scan, and a fuzzer that is not busy in debug/dwarf), then the newest
// release stripped as a PIE and with its DWARF.
func seedBinaries(tb testing.TB) [][]byte {
	tb.Helper()
	seedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gi-fuzz-seeds")
		if err != nil {
			seedErr = err
			return
		}
		defer os.RemoveAll(dir)
		tcs := runtimelayout.TableToolchains()
		type build struct {
			tc    string
			flags []string
		}
		var builds []build
		for _, tc := range tcs {
			builds = append(builds, build{tc, []string{"-ldflags=-s -w"}})
		}
		newest := tcs[len(tcs)-1]
		builds = append(builds, build{newest, []string{"-buildmode=pie", "-ldflags=-s -w"}}, build{newest, nil})
		for _, b := range builds {
			data, err := os.ReadFile(targets.BuildProbe(tb, dir, b.tc, "", b.flags...))
			if err != nil {
				seedErr = err
				return
			}
			seeds = append(seeds, data)
		}
	})
	if seedErr != nil {
		tb.Fatalf("build fuzz seeds: %v", seedErr)
	}
	return seeds
}

// FuzzBinary opens arbitrary bytes as a Go binary and, if that works, reads
// its runtime layout (DWARF, or the table and the allgadd scan), looks up
// lines, frame sizes and inlined frames: errors are fine, panics and hangs
// are not.
func FuzzBinary(f *testing.F) {
	for _, s := range seedBinaries(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := OpenReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		defer b.Close()
		b.RuntimeLayout()
		for i, fn := range b.Lines.Funcs() {
			if i >= 64 {
				break
			}
			b.Lines.FileLine(fn, fn.Entry)
			b.Lines.SPDelta(fn, fn.End-1)
			b.Lines.Frames(fn, fn.Entry)
		}
		b.Lines.FuncForPC(b.Lines.TextStart() + 0x100)
		b.Lines.FuncByName("main.main")
	})
}
