package runtimelayout_test

import (
	"os/exec"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestFindAllgsWithoutSymbols finds runtime.allgs and runtime.allglen through
// the code of runtime.allgadd, as for a stripped binary, and checks the
// result against the symbol table, for every Go release in the table, PIE
// and not.
func TestFindAllgsWithoutSymbols(t *testing.T) {
	for _, tc := range runtimelayout.TableToolchains() {
		for _, pie := range []string{"", "-buildmode=pie"} {
			dir := t.TempDir()
			args := []string{"build", "-o", dir + "/b"}
			if pie != "" {
				args = append(args, pie)
			}
			cmd := exec.Command("go", append(args, ".")...)
			cmd.Dir = "testdata/layoutprobe"
			cmd.Env = append(cmd.Environ(), "GOTOOLCHAIN="+tc, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatal(string(out))
			}
			b, err := elfbin.Open(dir + "/b")
			if err != nil {
				t.Fatal(err)
			}
			g, l, err := runtimelayout.FindAllgs(b.Layout())
			sg, _ := b.Symbol("runtime.allgs")
			sl, _ := b.Symbol("runtime.allglen")
			b.Close()
			if err != nil || g != sg.Addr || l != sl.Addr || g == 0 {
				t.Errorf("%s %s: found allgs %#x allglen %#x (%v), symbols say %#x %#x", tc, pie, g, l, err, sg.Addr, sl.Addr)
			}
		}
	}
}
