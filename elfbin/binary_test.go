package elfbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gi-debug/gi/internal/targets"
)

// TestBinary checks Open and the ELF-level accessors on the test program
// built by several toolchains and link modes.
func TestBinary(t *testing.T) {
	pb := targets.NewPclnBuilder(t)
	t.Run("OpenErrors", func(t *testing.T) { testBinaryOpenErrors(t, pb) })
	t.Run("Metadata", func(t *testing.T) { testBinaryMetadata(t, pb) })
	t.Run("ReadAt", func(t *testing.T) { testBinaryReadAt(t, pb) })
	t.Run("UsableAfterClose", func(t *testing.T) { testBinaryUsableAfterClose(t, pb) })
}

func testBinaryOpenErrors(t *testing.T, pb *targets.PclnBuilder) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(path string, want error) {
		t.Helper()
		b, err := Open(path)
		if err == nil {
			b.Close()
			t.Errorf("Open(%s) succeeded", path)
			return
		}
		if !errors.Is(err, want) {
			t.Errorf("Open(%s) = %v, want %v", path, err, want)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the path", err)
		}
	}
	check(filepath.Join(dir, "missing"), os.ErrNotExist)
	check(write("text", []byte("#!/bin/sh\necho hello\n")), ErrNotELF)
	check(write("empty", nil), ErrNotELF)

	goBin := pb.Build(t, targets.PclnKey{Toolchain: "local", Mode: "exe"})
	data, err := os.ReadFile(goBin)
	if err != nil {
		t.Fatal(err)
	}
	check(write("truncated-header", data[:40]), ErrNotELF)

	// A real ELF machine type we do not unwind: patch e_machine.
	riscv := bytes.Clone(data)
	binary.LittleEndian.PutUint16(riscv[18:], uint16(elf.EM_RISCV))
	check(write("riscv", riscv), ErrUnsupportedArch)

	// An ELF file that is not a Go program.
	var cBin string
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/ls"} {
		if f, err := elf.Open(p); err == nil {
			f.Close()
			cBin = p
			break
		}
	}
	if cBin == "" {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Fatal("no C ELF binary found")
		}
		src := write("c.c", []byte("int main(void) { return 0; }\n"))
		cBin = filepath.Join(dir, "c")
		if out, err := exec.Command("gcc", "-o", cBin, src).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	check(cBin, ErrNoPclntab)

	// The same without section headers: found by scanning the segments.
	noSections := bytes.Clone(data)
	le := binary.LittleEndian
	le.PutUint64(noSections[0x28:], 0) // e_shoff
	le.PutUint16(noSections[0x3c:], 0) // e_shnum
	le.PutUint16(noSections[0x3e:], 0) // e_shstrndx
	p := write("no-sections", noSections)
	b, err := Open(p)
	if err != nil {
		t.Fatalf("Open without section headers: %v", err)
	}
	defer b.Close()
	full := pclnOpen(t, goBin)
	if len(b.Lines.Funcs()) != len(full.Lines.Funcs()) || b.Lines.GoFunc() != full.Lines.GoFunc() || b.Lines.TextStart() != full.Lines.TextStart() {
		t.Errorf("without section headers: %d funcs, gofunc %#x, text %#x; want %d, %#x, %#x",
			len(b.Lines.Funcs()), b.Lines.GoFunc(), b.Lines.TextStart(), len(full.Lines.Funcs()), full.Lines.GoFunc(), full.Lines.TextStart())
	}
	if lo, hi := b.TextRange(); lo != full.Lines.Funcs()[0].Entry || hi <= lo {
		t.Errorf("TextRange without sections = %#x, %#x", lo, hi)
	}
}

