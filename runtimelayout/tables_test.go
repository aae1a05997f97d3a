package runtimelayout_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestGeneratedLayoutsMatchDWARF rebuilds the probe program with the
// toolchain of every entry of the generated table and checks that its
// DWARF says exactly what the table says.
func TestGeneratedLayoutsMatchDWARF(t *testing.T) {
	entries := runtimelayout.GeneratedLayouts()
	if len(entries) < 16 {
		t.Fatalf("the table has %d entries, want Go 1.20 to 1.27 on amd64 and arm64", len(entries))
	}
	dir := t.TempDir()
	for _, want := range entries {
		t.Run(want.Toolchain+"/"+want.Arch, func(t *testing.T) {
			t.Parallel()
			b, err := elfbin.Open(targets.BuildProbe(t, dir, want.Toolchain, want.Arch))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := runtimelayout.LayoutOfProbe(b.Layout(), want.Toolchain)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("DWARF of %s/%s differs from the generated table:\nDWARF: %+v\ntable: %+v", want.Toolchain, want.Arch, *got, want)
			}
		})
	}
}

func TestTableLayoutVersions(t *testing.T) {
	for _, v := range []string{"go1.20.3", "go1.21.13", "go1.26.8", "go1.26rc1", "go1.27.4"} {
		for _, arch := range []string{"amd64", "arm64"} {
			if _, err := runtimelayout.TableLayout(v, arch); err != nil {
				t.Errorf("%s/%s: %v", v, arch, err)
			}
		}
	}
	_, err := runtimelayout.TableLayout("go1.99.1", "amd64")
	if !errors.Is(err, runtimelayout.ErrNoTable) || !strings.Contains(err.Error(), "newer than gi's table") {
		t.Errorf("a future release: %v", err)
	}
	if _, err := runtimelayout.TableLayout("go1.18", "amd64"); !errors.Is(err, runtimelayout.ErrNoTable) {
		t.Errorf("an old release: %v", err)
	}
}

func TestGoMinor(t *testing.T) {
	for v, want := range map[string]int{"go1.21.13": 21, "go1.26rc1": 26, "go1.27.4 X:boringcrypto": 27, "go1.22-bigcorp": 22, "go1.20": 20} {
		if got, ok := runtimelayout.GoMinor(v); !ok || got != want {
			t.Errorf("GoMinor(%q) = %d, %v; want %d", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "devel go1.28-abcdef", "go2.0", "gibberish"} {
		if got, ok := runtimelayout.GoMinor(v); ok {
			t.Errorf("GoMinor(%q) = %d, want not ok", v, got)
		}
	}
}
