package core

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

// TestNotACore refuses files that are not ELF cores with ErrNotCore: an
// executable (this test's own), and a file that is not ELF.
func TestNotACore(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := t.TempDir() + "/text"
	if err := os.WriteFile(text, []byte("not a core"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{self, text} {
		if IsCore(path) {
			t.Errorf("IsCore(%s) = true", path)
		}
		if _, err := Open(path, ""); !errors.Is(err, ErrNotCore) {
			t.Errorf("Open(%s): %v, want ErrNotCore", path, err)
		}
	}
}

// TestFileMappings decodes an NT_FILE note, and refuses one whose count
// runs past it.
func TestFileMappings(t *testing.T) {
	le := binary.LittleEndian
	var desc []byte
	for _, v := range []uint64{2, 4096, 0x400000, 0x401000, 0, 0x401000, 0x402000, 1} {
		desc = le.AppendUint64(desc, v)
	}
	desc = append(desc, "/srv/a\x00/srv/a\x00"...)
	m, err := fileMappings(le, desc)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m[1] != (Mapping{Start: 0x401000, End: 0x402000, Offset: 4096, Path: "/srv/a"}) {
		t.Errorf("mappings %+v", m)
	}
	le.PutUint64(desc, 1<<40)
	if _, err := fileMappings(le, desc); err == nil {
		t.Error("a count past the note: no error")
	}
}
