package core

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/go-delve/delve/pkg/elfwriter"

	"github.com/gi-debug/gi/internal/outfile"
	"github.com/gi-debug/gi/proc"
	"github.com/gi-debug/gi/ptrace"
)

// Image is what a core file gi writes holds: the process, its threads'
// registers, its auxiliary vector and file mappings, and memory.
type Image struct {
	Machine elf.Machine // elf.EM_X86_64 or elf.EM_AARCH64
	// PID, PPID, PGID and SID identify the process (NT_PRPSINFO); Command
	// is its name (comm, up to 15 bytes), Args its command line (up to 80).
	PID, PPID, PGID, SID int
	Command, Args        string
	UID, GID             int
	// Threads are the threads, the first one the core's current thread,
	// with every general register (ptrace.Regs.All).
	Threads []ptrace.Thread
	// Auxv is the auxiliary vector, as /proc/<pid>/auxv holds it.
	Auxv []byte
	// Files are the file mappings (NT_FILE).
	Files []Mapping
	// Taken is the process's CLOCK_MONOTONIC at the stop, 0 if unknown
	// (gi's note NT_GI_TAKEN: Core.Now reads it).
	Taken int64
	// Epoll are the data words of the process's epoll registrations with
	// their descriptors, and FDs what descriptors are: what the core's
	// reader cannot learn from memory (gi's note NT_GI_FDS).
	Epoll map[uint64]int
	FDs   []proc.FD
	// Memory is the memory the core holds, by address, not overlapping;
	// Fill fills dst with the bytes at addr (Recorder.Fill), a range of
	// Memory at a time or less.
	Memory []proc.Range
	Fill   func(addr uint64, dst []byte)
	// Order, if not nil, is the order of Memory's ranges in the file
	// (indices): what a reader needs first (Recorder.ReadOrder), for a
	// core cut short to keep it.
	Order []int
}

// Write writes img as an ELF core file to path, created or truncated
// (mode 0600: a core holds the process's secrets):
// the notes the kernel writes (NT_PRSTATUS per thread, NT_PRPSINFO,
// NT_AUXV, NT_FILE) for gi, gdb and Delve to read, and a PT_LOAD segment
// per memory segment. Delve's elfwriter lays the file out.
func Write(path string, img *Image) error {
	if img.Machine != elf.EM_X86_64 && img.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("write core %s: machine %v: gi writes amd64 and arm64 cores", path, img.Machine)
	}
	if len(img.Threads) == 0 {
		return fmt.Errorf("write core %s: no thread", path)
	}
	if len(img.Memory)+1 > maxSegments {
		return fmt.Errorf("write core %s: %d segments, more than %d", path, len(img.Memory), maxSegments)
	}
	// Written under a temporary name and renamed over path once
	// whole: a link planted at path is replaced, not written through;
	// a gi killed midway leaves nothing under the name.
	out, err := outfile.Create(path, 0o600)
	if err != nil {
		return fmt.Errorf("write core: %w", err)
	}
	f := out.File
	bw := &bufferedFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	w := elfwriter.New(bw, &elf.FileHeader{Class: elf.ELFCLASS64, Data: elf.ELFDATA2LSB, Version: elf.EV_CURRENT,
		OSABI: elf.ELFOSABI_NONE, Type: elf.ET_CORE, Machine: img.Machine})
	// Room for the program headers right after the ELF header, as the
	// kernel puts them: a core cut short keeps what says where its
	// notes and memory are (elfwriter writes them last; they are moved
	// here once written).
	phoff := w.Here()
	nprogs := len(img.Memory) + 1
	w.Write(make([]byte, nprogs*phentSize))
	w.Progs = append(w.Progs, w.WriteNotes(img.notes()))
	// The memory goes through one buffer, a chunk at a time.
	const chunk = 8 << 20
	buf := make([]byte, chunk)
	// The segments in the order the listing read them (Image.Order:
	// the runtime's globals, the goroutines' list, their g structs,
	// their stacks), so that a core cut short keeps what a listing needs
	// first; the program headers stay in address order.
	order := img.Order
	if len(order) != len(img.Memory) {
		order = make([]int, len(img.Memory))
		for i := range order {
			order[i] = i
		}
	}
	loads := make([]*elf.ProgHeader, len(img.Memory))
	for _, i := range order {
		m := img.Memory[i]
		w.Align(pageSize)
		off := w.Here()
		for done := 0; done < m.Len && w.Err == nil; done += chunk {
			b := buf[:min(chunk, m.Len-done)]
			img.Fill(m.Addr+uint64(done), b)
			w.Write(b)
		}
		loads[i] = &elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_W,
			Off: uint64(off), Vaddr: m.Addr, Filesz: uint64(m.Len), Memsz: uint64(m.Len), Align: pageSize}
	}
	w.Progs = append(w.Progs, loads...)
	end := w.Here()
	w.WriteProgramHeaders()
	err = w.Err
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err == nil && len(w.Progs) == nprogs {
		err = movePhdrs(f, end, phoff, nprogs)
	}
	if err == nil {
		err = out.Commit()
	}
	if err != nil {
		out.Abort()
		return fmt.Errorf("write core %s: %w", path, err)
	}
	return nil
}

