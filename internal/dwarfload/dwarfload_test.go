package dwarfload_test

import (
	"debug/elf"
	"reflect"
	"testing"

	"github.com/gi-debug/gi/internal/dwarfload"
	"github.com/gi-debug/gi/internal/targets"
)

// TestOpenMatchesElfDWARF walks every entry of real binaries (DWARF 4 from
// Go 1.20, DWARF 5 from the local Go) through Open and through
// elf.File.DWARF, which reads every section: the same entries, attributes
// and values; and the extra sections asked for come back.
func TestOpenMatchesElfDWARF(t *testing.T) {
	for _, opts := range []targets.BuildOptions{{Toolchain: "go1.20.14"}, {}, {PIE: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			f, err := elf.Open(targets.Build(t, "tracee", opts))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, sec, err := dwarfload.Open(f, "loclists", "loc")
			if err != nil {
				t.Fatal(err)
			}
			if len(sec["loclists"]) == 0 && len(sec["loc"]) == 0 {
				t.Error("no location lists read")
			}
			want, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			rg, rw := got.Reader(), want.Reader()
			n := 0
			for {
				eg, errG := rg.Next()
				ew, errW := rw.Next()
				if errG != nil || errW != nil {
					t.Fatalf("entry %d: %v, %v", n, errG, errW)
				}
				if !reflect.DeepEqual(eg, ew) {
					t.Fatalf("entry %d differs:\n%+v\n%+v", n, eg, ew)
				}
				if eg == nil {
					break
				}
				n++
			}
			if n < 10000 {
				t.Errorf("only %d entries", n)
			}
			t.Logf("%d entries equal", n)
		})
	}
}
