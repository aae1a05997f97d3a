package outfile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gi-debug/gi/internal/outfile"
)

// TestPlantedLink writes over a symbolic link planted at the name: the
// link is replaced by the file; what it pointed at is untouched.
func TestPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Symlink(victim, out); err != nil {
		t.Fatal(err)
	}
	f, err := outfile.Create(out, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("gi's output"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(out); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("before Commit, the name changed: %v %v", fi, err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("the link's target was written: %q %v", b, err)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target changed mode: %v %v", fi, err)
	}
	fi, err := os.Lstat(out)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("out is not a regular file of mode 0600: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(out); string(b) != "gi's output" {
		t.Errorf("out holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files left in the directory: %v", ents)
	}
}

// TestAbort leaves nothing: neither the name nor the temporary file.
func TestAbort(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	f, err := outfile.Create(out, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	f.Abort()
	f.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left after Abort: %v", ents)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if err := outfile.Probe(filepath.Join(dir, "missing", "x")); err == nil {
		t.Error("Probe of a file in a missing directory succeeded")
	}
	if err := outfile.Probe(filepath.Join(dir, "y")); err != nil {
		t.Errorf("Probe: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left after Probe: %v", ents)
	}
}

// TestStaleRemoved: the temporary file a killed writer left (its pid no
// longer runs) goes when the same name is written next; one of a writer
// that runs, another name's, and the target of a link named like a stale
// one stay.
func TestStaleRemoved(t *testing.T) {
	dir := t.TempDir()
	// A pid that ran and ended: a child reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid)
	live := strconv.Itoa(os.Getpid())
	victim := filepath.Join(dir, "victim")
	files := map[string]bool{ // name -> kept
		".core.gi-" + dead + "-123":  false,
		".core.gi-" + live + "-456":  true,
		".other.gi-" + dead + "-789": true,
		"core.gi-" + dead + "-1":     true,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := ".core.gi-" + dead + "-link"
	if err := os.Symlink(victim, filepath.Join(dir, link)); err != nil {
		t.Fatal(err)
	}
	files[link] = false
	f, err := outfile.Create(filepath.Join(dir, "core"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Abort()
	for name, kept := range files {
		_, err := os.Lstat(filepath.Join(dir, name))
		if (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("the link's target: %q %v", b, err)
	}
}
