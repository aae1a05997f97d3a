package proc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// iovMax is the kernel's limit on iovecs per process_vm_readv call.
const iovMax = 1024

// Memory reads another process's memory.
type Memory struct {
	pid  int
	file *os.File
	// noVM is set once process_vm_readv proved unavailable (seccomp, old
	// kernel): every read then goes through /proc/<pid>/mem.
	noVM atomic.Bool

	// What was read (Stats): process_vm_readv calls, their remote
	// iovecs and bytes; preads and their bytes.
	readvCalls, iovecs, readvBytes atomic.Int64
	preads, preadBytes             atomic.Int64
}

// Range is a span of target memory.
type Range struct {
	Addr uint64
	Len  int
}

// BatchError reports the ranges of a ReadBatch that could not be read; the
// others were read. Their bytes in the destination are zero.
type BatchError struct {
	Failed []int
	First  error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%d ranges unreadable (first: %v)", len(e.Failed), e.First)
}

// OpenMemory opens /proc/<pid>/mem for reading.
func OpenMemory(pid int) (*Memory, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
		case errors.Is(err, os.ErrPermission):
			if tr := TracerOf(pid, pid); tr != 0 && tr != os.Getpid() {
				return nil, AlreadyTraced(pid, tr)
			}
			return nil, fmt.Errorf("process %d: open memory: %w", pid, ErrPermission)
		}
		return nil, fmt.Errorf("process %d: open memory: %w", pid, err)
	}
	return &Memory{pid: pid, file: f}, nil
}

// Close closes the memory file.
func (m *Memory) Close() error { return m.file.Close() }

// ReadAt reads len(p) bytes at address addr. A short read is an error.
func (m *Memory) ReadAt(p []byte, addr uint64) (int, error) {
	if addr > 1<<63-1 || addr+uint64(len(p)) < addr {
		return 0, fmt.Errorf("read %d bytes at %#x: address out of range", len(p), addr)
	}
	n, err := m.file.ReadAt(p, int64(addr))
	m.preads.Add(1)
	m.preadBytes.Add(int64(n))
	if err != nil {
		if n == 0 && errors.Is(err, unix.ESRCH) {
			return n, fmt.Errorf("read %d bytes at %#x: %w", len(p), addr, ErrProcessExited)
		}
		return n, fmt.Errorf("read %d bytes at %#x: %w", len(p), addr, err)
	}
	return n, nil
}

// Large batches are split over up to maxReaders threads: the target is
// stopped and each remote iovec costs the reading thread ~0.5 µs of kernel
// time, so a second CPU halves the pause.
const (
	parallelMinRanges = 4096
	maxReaders        = 4
)

// ReadBatch reads each range into dst, the ranges laid out back to back in
// order (dst must hold the sum of their lengths). Ranges that cannot be read
// are reported in a *BatchError; any other error means nothing useful was read.
func (m *Memory) ReadBatch(ranges []Range, dst []byte) error {
	readers := min(maxReaders, runtime.NumCPU(), len(ranges)/parallelMinRanges)
	if readers <= 1 {
		return m.readInOrder(ranges, dst)
	}
	if err := checkBatch(ranges, dst); err != nil {
		return err
	}
	errs := make([]error, readers)
	var wg sync.WaitGroup
	per := (len(ranges) + readers - 1) / readers
	off := 0
	type part struct{ lo, hi, off int }
	parts := make([]part, 0, readers)
	for lo := 0; lo < len(ranges); lo += per {
		hi := min(lo+per, len(ranges))
		parts = append(parts, part{lo, hi, off})
		for _, r := range ranges[lo:hi] {
			off += r.Len
		}
	}
	for w, p := range parts {
		end := len(dst)
		if w+1 < len(parts) {
			end = parts[w+1].off
		}
		wg.Add(1)
		go func(w int, p part, buf []byte) {
			defer wg.Done()
			errs[w] = m.readInOrder(ranges[p.lo:p.hi], buf)
		}(w, p, dst[p.off:end])
	}
	wg.Wait()
	var failed []int
	var first error
	for w, err := range errs {
		if err == nil {
			continue
		}
		var be *BatchError
		if !errors.As(err, &be) {
			return err
		}
		for _, i := range be.Failed {
			failed = append(failed, parts[w].lo+i)
		}
		if first == nil {
			first = be.First
		}
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed, First: first}
	}
	return nil
}

