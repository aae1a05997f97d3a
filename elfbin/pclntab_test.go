package elfbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
)

// The tests build pclntab/testdata/pclntest, pclntab's test program, with
// several Go toolchains and link modes, and check elfbin's part of reading
// its pc/line table: finding moduledata (against the symbols, in stripped
// binaries, through relocations the linker left zero) and opening a big
// binary. TestBinary builds the program with the same builder
// (targets.PclnBuilder). The decoding itself (frames, lines and frame sizes
// against the runtime's own reports, debug/gosym, FuncIDs, corrupt tables)
// is tested in package pclntab, whose tests build it the same way.

// TestPclntab builds the test program with every toolchain and link mode
// once, then runs the checks on the builds, each in parallel subtests.
func TestPclntab(t *testing.T) {
	pb := targets.NewPclnBuilder(t)
	for _, c := range []struct {
		name string
		f    func(*testing.T, *targets.PclnBuilder)
	}{
		{"StrippedMatchesSymbols", testPclntabStrippedMatchesSymbols},
		{"ZeroedRelocations", testPclntabZeroedRelocations},
		{"OpenGoCommand", testPclntabOpenGoCommand},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, pb) })
	}
}

func pclnOpen(t testing.TB, path string) *Binary {
	t.Helper()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// framesAt returns Frames at every pc of every function of package main,
// keyed by function name and offset, with link-time pcs made relative.
// The alignment padding after a function's code is in [Entry, End) but not
// covered by its tables: there Frames fails, and the error is recorded.
func pclnFramesAt(t *testing.T, lt *pclntab.LineTable) map[string][]pclntab.Frame {
	m := map[string][]pclntab.Frame{}
	covered := 0
	for _, f := range lt.Funcs() {
		if !strings.HasPrefix(f.Name, "main.") {
			continue
		}
		for pc := f.Entry; pc < f.End; pc++ {
			fr, err := lt.Frames(f, pc)
			if err != nil {
				fr = []pclntab.Frame{{Function: "error"}}
			} else {
				covered++
			}
			for i := range fr {
				fr[i].PC -= f.Entry
			}
			m[fmt.Sprintf("%s+%#x", f.Name, pc-f.Entry)] = fr
		}
	}
	if covered < len(m)/2 {
		t.Fatalf("Frames failed at %d of %d pcs", len(m)-covered, len(m))
	}
	return m
}

// testPclntabStrippedMatchesSymbols checks that stripped binaries, where
// the addresses of go:func.* and runtime.text come from moduledata, decode
// exactly as the same program with its symbol table, and that moduledata agrees with the
// symbols where both exist.
func testPclntabStrippedMatchesSymbols(t *testing.T, pb *targets.PclnBuilder) {
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	type pair struct{ full, stripped targets.PclnKey }
	var pairs []pair
	for _, tc := range targets.PclnToolchains {
		pairs = append(pairs,
			pair{targets.PclnKey{Toolchain: tc, Mode: "exe", GOARCH: runtime.GOARCH}, targets.PclnKey{Toolchain: tc, Mode: "strip", GOARCH: runtime.GOARCH}},
			pair{targets.PclnKey{Toolchain: tc, Mode: "pie", GOARCH: runtime.GOARCH}, targets.PclnKey{Toolchain: tc, Mode: "pie-strip", GOARCH: runtime.GOARCH}})
	}
	pairs = append(pairs,
		pair{targets.PclnKey{Toolchain: "local", Mode: "exe", GOARCH: other}, targets.PclnKey{Toolchain: "local", Mode: "strip", GOARCH: other}},
		pair{targets.PclnKey{Toolchain: "go1.20.14", Mode: "pie", GOARCH: other}, targets.PclnKey{Toolchain: "go1.20.14", Mode: "pie-strip", GOARCH: other}})
	for _, p := range pairs {
		t.Run(p.stripped.String(), func(t *testing.T) {
			t.Parallel()
			full, stripped := pclnOpen(t, pb.Build(t, p.full)), pclnOpen(t, pb.Build(t, p.stripped))
			if full.Stripped || !stripped.Stripped {
				t.Fatalf("Stripped = %v, %v", full.Stripped, stripped.Stripped)
			}
			gofunc, ok := full.Symbol("go:func.*")
			if !ok {
				gofunc, ok = full.Symbol("go.func.*")
			}
			if !ok || gofunc.Addr != full.Lines.GoFunc() {
				t.Errorf("gofunc from moduledata = %#x, symbol go:func.* = %#x (%v)", full.Lines.GoFunc(), gofunc.Addr, ok)
			}
			if text, ok := full.Symbol("runtime.text"); !ok || text.Addr != full.Lines.TextStart() {
				t.Errorf("text start = %#x, symbol runtime.text = %#x (%v)", full.Lines.TextStart(), text.Addr, ok)
			}
			if stripped.Lines.GoFuncErr() != nil {
				t.Fatal(stripped.Lines.GoFuncErr())
			}
			a, b := pclnFramesAt(t, full.Lines), pclnFramesAt(t, stripped.Lines)
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("%d and %d pcs in package main", len(a), len(b))
			}
			inlined := 0
			for k, fa := range a {
				fb := b[k]
				if fmt.Sprint(fa) != fmt.Sprint(fb) {
					t.Errorf("%s: %+v, stripped: %+v", k, fa, fb)
				}
				inlined += len(fa) - 1
			}
			if inlined == 0 {
				t.Error("no inlined frames in package main")
			}
		})
	}
}

