package runtimelayout_test

import (
	"debug/elf"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
	"github.com/gi-debug/gi/runtimelayout"
)

// forEachRelease calls check with the DWARF of the probe program built by
// every Go release in the generated table, for amd64 and arm64.
func forEachRelease(t *testing.T, check func(t *testing.T, d *runtimelayout.Debug)) {
	dir := t.TempDir()
	for _, tc := range runtimelayout.TableToolchains() {
		for _, arch := range []string{"amd64", "arm64"} {
			t.Run(tc+"/"+arch, func(t *testing.T) {
				f, err := elf.Open(targets.BuildProbe(t, dir, tc, arch))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				d, err := runtimelayout.LoadDebug(f)
				if err != nil {
					t.Fatal(err)
				}
				check(t, d)
			})
		}
	}
}

// TestRecordsMatchDWARF checks the runtime facts the pclntab decoder needs
// where a stripped binary has no DWARF to give them, and which are
// therefore constants in it: the layouts of runtime._func and
// runtime.inlinedCall (pclntab.Records), against the DWARF of every Go
// release in the generated table, field by field, offset and size.
func TestRecordsMatchDWARF(t *testing.T) {
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		for _, r := range pclntab.Records {
			st, err := d.Struct(r.Type)
			if err != nil {
				t.Fatal(err)
			}
			if st.ByteSize != r.Size {
				t.Errorf("%s is %d bytes, the decoder reads %d", r.Type, st.ByteSize, r.Size)
			}
			for _, fd := range r.Fields {
				off, ft, err := runtimelayout.FieldOffset(st, fd.Name)
				if err != nil {
					t.Errorf("%s: %v", r.Type, err)
					continue
				}
				if off != fd.Offset || ft.Size() != fd.Size {
					t.Errorf("%s.%s at %d (%d bytes), the decoder reads it at %d (%d bytes)", r.Type, fd.Name, off, ft.Size(), fd.Offset, fd.Size)
				}
			}
		}
	})
}

// TestGStackguard0MatchesDWARF checks GStackguard0 against the DWARF of
// every Go release in the generated table, amd64 and arm64.
func TestGStackguard0MatchesDWARF(t *testing.T) {
	forEachRelease(t, func(t *testing.T, d *runtimelayout.Debug) {
		g, err := d.Struct("runtime.g")
		if err != nil {
			t.Fatal(err)
		}
		if off, ft, err := runtimelayout.FieldOffset(g, "stackguard0"); err != nil || off != runtimelayout.GStackguard0 || ft.Size() != 8 {
			t.Errorf("g.stackguard0 at %d (%v), gi assumes %d", off, err, runtimelayout.GStackguard0)
		}
	})
}
