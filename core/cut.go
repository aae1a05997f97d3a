package core

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// coreELF is a core file's ELF view and what closes the file under it.
type coreELF struct {
	*elf.File
	closer io.Closer
}

// Close closes the file.
func (c *coreELF) Close() error { return c.closer.Close() }

// ELF64 header fields a core is read without (noSections).
const (
	ehdr64Size = 64
	eShoff     = 0x28 // e_shoff, 8 bytes
	eShnum     = 0x3c // e_shnum, 2 bytes, then e_shstrndx
	ePhoff     = 0x20
	ePhentsize = 0x36
	ePhnum     = 0x38
)

// noSections reads a 64-bit ELF file as if it had no section headers:
// a core needs none (its program headers say everything), and gdb's
// are at its end, where a core cut short has lost them.
type noSections struct{ r io.ReaderAt }

func (n noSections) ReadAt(p []byte, off int64) (int, error) {
	k, err := n.r.ReadAt(p, off)
	for _, f := range [][2]int64{{eShoff, 8}, {eShnum, 4}} {
		for i := f[0]; i < f[0]+f[1]; i++ {
			if j := i - off; j >= 0 && j < int64(k) {
				p[j] = 0
			}
		}
	}
	return k, err
}

// readCoreELF reads the ELF view of the uncompressed core f, its section
// headers ignored. A core cut short before the end of its program
// headers is an error that says where it was cut and what is lost.
func readCoreELF(f *os.File) (*elf.File, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var h [ehdr64Size]byte
	if k, err := f.ReadAt(h[:], 0); err != nil && !(errors.Is(err, io.EOF) && k == len(h)) {
		if k >= 4 && string(h[:4]) == elf.ELFMAG {
			return nil, fmt.Errorf("%w: cut short at %d bytes, inside its %d-byte ELF header: nothing to list", ErrNotCore, size, ehdr64Size)
		}
		return nil, fmt.Errorf("%w: %d bytes, no ELF header", ErrNotCore, size)
	}
	if string(h[:4]) != elf.ELFMAG {
		return nil, fmt.Errorf("%w: no ELF magic", ErrNotCore)
	}
	if elf.Class(h[elf.EI_CLASS]) == elf.ELFCLASS64 && elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2LSB {
		le := binary.LittleEndian
		phoff, phentsize, phnum := int64(le.Uint64(h[ePhoff:])), int64(le.Uint16(h[ePhentsize:])), int64(le.Uint16(h[ePhnum:]))
		if end := phoff + phentsize*phnum; phnum > 0 && end > size {
			where := "after its memory"
			if phoff <= ehdr64Size {
				where = "after its ELF header"
			}
			return nil, fmt.Errorf("%w: cut short at %d bytes: its %d program headers (%s, bytes %d to %d), which say where everything is, are lost: nothing to list",
				ErrNotCore, size, phnum, where, phoff, end)
		}
	}
	e, err := elf.NewFile(noSections{f})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCore, err)
	}
	return e, nil
}