// testPclntabZeroedRelocations simulates linkers that leave relocated
// pointers zero in the file (GNU ld on arm64, lld): moduledata must then be
// found and read through the R_*_RELATIVE relocations.
func testPclntabZeroedRelocations(t *testing.T, pb *targets.PclnBuilder) {
	for _, tc := range []string{"local", "go1.20.14"} {
		for _, mode := range []string{"pie", "pie-strip"} {
			k := targets.PclnKey{Toolchain: tc, Mode: mode, GOARCH: runtime.GOARCH}
			t.Run(k.String(), func(t *testing.T) {
				t.Parallel()
				path := pb.Build(t, k)
				orig := pclnOpen(t, path)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				zeroed := 0
				for addr := range orig.relocations() {
					off, err := orig.FileOffset(addr)
					if err != nil {
						continue
					}
					clear(data[off : off+8])
					zeroed++
				}
				if zeroed < 100 {
					t.Fatalf("only %d relocations", zeroed)
				}
				zpath := filepath.Join(t.TempDir(), "zeroed")
				if err := os.WriteFile(zpath, data, 0o755); err != nil {
					t.Fatal(err)
				}
				z := pclnOpen(t, zpath)
				if z.Lines.GoFunc() != orig.Lines.GoFunc() || z.Lines.TextStart() != orig.Lines.TextStart() || z.Lines.GoFuncErr() != nil {
					t.Fatalf("zeroed: gofunc %#x text %#x (%v), original: gofunc %#x text %#x",
						z.Lines.GoFunc(), z.Lines.TextStart(), z.Lines.GoFuncErr(), orig.Lines.GoFunc(), orig.Lines.TextStart())
				}
				a, b := pclnFramesAt(t, orig.Lines), pclnFramesAt(t, z.Lines)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Error("frames differ")
				}
			})
		}
	}
}

// testPclntabOpenGoCommand opens the go command (15 MB) and reports the time.
func testPclntabOpenGoCommand(t *testing.T, pb *targets.PclnBuilder) {
	path := pclnGoCommand(t)
	if _, err := Open(path); err != nil { // warm the page cache
		t.Fatal(err)
	}
	const n = 5
	start := time.Now()
	var b *Binary
	for i := 0; i < n; i++ {
		var err error
		if b, err = Open(path); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	d := time.Since(start) / n
	// Only reported: its speed is measured by BenchmarkOpenGoCommand.
	t.Logf("Open(%s): %v, %d functions", path, d, len(b.Lines.Funcs()))
	if len(b.Lines.Funcs()) < 1000 {
		t.Errorf("the go command has only %d functions", len(b.Lines.Funcs()))
	}
}

func BenchmarkOpenGoCommand(b *testing.B) {
	path := pclnGoCommand(b)
	for i := 0; i < b.N; i++ {
		bin, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		bin.Close()
	}
}

// pclnGoCommand returns the go command of the installed toolchain, a big
// real-world binary (pclntab's tests also use the fetched toolchains' ones).
func pclnGoCommand(t testing.TB) string {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimSpace(string(goroot)), "bin", "go")
}