// phentSize is the size of an ELF64 program header.
const phentSize = 56

// movePhdrs moves the nprogs program headers elfwriter wrote at end (the
// end of the file) to phoff, where room was left for them, and points
// the ELF header there.
func movePhdrs(f *os.File, end, phoff int64, nprogs int) error {
	b := make([]byte, nprogs*phentSize)
	if _, err := f.ReadAt(b, end); err != nil {
		return fmt.Errorf("read the program headers back: %w", err)
	}
	if _, err := f.WriteAt(b, phoff); err != nil {
		return err
	}
	var off [8]byte
	binary.LittleEndian.PutUint64(off[:], uint64(phoff))
	if _, err := f.WriteAt(off[:], 0x20); err != nil { // e_phoff
		return err
	}
	return f.Truncate(end)
}

// The size of elf_prstatus's and elf_prpsinfo's fields gi writes.
const (
	prstatusRegsAt = 112 // pr_reg
	prpsinfoSize   = 136
)

// notes returns the core's notes in the kernel's order: the first
// thread's NT_PRSTATUS, the process's NT_PRPSINFO, NT_AUXV and NT_FILE,
// the other threads', then gi's own.
func (img *Image) notes() []elfwriter.Note {
	const core = "CORE\x00"
	words := 27
	if img.Machine == elf.EM_AARCH64 {
		words = 34
	}
	prstatus := func(th ptrace.Thread) elfwriter.Note {
		d := make([]byte, prstatusRegsAt+8*words+8) // pr_fpvalid and padding last
		le := binary.LittleEndian
		le.PutUint32(d[32:], uint32(th.TID))
		le.PutUint32(d[36:], uint32(img.PPID))
		le.PutUint32(d[40:], uint32(img.PGID))
		le.PutUint32(d[44:], uint32(img.SID))
		for i := 0; i < words; i++ {
			le.PutUint64(d[prstatusRegsAt+8*i:], th.Regs.All[i])
		}
		return elfwriter.Note{Type: elf.NT_PRSTATUS, Name: core, Data: d}
	}
	// A thread's vector registers follow its NT_PRSTATUS, as the
	// kernel writes them: NT_PRFPREG named CORE, NT_X86_XSTATE LINUX.
	vector := func(th ptrace.Thread) []elfwriter.Note {
		switch th.VectorNote {
		case ptrace.NotePRFPREG:
			return []elfwriter.Note{{Type: elf.NType(th.VectorNote), Name: core, Data: th.Vector}}
		case ptrace.NoteX86XState:
			return []elfwriter.Note{{Type: elf.NType(th.VectorNote), Name: "LINUX\x00", Data: th.Vector}}
		}
		return nil
	}
	notes := append([]elfwriter.Note{prstatus(img.Threads[0])}, vector(img.Threads[0])...)
	notes = append(notes, elfwriter.Note{Type: elf.NT_PRPSINFO, Name: core, Data: img.prpsinfo()})
	if len(img.Auxv) > 0 {
		notes = append(notes, elfwriter.Note{Type: elf.NType(ntAuxv), Name: core, Data: img.Auxv})
	}
	if len(img.Files) > 0 {
		notes = append(notes, elfwriter.Note{Type: elf.NType(ntFile), Name: core, Data: fileNote(img.Files)})
	}
	for _, th := range img.Threads[1:] {
		notes = append(notes, prstatus(th))
		notes = append(notes, vector(th)...)
	}
	if img.Taken != 0 {
		d := binary.LittleEndian.AppendUint64(nil, uint64(img.Taken))
		notes = append(notes, elfwriter.Note{Type: ntGITaken, Name: noteNameGI + "\x00", Data: d})
	}
	fds := fdNote{FDs: img.FDs}
	for data, fd := range img.Epoll {
		fds.Epoll = append(fds.Epoll, [2]uint64{data, uint64(fd)})
	}
	for _, th := range img.Threads {
		if th.Regs.Syscall >= 0 {
			fds.Syscalls = append(fds.Syscalls, [3]int64{int64(th.TID), th.Regs.Syscall, int64(th.Regs.Arg0)})
		}
	}
	if len(fds.Epoll) > 0 || len(fds.FDs) > 0 || len(fds.Syscalls) > 0 {
		if d, err := json.Marshal(fds); err == nil {
			for len(d)%4 != 0 {
				d = append(d, ' ') // the kernel pads each note to 4 bytes
			}
			notes = append(notes, elfwriter.Note{Type: ntGIFDs, Name: noteNameGI + "\x00", Data: d})
		}
	}
	return notes
}

