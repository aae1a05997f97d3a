package core

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// compressWith compresses data in the format named, as the libraries gi
// reads them with write it (the command-line tools' output is tested
// with real cores in inspect and cmd/gi).
func compressWith(t *testing.T, format string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch format {
	case "zstd":
		w, err = zstd.NewWriter(&buf)
	case "lz4":
		w = lz4.NewWriter(&buf)
	case "xz":
		w, err = xz.NewWriter(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// elfHeader returns a 64-bit little-endian ELF header of type typ,
// followed by pad bytes of data: pages of zeros and of noise.
func elfHeader(typ elf.Type, pad int) []byte {
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(typ))
	binary.LittleEndian.PutUint16(h[18:], uint16(elf.EM_X86_64))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	out := append(h, make([]byte, pad)...)
	r := rand.New(rand.NewPCG(1, 2))
	for page := 64; page < len(out); page += 3 * sparsePage { // one page in three not zeros
		for i := page; i < min(len(out), page+sparsePage); i++ {
			out[i] = byte(r.Uint32())
		}
	}
	return out
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompressedHeader tells a compressed core by its magic bytes, its
// name notwithstanding: IsCore is true for a core header compressed by
// each format, false for a compressed executable's header and for a
// stream that is only a magic number.
func TestCompressedHeader(t *testing.T) {
	for _, format := range []string{"zstd", "lz4", "xz"} {
		t.Run(format, func(t *testing.T) {
			if p := writeFile(t, "core.bin", compressWith(t, format, elfHeader(elf.ET_CORE, 100<<10))); !IsCore(p) {
				t.Errorf("IsCore(a core compressed by %s) = false", format)
			}
			if p := writeFile(t, "core.zst", compressWith(t, format, elfHeader(elf.ET_EXEC, 100))); IsCore(p) {
				t.Errorf("IsCore(an executable compressed by %s) = true", format)
			}
			for i := range compressions {
				if compressions[i].name == format {
					if p := writeFile(t, "core", compressions[i].magic); IsCore(p) {
						t.Errorf("IsCore(%s's magic alone) = true", format)
					}
				}
			}
		})
	}
}

// TestDecompress decompresses each format into an unlinked temporary file
// holding the same bytes (its pages of zeros left as holes), the size of
// the data; and refuses a stream cut short, a stream corrupted, and one
// decompressing to more than the limit, with one error naming the format
// (Open names the file), never a panic.
func TestDecompress(t *testing.T) {
	data := elfHeader(elf.ET_CORE, 3<<20+123) // not a whole number of pages
	for _, format := range []string{"zstd", "lz4", "xz"} {
		t.Run(format, func(t *testing.T) {
			z := compressWith(t, format, data)
			got, err := decompressed(t, z)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("decompressed %d bytes, not the %d compressed", len(got), len(data))
			}

			bad := map[string][]byte{"cut short": z[:len(z)/2]}
			corrupt := bytes.Clone(z)
			for i := len(corrupt) / 3; i < len(corrupt)/3+64; i++ {
				corrupt[i] ^= 0x5a
			}
			bad["corrupt"] = corrupt
			for what, z := range bad {
				_, err := decompressed(t, z)
				if err == nil || !strings.Contains(err.Error(), "its "+format+" stream is corrupt or cut short") {
					t.Errorf("%s: %v, want a corrupt stream", what, err)
				}
				path := writeFile(t, "core.2", z)
				if _, err := Open(path, ""); err == nil || !strings.Contains(err.Error(), path) {
					t.Errorf("Open(%s, a stream %s): %v, want an error naming it", format, what, err)
				}
			}

			defer func(limit int64) { decompressLimit = limit }(decompressLimit)
			decompressLimit = 1 << 20
			if _, err := decompressed(t, z); !errors.Is(err, errTooLarge) {
				t.Errorf("past the limit: %v, want errTooLarge", err)
			}
		})
	}
}

// decompressed runs decompress on z and returns what its file holds,
// checking it is unlinked.
func decompressed(t *testing.T, z []byte) ([]byte, error) {
	t.Helper()
	f, err := os.Open(writeFile(t, "core.z", z))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := compressionOf(f)
	if c == nil {
		t.Fatal("no compression found")
	}
	tmp, err := decompress(f, c)
	if err != nil {
		return nil, err
	}
	defer tmp.Close()
	if _, err := os.Stat(tmp.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file %s is not unlinked: %v", tmp.Name(), err)
	}
	st, err := tmp.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, st.Size())
	if _, err := tmp.ReadAt(out, 0); err != nil {
		t.Fatal(err)
	}
	return out, nil
}