// readInOrder reads ranges into dst back to back with as few system calls
// as the kernel allows, falling back to pread range by range.
func (m *Memory) readInOrder(ranges []Range, dst []byte) error {
	if err := checkBatch(ranges, dst); err != nil {
		return err
	}
	var failed []int
	var first error
	off := 0
	for i := 0; i < len(ranges); {
		j := i
		if !m.noVM.Load() {
			j = m.readv(ranges, i, dst[off:])
		}
		// ranges[i:j] were read whole; read ranges[j] with pread.
		for k := i; k < j; k++ {
			off += ranges[k].Len
		}
		if j >= len(ranges) {
			break
		}
		r := ranges[j]
		if r.Len > 0 {
			if _, err := m.ReadAt(dst[off:off+r.Len], r.Addr); err != nil {
				if errors.Is(err, ErrProcessExited) {
					return err
				}
				failed = append(failed, j)
				if first == nil {
					first = err
				}
				clear(dst[off : off+r.Len])
			}
		}
		off += r.Len
		i = j + 1
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed, First: first}
	}
	return nil
}

// readv reads as many whole ranges from ranges[i:] as process_vm_readv will
// give, up to iovMax per call, into dst. It returns the index of the first
// range not read whole.
func (m *Memory) readv(ranges []Range, i int, dst []byte) int {
	local := make([]unix.Iovec, 0, iovMax)
	remote := make([]unix.RemoteIovec, 0, iovMax)
	off := 0
	for i < len(ranges) {
		local, remote = local[:0], remote[:0]
		last := i // one past the last range this call asks for
		for k := i; k < len(ranges) && (len(remote) < iovMax || canMerge(remote, ranges[k])); k++ {
			last = k + 1
			r := ranges[k]
			if r.Len == 0 {
				// Zero-length iovecs are legal but would make the
				// accounting below ambiguous; give them a byte-free slot.
				local = append(local, unix.Iovec{})
				remote = append(remote, unix.RemoteIovec{Base: uintptr(r.Addr)})
				continue
			}
			if canMerge(remote, r) {
				// Right after the previous range, in the target as in
				// dst: one iovec for both (the g structs of a heap span
				// are read as a run). A fault still ends the read at the
				// first range not read whole.
				n := len(remote)
				remote[n-1].Len += r.Len
				local[n-1].SetLen(int(local[n-1].Len) + r.Len)
				off += r.Len
				continue
			}
			iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&dst[off]))}
			iov.SetLen(r.Len)
			local = append(local, iov)
			remote = append(remote, unix.RemoteIovec{Base: uintptr(r.Addr), Len: r.Len})
			off += r.Len
		}
		n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
		m.readvCalls.Add(1)
		m.iovecs.Add(int64(len(remote)))
		m.readvBytes.Add(int64(max(n, 0)))
		if err != nil {
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
				m.noVM.Store(true)
			}
			return i
		}
		// Count the ranges read whole, up to the last one this call asked
		// for (merged iovecs stand for several ranges).
		got := 0
		k := i
		for ; k < last; k++ {
			if got+ranges[k].Len > n {
				break
			}
			got += ranges[k].Len
		}
		if k < last {
			return k
		}
		i = k
	}
	return i
}

// canMerge reports whether range r starts where the last remote iovec ends.
func canMerge(remote []unix.RemoteIovec, r Range) bool {
	n := len(remote)
	return n > 0 && r.Len > 0 && remote[n-1].Len > 0 && remote[n-1].Base+uintptr(remote[n-1].Len) == uintptr(r.Addr)
}

// checkBatch validates a batch: no negative length, room for all of it.
func checkBatch(ranges []Range, dst []byte) error {
	total := 0
	for _, r := range ranges {
		if r.Len < 0 {
			return fmt.Errorf("negative range length %d", r.Len)
		}
		total += r.Len
	}
	if total > len(dst) {
		return fmt.Errorf("batch of %d bytes into a %d-byte buffer", total, len(dst))
	}
	return nil
}

// ReadStats counts a Memory's reads of the target: process_vm_readv calls,
// the remote iovecs they carried and the bytes they returned, and the
// reads through /proc/<pid>/mem (pread) with their bytes.
type ReadStats struct {
	Readv, Iovecs, ReadvBytes int64
	Preads, PreadBytes        int64
}

// Sub returns the reads counted in s and not in o (s taken after o).
func (s ReadStats) Sub(o ReadStats) ReadStats {
	return ReadStats{s.Readv - o.Readv, s.Iovecs - o.Iovecs, s.ReadvBytes - o.ReadvBytes, s.Preads - o.Preads, s.PreadBytes - o.PreadBytes}
}

// Stats returns the reads this Memory has made so far, from every
// goroutine.
func (m *Memory) Stats() ReadStats {
	return ReadStats{
		Readv: m.readvCalls.Load(), Iovecs: m.iovecs.Load(), ReadvBytes: m.readvBytes.Load(),
		Preads: m.preads.Load(), PreadBytes: m.preadBytes.Load(),
	}
}