// fdNote is gi's note NT_GI_FDS, in JSON: the process's epoll
// registrations (data word, descriptor), descriptors, and the system
// call each thread was in (thread id, call, first argument: on arm64 no
// register of NT_PRSTATUS says it).
type fdNote struct {
	Epoll    [][2]uint64 `json:"epoll"`
	FDs      []proc.FD   `json:"fds"`
	Syscalls [][3]int64  `json:"syscalls,omitempty"`
}

// prpsinfo returns the NT_PRPSINFO of the process: struct elf_prpsinfo.
func (img *Image) prpsinfo() []byte {
	d := make([]byte, prpsinfoSize)
	le := binary.LittleEndian
	d[0], d[1] = 0, 'R' // pr_state, pr_sname: running
	le.PutUint32(d[16:], uint32(img.UID))
	le.PutUint32(d[20:], uint32(img.GID))
	le.PutUint32(d[24:], uint32(img.PID))
	le.PutUint32(d[28:], uint32(img.PPID))
	le.PutUint32(d[32:], uint32(img.PGID))
	le.PutUint32(d[36:], uint32(img.SID))
	copy(d[40:55], img.Command) // pr_fname[16], NUL-terminated
	copy(d[56:135], img.Args)   // pr_psargs[80], NUL-terminated
	return d
}

// fileNote returns the NT_FILE of the mappings: a count, the page size,
// (start, end, offset in pages) per mapping, then their paths.
func fileNote(files []Mapping) []byte {
	le := binary.LittleEndian
	d := le.AppendUint64(nil, uint64(len(files)))
	d = le.AppendUint64(d, pageSize)
	for _, m := range files {
		d = le.AppendUint64(d, m.Start)
		d = le.AppendUint64(d, m.End)
		d = le.AppendUint64(d, m.Offset/pageSize)
	}
	for _, m := range files {
		d = append(append(d, m.Path...), 0)
	}
	return d
}

// bufferedFile is an io.WriteSeeker that buffers writes (elfwriter
// writes each header field on its own) and flushes before it seeks.
type bufferedFile struct {
	f *os.File
	w *bufio.Writer
}

func (b *bufferedFile) Write(p []byte) (int, error) { return b.w.Write(p) }

func (b *bufferedFile) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekCurrent && off == 0 {
		pos, err := b.f.Seek(0, io.SeekCurrent)
		return pos + int64(b.w.Buffered()), err
	}
	if err := b.w.Flush(); err != nil {
		return 0, err
	}
	return b.f.Seek(off, whence)
}

func (b *bufferedFile) Flush() error { return b.w.Flush() }

func (b *bufferedFile) Close() error { return b.w.Flush() }
