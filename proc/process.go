package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/runtimelayout"
)

// ErrNotGo means a process's executable is not a Go binary gi can read.
var ErrNotGo = errors.New("not a Go program")

// Process is a live process opened for reading, once: what a command
// hands to inspect (snapshots), trace (probes) and measure (both), so
// that none of them opens the executable, maps the memory or derives the
// runtime's layout again. A core file will be another source of the same
// facts.
type Process struct {
	PID int
	// NSPID is the process's pid inside its own PID namespace (a
	// container's view); PID where they are the same.
	NSPID int
	// Exe is its executable, read through /proc/<pid>/exe: across mount
	// namespaces, and deleted binaries too.
	Exe *elfbin.Binary
	// Bias is the executable's load bias: runtime address minus
	// link-time address (PIE), 0 for a fixed-address executable.
	Bias uint64
	// Mem reads its memory: a live process's (*Memory), or what a core
	// file holds of it.
	Mem MemoryReader
	// Live is set for a running process, which can be stopped and
	// traced; not for a core file.
	Live bool
	// Environ returns the process's initial environment as
	// /proc/<pid>/environ has it: NUL-terminated NAME=value strings.
	Environ func() ([]byte, error)
	// EpollRegistrations returns the data word of each of the process's
	// epoll registrations with its descriptor (EpollRegistrations), and
	// DescribeFD what one of its descriptors is (DescribeFD): from /proc
	// for a live process; for a core file, what gi recorded in the cores
	// it writes; nil where nothing says it.
	EpollRegistrations func() (map[uint64]int, error)
	DescribeFD         func(fd int) (FD, error)
	// ReadMappings returns its memory mappings: /proc/<pid>/maps for a
	// live process; for a core file, its file mappings (NT_FILE: paths
	// and ranges, permissions unknown).
	ReadMappings func() ([]Mapping, error)
	// ClockOffset is its CLOCK_MONOTONIC minus this process's (they
	// differ across time namespaces): the runtime's timestamps, such as
	// g.waitsince, are in its clock.
	ClockOffset time.Duration

	layoutOnce sync.Once
	layout     *runtimelayout.RuntimeLayout
	table      *runtimelayout.VersionLayout
	layoutErr  error

	stringsOnce    sync.Once
	runtimeStrings *runtimelayout.RuntimeStrings
	stringsErr     error
}

// Open opens process pid: its executable, its memory, its load bias and
// clock. An executable that is not a Go binary is ErrNotGo.
func Open(pid int) (*Process, error) {
	if !Exists(pid) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
	}
	exe, err := elfbin.Open(ExePath(pid))
	if err != nil {
		switch {
		case errors.Is(err, os.ErrPermission):
			return nil, fmt.Errorf("process %d: open executable: %w", pid, ErrPermission)
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		}
		return nil, fmt.Errorf("process %d (%s): %w: %v", pid, Comm(pid), ErrNotGo, err)
	}
	p := &Process{PID: pid, NSPID: pid, Exe: exe, Live: true}
	p.Environ = func() ([]byte, error) { return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ") }
	p.EpollRegistrations = func() (map[uint64]int, error) { return EpollRegistrations(pid) }
	p.DescribeFD = func(fd int) (FD, error) { return DescribeFD(pid, fd) }
	p.ReadMappings = func() ([]Mapping, error) { return Mappings(pid) }
	if err := p.open(); err != nil {
		exe.Close()
		return nil, err
	}
	return p, nil
}

func (p *Process) open() error {
	var err error
	var mem *Memory
	if p.Bias, err = LoadBias(p.PID, p.Exe); err != nil {
		return fmt.Errorf("process %d: %w", p.PID, err)
	}
	if p.ClockOffset, err = clockOffset(p.PID); err != nil {
		return fmt.Errorf("process %d: %w", p.PID, err)
	}
	if ns, err := NamespacePID(p.PID); err == nil && ns != 0 {
		p.NSPID = ns
	}
	if mem, err = OpenMemory(p.PID); err != nil {
		return fmt.Errorf("process %d: %w", p.PID, err)
	}
	p.Mem = mem
	return nil
}

// RuntimeLayout returns the runtime's layout in the executable
// (elfbin.Binary.RuntimeLayout), derived on the first call only; table is
// the generated table's entry it came from for a stripped executable.
func (p *Process) RuntimeLayout() (layout *runtimelayout.RuntimeLayout, table *runtimelayout.VersionLayout, err error) {
	p.layoutOnce.Do(func() {
		p.layout, p.table, p.layoutErr = p.Exe.RuntimeLayout()
		if p.layoutErr != nil {
			p.layoutErr = fmt.Errorf("process %d: runtime layout: %w", p.PID, p.layoutErr)
		}
	})
	return p.layout, p.table, p.layoutErr
}

// RuntimeStrings returns the runtime's names of goroutine statuses and
// wait reasons (runtimelayout.ReadRuntimeStrings), read on the first call
// only.
func (p *Process) RuntimeStrings() (*runtimelayout.RuntimeStrings, error) {
	p.stringsOnce.Do(func() {
		layout, table, err := p.RuntimeLayout()
		if err != nil {
			p.stringsErr = err
			return
		}
		if p.runtimeStrings, err = runtimelayout.ReadRuntimeStrings(p.Mem, layout, table, p.Bias); err != nil {
			p.stringsErr = fmt.Errorf("process %d: %w", p.PID, err)
		}
	})
	return p.runtimeStrings, p.stringsErr
}

// Alive reports whether the process still runs: never for a core file.
func (p *Process) Alive() bool { return p.Live && Alive(p.PID) }

// LiveMemory returns a live process's memory, whose reads a stop can
// make exact (Track); false for a core file's.
func (p *Process) LiveMemory() (*Memory, bool) {
	m, ok := p.Mem.(*Memory)
	return m, ok && p.Live
}

// Close releases the memory and the executable.
func (p *Process) Close() error {
	if p.Mem != nil {
		p.Mem.Close()
	}
	return p.Exe.Close()
}

// MemoryReader reads a process's memory at its addresses: a live
// process's (Memory) or a core file's.
type MemoryReader interface {
	// ReadAt reads len(p) bytes at addr.
	ReadAt(p []byte, addr uint64) (int, error)
	// ReadBatch reads every range into dst, back to back; a *BatchError
	// lists the ranges that could not be read.
	ReadBatch(ranges []Range, dst []byte) error
	Close() error
}

// Comm returns the command name of process pid, or "pid <pid>" where it
// cannot be read.
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "pid " + strconv.Itoa(pid)
	}
	return strings.TrimSpace(string(b))
}

// Cmdline returns the command line of process pid, its arguments joined
// by spaces ("" if it cannot be read).
func Cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// clockOffset returns process pid's CLOCK_MONOTONIC minus this process's.
func clockOffset(pid int) (time.Duration, error) {
	theirs, err := MonotonicOffset(pid)
	if err != nil {
		return 0, err
	}
	ours, err := MonotonicOffset(0)
	if err != nil {
		return 0, err
	}
	return theirs - ours, nil
}

// ExePath is the path of process pid's executable as /proc links it: it
// opens across mount namespaces, and deleted binaries too.
func ExePath(pid int) string {
	return "/proc/" + strconv.Itoa(pid) + "/exe"
}
