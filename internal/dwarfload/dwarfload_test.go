package dwarfload_test

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"reflect"
	"sync"
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

// TestLoaderSharesSections asks one Loader for the same sections from
// several goroutines at once, as gi trace's runtime layout and argument
// readers do: each section is decompressed once, and every reader gets
// the same bytes, equal to what debug/elf reads.
func TestLoaderSharesSections(t *testing.T) {
	f, err := elf.Open(targets.Build(t, "tracee", targets.BuildOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := dwarfload.NewLoader(f)
	const readers = 4
	got := make([]map[string][]byte, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			names := dwarfload.Types
			if i%2 == 1 {
				names = append(append([]string(nil), names...), "loclists")
			}
			sec, err := l.Sections(names...)
			if err != nil {
				t.Error(err)
			}
			got[i] = sec
		})
	}
	wg.Wait()
	want, err := f.Section(".debug_info").Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, sec := range got {
		info := sec["info"]
		if !bytes.Equal(info, want) {
			t.Fatalf("reader %d: .debug_info differs from debug/elf's (%d bytes, want %d)", i, len(info), len(want))
		}
		if &info[0] != &got[0]["info"][0] {
			t.Errorf("reader %d got its own copy of .debug_info: decompressed twice", i)
		}
	}
	if len(got[1]["loclists"]) == 0 {
		t.Error("the reader that asked for the location lists got none")
	}
}

// TestOpenPrefix cuts .debug_info after the unit the caller accepts, on
// DWARF 4 (Go 1.20), DWARF 5 and an externally linked cgo build: the cut
// DWARF holds exactly the units up to and including that one, each entry
// equal to what the whole section holds at the same offset; accepting none
// gives every unit; and once the whole section has been read, the prefix
// is the whole.
func TestOpenPrefix(t *testing.T) {
	for _, opts := range []targets.BuildOptions{{Toolchain: "go1.20.14"}, {}, {CgoExternal: true}} {
		t.Run(opts.String(), func(t *testing.T) {
			f, err := elf.Open(targets.Build(t, "tracee", opts))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			whole, _, err := dwarfload.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			units := entries(t, whole)
			if len(units) < 20 {
				t.Fatalf("only %d units", len(units))
			}
			for _, cut := range []int{0, 7, len(units) / 2, len(units) - 1} {
				seen := 0
				d, err := dwarfload.NewLoader(f).OpenPrefix(func(r *dwarf.Reader) bool {
					seen++
					cu, err := r.Next()
					if err != nil || cu.Tag != dwarf.TagCompileUnit {
						t.Fatalf("unit %d: first entry %v, %v", seen-1, cu, err)
					}
					return seen-1 == cut
				})
				if err != nil {
					t.Fatal(err)
				}
				got := entries(t, d)
				if len(got) != cut+1 || seen != cut+1 {
					t.Fatalf("cut after unit %d: %d units in the prefix, %d offered", cut, len(got), seen)
				}
				for i := range got {
					if !reflect.DeepEqual(got[i], units[i]) {
						t.Fatalf("cut after unit %d: unit %d differs from the whole section's", cut, i)
					}
				}
			}
			l := dwarfload.NewLoader(f)
			none, err := l.OpenPrefix(func(*dwarf.Reader) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			if got := entries(t, none); !reflect.DeepEqual(got, units) {
				t.Errorf("accepting no unit: %d units, want all %d", len(got), len(units))
			}
			if _, err := l.Sections("info"); err != nil {
				t.Fatal(err)
			}
			asked := false
			after, err := l.OpenPrefix(func(*dwarf.Reader) bool { asked = true; return true })
			if err != nil {
				t.Fatal(err)
			}
			if got := entries(t, after); asked || len(got) != len(units) {
				t.Errorf("with .debug_info read whole: %d units (asked %v), want the whole %d", len(got), asked, len(units))
			}
		})
	}
}

// entries returns every entry of d, unit by unit.
func entries(t *testing.T, d *dwarf.Data) [][]*dwarf.Entry {
	t.Helper()
	var units [][]*dwarf.Entry
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return units
		}
		if e.Tag == dwarf.TagCompileUnit {
			units = append(units, nil)
		}
		units[len(units)-1] = append(units[len(units)-1], e)
	}
}
