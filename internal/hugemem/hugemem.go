// Package hugemem maps memory outside the Go heap, faulted in at once and
// in transparent huge pages where the kernel has them. On a machine with
// shadow page tables (a PVM guest) the first touch of each 4 KiB page
// costs 5-7 µs, from the kernel (what process_vm_readv or a decompressor
// writes) and again from gi's code, against about 0.2 µs per 4 KiB for a
// huge page populated in one call.
package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the size of a transparent huge page (amd64 and arm64 with
// 4 KiB pages).
const PageSize = 2 << 20

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14+): fault the range
// in for writing, within the call.
const madvPopulateWrite = 23

// Populated maps n zero bytes, aligned to huge pages, asks for huge pages
// (MADV_HUGEPAGE; nothing where transparent huge pages are off) and faults
// them in. buf is the n bytes; whole is the mapping to unmap, when the
// caller releases it. Before Linux 5.14 the range is populated by the
// mapping itself (MAP_POPULATE, small pages). ok is false if the kernel
// refuses a mapping.
func Populated(n int) (buf, whole []byte, ok bool) {
	size := (n + PageSize - 1) &^ (PageSize - 1)
	m, err := unix.Mmap(-1, 0, size+PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, false
	}
	off := int((PageSize - uintptr(unsafe.Pointer(&m[0]))%PageSize) % PageSize)
	out := m[off : off+size : off+size]
	unix.Madvise(out, unix.MADV_HUGEPAGE)
	if unix.Madvise(out, madvPopulateWrite) != nil {
		unix.Munmap(m)
		if m, err = unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
			return nil, nil, false
		}
		out = m
	}
	return out[:n:n], m, true
}

// Lazy maps n zero bytes outside the Go heap, in small pages
// (MADV_NOHUGEPAGE), each faulted in when first written: for a copy made
// where faults cost no pause (from a process's frozen copy, after the
// stop), only what is written costs anything. On a guest whose kernel
// reports free memory to its host (page_reporting, Firecracker's), a
// huge page reported free is faulted in again by the host at its first
// touch: populating 1 GiB took 0.7-1.8 s in huge pages on such a guest,
// and 0.25 s in small ones. buf is the n bytes; whole is the mapping to
// unmap. ok is false if the kernel refuses the mapping.
func Lazy(n int) (buf, whole []byte, ok bool) {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, false
	}
	unix.Madvise(m, unix.MADV_NOHUGEPAGE)
	return m, m, true
}
