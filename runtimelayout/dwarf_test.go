package runtimelayout_test

import (
	"debug/elf"
	"reflect"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestRuntimeUnitIndexMatchesFullIndex checks the premise of LoadDebug's
// fast path on real binaries of every Go release in the table, both
// architectures, and an externally linked cgo build: every named type of
// the whole DWARF with a Go name (a dot in it: not the C types of a cgo
// build) is in the runtime's first compilation unit, at the same entry,
// and so is every runtime variable and constant the runtime package
// itself declares (runtime/cgo declares a few under runtime's names, which
// gi does not read); the layout read from that unit is the layout read
// from every unit. The fast index must also be a real saving: it skips
// the other units' variables, and leaves most of .debug_info unread.
func TestRuntimeUnitIndexMatchesFullIndex(t *testing.T) {
	type build struct {
		name string
		opts targets.BuildOptions
	}
	var builds []build
	for _, tc := range runtimelayout.TableToolchains() {
		for _, arch := range []string{"amd64", "arm64"} {
			builds = append(builds, build{"tracee", targets.BuildOptions{Toolchain: tc, Arch: arch}})
		}
	}
	builds = append(builds, build{"tracee", targets.BuildOptions{CgoExternal: true}})
	for _, b := range builds {
		t.Run(b.opts.String(), func(t *testing.T) {
			f, err := elf.Open(targets.Build(t, b.name, b.opts))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := runtimelayout.LoadDebug(f)
			if err != nil {
				t.Fatal(err)
			}
			fast := runtimelayout.IndexOf(d)
			every, err := runtimelayout.LoadDebugEveryUnit(f)
			if err != nil {
				t.Fatal(err)
			}
			full := runtimelayout.IndexOf(every)
			if len(fast.Types) < 100 || len(full.Variables) <= len(fast.Variables) {
				t.Fatalf("fast index: %d types, %d of %d variables: not the runtime unit alone", len(fast.Types), len(fast.Variables), len(full.Variables))
			}
			if read, whole := runtimelayout.InfoBytes(d), runtimelayout.InfoBytes(every); read >= whole {
				t.Errorf("the fast index read %d bytes of .debug_info, the whole section is %d", read, whole)
			}
			fastLayout, err := runtimelayout.LayoutFromDWARF(d)
			if err != nil {
				t.Fatal(err)
			}
			fullLayout, err := runtimelayout.LayoutFromDWARF(every)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fastLayout, fullLayout) {
				t.Errorf("layout from the runtime unit:\n%+v\nfrom every unit:\n%+v", fastLayout, fullLayout)
			}
			cgoNames := runtimelayout.DeclaredIn(every, "runtime/cgo")
			missing := 0
			for name, off := range full.Types {
				if !strings.Contains(name, ".") {
					continue // int, uint8 (in the runtime unit too) and C's types
				}
				if got, ok := fast.Types[name]; !ok || got != off {
					if missing++; missing <= 5 {
						t.Errorf("type %s: full index %#x, runtime unit %#x (found %v)", name, off, got, ok)
					}
				}
			}
			for name, addr := range full.Variables {
				if strings.HasPrefix(name, "runtime.") && !cgoNames[name] && fast.Variables[name] != addr {
					t.Errorf("variable %s: full index %#x, runtime unit %#x", name, addr, fast.Variables[name])
				}
			}
			for name, v := range full.Constants {
				if got, ok := fast.Constants[name]; strings.HasPrefix(name, "runtime.") && !cgoNames[name] && (!ok || got != v) {
					t.Errorf("constant %s: full index %d, runtime unit %d (found %v)", name, v, got, ok)
				}
			}
			if missing > 0 {
				t.Errorf("%d of %d types are not in the runtime unit", missing, len(full.Types))
			}
		})
	}
}
