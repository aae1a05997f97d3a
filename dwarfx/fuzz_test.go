package dwarfx

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Fuzz tests of every parser of untrusted bytes in dwarfx: the ELF and
// section reader with the pclntab and runtime layouts behind it, the pclntab
// decoder alone and the string-array reader (the probe-site decoder's is in
// package trace). Seeds
// are real binaries of every Go release in the generated table. `go test`
// runs the seeds; `make fuzz` fuzzes each target for a while.

var (
	seedOnce sync.Once
	seeds    [][]byte
	seedErr  error
)

// seedBinaries builds dwarfx/testdata/layoutprobe stripped with every
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
		tcs := TableToolchains()
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
		for i, b := range builds {
			out := filepath.Join(dir, "b"+string(rune('a'+i)))
			cmd := exec.Command("go", append(append([]string{"build", "-o", out}, b.flags...), ".")...)
			cmd.Dir = "testdata/layoutprobe"
			cmd.Env = append(cmd.Environ(), "GOTOOLCHAIN="+b.tc, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
			if msg, err := cmd.CombinedOutput(); err != nil {
				seedErr = err
				tb.Logf("%s", msg)
				return
			}
			data, err := os.ReadFile(out)
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
		LoadRuntimeLayout(b)
		for i, fn := range b.Lines.Funcs() {
			if i >= 64 {
				break
			}
			b.Lines.FileLine(fn, fn.Entry)
			b.Lines.SPDelta(fn, fn.End-1)
			b.Lines.Frames(fn, fn.Entry)
		}
		b.Lines.FuncForPC(b.Lines.textStart + 0x100)
		b.Lines.FuncByName("main.main")
	})
}

// FuzzPclntab decodes arbitrary bytes as a pclntab (header, function table,
// lines, frame sizes), without the ELF around it.
func FuzzPclntab(f *testing.F) {
	for _, s := range seedBinaries(f)[:2] {
		b, err := OpenReader(bytes.NewReader(s), "seed")
		if err != nil {
			f.Fatal(err)
		}
		data, _, err := b.findPclntab()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parsePCHeader(data, binary.LittleEndian)
		if err != nil {
			return
		}
		lt := &LineTable{order: binary.LittleEndian, magic: h.magic, quantum: uint64(h.quantum), textStart: 0x401000}
		if err := lt.parse(data, h); err != nil {
			return
		}
		lt.gofuncErr = errNoGofunc
		for i, fn := range lt.Funcs() {
			if i >= 256 {
				break
			}
			lt.FileLine(fn, fn.Entry)
			lt.SPDelta(fn, fn.Entry)
			lt.Frames(fn, fn.Entry)
		}
	})
}

var errNoGofunc = os.ErrNotExist

// sliceReader is an address space made of one byte slice at base.
type sliceReader struct {
	base uint64
	data []byte
}

func (r sliceReader) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < r.base || addr-r.base > uint64(len(r.data)) || uint64(len(p)) > uint64(len(r.data))-(addr-r.base) {
		return 0, os.ErrNotExist
	}
	return copy(p, r.data[addr-r.base:]), nil
}

// FuzzReadStringArray reads [n]string arrays from arbitrary memory.
func FuzzReadStringArray(f *testing.F) {
	seed := make([]byte, 64)
	binary.LittleEndian.PutUint64(seed[0:], 0x1000+32)
	binary.LittleEndian.PutUint64(seed[8:], 5)
	copy(seed[32:], "hello")
	f.Add(seed, int64(1))
	f.Fuzz(func(t *testing.T, data []byte, n int64) {
		ss, err := ReadStringArray(sliceReader{0x1000, data}, 0x1000, n, 1<<12)
		if err == nil && int64(len(ss)) != n {
			t.Fatalf("%d strings for n=%d", len(ss), n)
		}
	})
}
