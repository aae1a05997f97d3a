package core

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// seedCore returns the bytes of a small core as gi writes it: two
// threads, an auxiliary vector whose entry point is exe's, a file mapping
// of exe, gi's notes (time, descriptors, system calls) and two pages of
// memory.
func seedCore(t testing.TB, exe string) []byte {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	entry := f.Entry
	f.Close()
	le := binary.LittleEndian
	var auxv []byte
	for _, v := range []uint64{atEntry, entry, atExecfn, 0x10008, 0, 0} {
		auxv = le.AppendUint64(auxv, v)
	}
	th := func(tid int) ptrace.Thread {
		th := ptrace.Thread{TID: tid, Regs: ptrace.Regs{Syscall: 0, Arg0: 3}}
		for i := range th.Regs.All {
			th.Regs.All[i] = uint64(0x10000 + 8*i)
		}
		return th
	}
	img := &Image{Machine: elf.EM_X86_64, PID: 7, PPID: 1, Command: "seed", Args: "seed -x",
		Threads: []ptrace.Thread{th(7), th(8)}, Auxv: auxv,
		Files: []Mapping{{Start: entry &^ (pageSize - 1), End: entry&^(pageSize-1) + pageSize, Path: exe}},
		Taken: 12345, Epoll: map[uint64]int{0xc000123400: 3}, FDs: []proc.FD{{FD: 3, Kind: "tcp", Local: "127.0.0.1:1", Remote: "127.0.0.1:2"}},
		Memory: []proc.Range{{Addr: 0x10000, Len: 2 * pageSize}},
		Fill: func(addr uint64, dst []byte) {
			for i := range dst {
				dst[i] = byte(addr) + byte(i)
			}
		}}
	path := filepath.Join(t.TempDir(), "core")
	if err := Write(path, img); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzOpenCore opens corrupted cores (as gi writes them): every error is
// an error, never a panic or a hang, and a core that opens reads its
// memory, time, environment, descriptors and what it lacks without one.
// (Corrupt compressed streams are compressed_test.go's.)
func FuzzOpenCore(f *testing.F) {
	exe, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	seed := seedCore(f, exe)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "core")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		IsCore(path)
		c, err := Open(path, exe)
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for _, a := range []uint64{0x10000, 0x10ff0, 0x12000, 0} {
			c.Process.Mem.ReadAt(buf, a)
		}
		c.Now()
		c.Missing()
		if c.Process.Environ != nil {
			c.Process.Environ()
		}
		if c.Process.DescribeFD != nil {
			c.Process.DescribeFD(3)
			c.Process.EpollRegistrations()
		}
	})
}

// TestSeedCoreOpens checks the fuzz seed itself: the core gi writes opens,
// and holds what was written.
func TestSeedCoreOpens(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(path, seedCore(t, exe), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Process.PID != 7 || c.Command != "seed" || len(c.Threads) != 2 || c.Threads[1].TID != 8 || c.Threads[1].Regs.All[3] != 0x10018 {
		t.Errorf("pid %d %q, threads %+v", c.Process.PID, c.Command, c.Threads)
	}
	if now, ok := c.Now(); !ok || now != 12345 {
		t.Errorf("Now %d, %v: want the written 12345", now, ok)
	}
	b := make([]byte, 4)
	if _, err := c.Process.Mem.ReadAt(b, 0x11000); err != nil || b[0] != 0 || b[1] != 1 {
		t.Errorf("memory at 0x11000: %v, %v", b, err)
	}
	if d, err := c.Process.DescribeFD(3); err != nil || d.Remote != "127.0.0.1:2" {
		t.Errorf("fd 3: %+v, %v", d, err)
	}
	if c.Threads[0].Regs.Syscall != 0 || c.Threads[0].Regs.Arg0 != 3 {
		t.Errorf("thread 7's system call %d(%d), want read(3) from gi's note", c.Threads[0].Regs.Syscall, c.Threads[0].Regs.Arg0)
	}
}
