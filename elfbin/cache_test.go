package elfbin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gi-debug/gi/bincache"
	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/runtimelayout"
)

// TestRuntimeLayoutCache derives the runtime layout of a real binary of
// every supported Go release, with DWARF and stripped, without the cache
// and through it (written, then read back), and requires the same layout.
// It then shows the cached entry is what is used, and that a corrupt one
// is survived and rewritten.
func TestRuntimeLayoutCache(t *testing.T) {
	dir := t.TempDir()
	defer bincache.SetDefault(bincache.Default())
	for _, tc := range targets.Toolchains() {
		for _, stripped := range []bool{false, true} {
			opts := targets.BuildOptions{Toolchain: tc, Stripped: stripped}
			t.Run(opts.String(), func(t *testing.T) {
				path := targets.Build(t, "psstates", opts)
				bin, err := elfbin.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer bin.Close()
				bincache.SetDefault(nil)
				want, wantTable, err := bin.RuntimeLayout()
				if err != nil {
					t.Fatal(err)
				}
				bincache.SetDefault(bincache.New(dir))
				for _, pass := range []string{"filling", "cached"} {
					got, table, err := bin.RuntimeLayout()
					if err != nil {
						t.Fatalf("%s: %v", pass, err)
					}
					if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(table, wantTable) {
						t.Errorf("%s: the layout differs from the uncached one:\n%+v\n%+v", pass, got, want)
					}
				}
			})
		}
	}

	// The cached entry is the one used: doctor it (with a valid checksum)
	// and see the change; then corrupt it and see the real layout again.
	bin, err := elfbin.Open(targets.Build(t, "psstates", targets.BuildOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	c := bincache.New(t.TempDir())
	bincache.SetDefault(c)
	real, _, err := bin.RuntimeLayout()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "runtime-layout-*.json"))
	if len(files) != 1 {
		t.Fatalf("%d cache files, want 1", len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Format  int             `json:"format"`
		Key     string          `json:"key"`
		SHA256  string          `json:"sha256"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var e struct {
		Layout runtimelayout.RuntimeLayout
		Table  *runtimelayout.VersionLayout
	}
	if err := json.Unmarshal(f.Payload, &e); err != nil {
		t.Fatal(err)
	}
	e.Layout.ScanBit = 0x5555
	f.Payload, _ = json.Marshal(e)
	sum := sha256.Sum256(f.Payload)
	f.SHA256 = hex.EncodeToString(sum[:])
	doctored, _ := json.Marshal(f)
	if err := os.WriteFile(files[0], doctored, 0o600); err != nil {
		t.Fatal(err)
	}
	if l, _, err := bin.RuntimeLayout(); err != nil || l.ScanBit != 0x5555 {
		t.Fatalf("the doctored entry was not used: %+v, %v", l, err)
	}
	if err := os.WriteFile(files[0], raw[:len(raw)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	if l, _, err := bin.RuntimeLayout(); err != nil || !reflect.DeepEqual(l, real) {
		t.Fatalf("after a corrupt entry: %v", err)
	}
	if rewritten, err := os.ReadFile(files[0]); err != nil || string(rewritten) != string(raw) {
		t.Errorf("the corrupt entry was not rewritten: %v", err)
	}
}
