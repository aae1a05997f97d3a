package kernelgrid

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gi-debug/gi/trace"
)

// TestNewcRoundTrip writes an initramfs and reads it back: names, data,
// padding and the directories the kernel needs before the files in them.
func TestNewcRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"a": "x", "bb": "hello, world", "empty": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "initrd.gz")
	files := map[string]string{"/gi": filepath.Join(dir, "a"), "/targets/x-local-pie": filepath.Join(dir, "bb"), "/lib64/ld.so": filepath.Join(dir, "empty")}
	if err := writeInitramfs(path, files, map[string][]byte{"/init": []byte("#!/bin/sh\n")}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Errorf("archive of %d bytes, not 4-aligned", len(b))
	}
	got, err := readNewc(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"gi": "x", "targets/x-local-pie": "hello, world", "lib64/ld.so": "", "init": "#!/bin/sh\n"} {
		if data, ok := got[name]; !ok || !bytes.Equal(data, []byte(want)) {
			t.Errorf("%s: %q (present %v), want %q", name, data, ok, want)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "root", "bin", "targets", "lib64"} {
		if data, ok := got[d]; !ok || data != nil {
			t.Errorf("directory %s missing", d)
		}
	}
}

// TestResolveIn follows links inside an unpacked package, absolute ones
// included, never into the host's own files.
func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"lib/x86_64-linux-gnu", "lib64"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	if err := os.WriteFile(real, []byte("loader"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"lib64/ld-linux-x86-64.so.2": "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"lib/ld-rel.so":              "x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"lib/loop":                   "loop",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/ld-rel.so", "/lib64/../lib64/ld-linux-x86-64.so.2"} {
		if got, err := resolveIn(root, p); err != nil || got != real {
			t.Errorf("resolveIn(%s) = %q, %v; want %q", p, got, err, real)
		}
	}
	if got, err := resolveIn(root, "/lib/loop"); err == nil {
		t.Errorf("a link loop resolved to %s", got)
	}
	if got, err := resolveIn(root, "/lib/missing"); err == nil {
		t.Errorf("a missing file resolved to %s", got)
	}
}

func TestCheckWarnings(t *testing.T) {
	multi, cookies := "gi: warning: "+trace.WarnNoUprobeMulti, "gi: warning: "+trace.WarnNoAttachCookies
	info := "gi: tracing 3 functions (7 probes) in pid 1, attached in 1ms; Ctrl-C to stop"
	for _, c := range []struct {
		release  string
		messages []string
		ok       bool
	}{
		{"6.12.95+deb12-amd64", []string{info}, true},
		{"6.12.95+deb12-amd64", []string{multi, info}, false},
		{"6.1.0-50-arm64", []string{multi, info}, true},
		{"6.1.0-50-arm64", []string{info}, false},
		{"5.10.0-32-amd64", []string{cookies, multi, info}, true},
		{"5.10.0-32-amd64", []string{multi}, false},
		{"", []string{info}, false},
	} {
		if got := checkWarnings(c.release, c.messages); (got == "") != c.ok {
			t.Errorf("%s %q: %q, want ok %v", c.release, c.messages, got, c.ok)
		}
	}
}

func TestSelectKernels(t *testing.T) {
	if ks, err := selectKernels(""); err != nil || len(ks) != len(grid) {
		t.Errorf("empty: %v %v", ks, err)
	}
	if ks, err := selectKernels("6.1-arm64, 5.10-amd64,6.1-arm64"); err != nil || len(ks) != 2 || ks[0] != (kernel{"6.1", "arm64"}) {
		t.Errorf("two: %v %v", ks, err)
	}
	if _, err := selectKernels("6.1-amd64,4.19-amd64"); err == nil {
		t.Error("a kernel outside the grid selected")
	}
}
