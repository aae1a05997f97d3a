package core

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestTruncatedNotes opens a core cut short inside its notes (the
// kernel writes them first, so a core truncated early loses them): one
// error saying so, no thread to decode.
func TestTruncatedNotes(t *testing.T) {
	le := binary.LittleEndian
	// The ELF header, then one program header: notes at byte 120, 4096
	// bytes long, of which the file holds 16.
	h := make([]byte, 64+56)
	copy(h, "\x7fELF\x02\x01\x01")
	le.PutUint16(h[16:], uint16(elf.ET_CORE))
	le.PutUint16(h[18:], uint16(elf.EM_X86_64))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], 64) // e_phoff
	le.PutUint16(h[52:], 64) // e_ehsize
	le.PutUint16(h[54:], 56) // e_phentsize
	le.PutUint16(h[56:], 1)  // e_phnum
	le.PutUint32(h[64:], uint32(elf.PT_NOTE))
	le.PutUint64(h[64+8:], 120)   // p_offset
	le.PutUint64(h[64+32:], 4096) // p_filesz
	path := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(path, append(h, make([]byte, 16)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if !IsCore(path) {
		t.Fatal("a core's header is not a core's")
	}
	_, err := Open(path, "")
	if err == nil || !strings.Contains(err.Error(), "truncated in its notes (16 of their 4096 bytes, from byte 120)") {
		t.Errorf("Open: %v, want the notes' truncation", err)
	}
}