// goVersionOf returns the version a toolchain name stands for.
func goVersionOf(t *testing.T, toolchain string) string {
	if toolchain != "local" {
		return toolchain
	}
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func testBinaryMetadata(t *testing.T, pb *targets.PclnBuilder) {
	pb.ForEach(t, targets.PclnModes, func(t *testing.T, k targets.PclnKey) {
		b := pclnOpen(t, pb.Build(t, k))
		if b.Arch != runtime.GOARCH {
			t.Errorf("Arch = %q", b.Arch)
		}
		if want := goVersionOf(t, k.Toolchain); b.GoVersion != want {
			t.Errorf("GoVersion = %q, want %q", b.GoVersion, want)
		}
		if want := strings.Contains(k.Mode, "pie"); b.PIE != want {
			t.Errorf("PIE = %v", b.PIE)
		}
		stripped := strings.Contains(k.Mode, "strip")
		if b.Stripped != stripped {
			t.Errorf("Stripped = %v", b.Stripped)
		}
		main := b.Lines.FuncByName("main.main")
		if main == nil {
			t.Fatal("no main.main")
		}
		s, ok := b.Symbol("main.main")
		if ok == stripped {
			t.Fatalf("Symbol(main.main) = %+v, %v", s, ok)
		}
		if ok && (s.Addr != main.Entry || s.Size == 0 || s.Size > main.End-main.Entry || s.Name != "main.main") {
			t.Errorf("Symbol(main.main) = %+v, pclntab says [%#x, %#x)", s, main.Entry, main.End)
		}
		if _, ok := b.Symbol("no.such.symbol"); ok {
			t.Error("Symbol(no.such.symbol) found")
		}
		lo, hi := b.TextRange()
		text := b.File.Section(".text")
		if lo != text.Addr || hi != text.Addr+text.Size || main.Entry < lo || main.End > hi {
			t.Errorf("TextRange() = %#x, %#x; .text is %#x+%#x", lo, hi, text.Addr, text.Size)
		}
		fs := b.Lines.Funcs()
		if fs[0].Entry < lo || fs[len(fs)-1].End > hi {
			t.Errorf("functions [%#x, %#x) outside TextRange [%#x, %#x)", fs[0].Entry, fs[len(fs)-1].End, lo, hi)
		}
	})
}

func testBinaryReadAt(t *testing.T, pb *targets.PclnBuilder) {
	for _, mode := range []string{"exe", "pie"} {
		k := targets.PclnKey{Toolchain: "local", Mode: mode}
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			path := pb.Build(t, k)
			b := pclnOpen(t, path)
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Every allocated section with contents reads as in the file,
			// and FileOffset agrees with its section header.
			for _, s := range b.File.Sections {
				if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 || s.Flags&elf.SHF_TLS != 0 {
					continue
				}
				want, err := s.Data()
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(want))
				if n, err := b.ReadAt(got, s.Addr); err != nil || n != len(got) || !bytes.Equal(got, want) {
					t.Errorf("ReadAt(%s at %#x, %d bytes) = %d, %v; contents equal: %v", s.Name, s.Addr, len(got), n, err, bytes.Equal(got, want))
				}
				mid := s.Addr + s.Size/2
				if off, err := b.FileOffset(mid); err != nil || off != s.Offset+s.Size/2 {
					t.Errorf("FileOffset(%s+%#x) = %#x, %v; want %#x", s.Name, s.Size/2, off, err, s.Offset+s.Size/2)
				}
			}
			// The uprobe offset of main.main holds its code.
			main := b.Lines.FuncByName("main.main")
			off, err := b.FileOffset(main.Entry)
			if err != nil {
				t.Fatal(err)
			}
			code := make([]byte, 16)
			if _, err := b.ReadAt(code, main.Entry); err != nil || !bytes.Equal(code, file[off:off+16]) {
				t.Errorf("code of main.main at file offset %#x differs from ReadAt: %v", off, err)
			}
			// .bss reads as zeros and has no file offset.
			bss := b.File.Section(".bss")
			zeros := bytes.Repeat([]byte{0xff}, 64)
			if n, err := b.ReadAt(zeros, bss.Addr+8); err != nil || n != 64 || !bytes.Equal(zeros, make([]byte, 64)) {
				t.Errorf("ReadAt(.bss) = %d, %v, %x", n, err, zeros)
			}
			if _, err := b.FileOffset(bss.Addr + 8); err == nil {
				t.Error("FileOffset(.bss) succeeded")
			}
			// Outside every segment: an error, and the bytes read so far.
			var last *elf.Prog
			for _, p := range b.File.Progs {
				if p.Type == elf.PT_LOAD && (last == nil || p.Vaddr > last.Vaddr) {
					last = p
				}
			}
			end := last.Vaddr + last.Memsz
			buf := make([]byte, 32)
			if n, err := b.ReadAt(buf, end-8); err == nil || n != 8 {
				t.Errorf("ReadAt across the end of the last segment = %d, %v", n, err)
			}
			if n, err := b.ReadAt(buf, 0); err == nil || n != 0 {
				t.Errorf("ReadAt(0) = %d, %v", n, err)
			}
			if _, err := b.FileOffset(end + 0x1000); err == nil {
				t.Error("FileOffset past the end succeeded")
			}
		})
	}
}

func testBinaryUsableAfterClose(t *testing.T, pb *targets.PclnBuilder) {
	b, err := Open(pb.Build(t, targets.PclnKey{Toolchain: "local", Mode: "exe"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	f := b.Lines.FuncByName("main.physical")
	if f == nil {
		t.Fatal("no main.physical")
	}
	frames, err := b.Lines.Frames(f, f.Entry)
	if err != nil || len(frames) == 0 || frames[len(frames)-1].Function != "main.physical" {
		t.Errorf("Frames after Close = %+v, %v", frames, err)
	}
}
