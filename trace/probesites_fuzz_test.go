package trace_test

import (
	"debug/elf"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/trace"
)

// FuzzProbeSites decodes arbitrary bytes as a function's code for amd64 and
// arm64: errors are fine, but a probe site must lie inside the code, and a
// function is never given return sites together with an error. Seeds are
// functions of the tracee built for both architectures.
func FuzzProbeSites(f *testing.F) {
	for _, arch := range []string{"amd64", "arm64"} {
		b, err := elfbin.Open(targets.Build(f, "tracee", targets.BuildOptions{Arch: arch}))
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range []string{"main.multiRet", "main.grower", "main.recoverer", "runtime.main", "fmt.Fprintf"} {
			if fn := b.Lines.FuncByName(name); fn != nil {
				code := make([]byte, fn.End-fn.Entry)
				if _, err := b.ReadAt(code, fn.Entry); err == nil {
					f.Add(code, arch == "arm64")
				}
			}
		}
		b.Close()
	}
	f.Fuzz(func(t *testing.T, code []byte, arm bool) {
		machine, entry := elf.EM_X86_64, uint64(0x401000)
		if arm {
			machine = elf.EM_AARCH64
		}
		sites, err := trace.FindProbeSites(machine, code, entry)
		if err != nil && len(sites.Returns) > 0 {
			t.Fatalf("error %v with %d return sites", err, len(sites.Returns))
		}
		end := entry + uint64(len(code))
		for _, s := range sites.Returns {
			if s < entry || s >= end {
				t.Fatalf("return site %#x outside the code [%#x, %#x)", s, entry, end)
			}
		}
		if sites.Entry != 0 && (sites.Entry < entry || sites.Entry > end) {
			t.Fatalf("entry site %#x outside the code [%#x, %#x]", sites.Entry, entry, end)
		}
	})
}
