package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// maxEnvironSearch bounds how far below its file name the first stack is
// searched for the auxiliary vector (the strings of argv and environ lie
// between them), and maxEnviron the variables read.
const (
	maxEnvironSearch = 1 << 20
	maxEnviron       = 1 << 14
)

// environ returns the process's initial environment from its first stack,
// as /proc/<pid>/environ has it. The kernel laid that stack out as argc,
// argv[], NULL, envp[], NULL, the auxiliary vector, then the strings, the
// executable's name (AT_EXECFN) last: the auxiliary vector the core's note
// holds is found below the name, and envp[] ends just below it.
func environ(mem *memory, auxv []byte, execfn uint64) ([]byte, error) {
	if execfn == 0 || len(auxv) < 32 {
		return nil, errors.New("no AT_EXECFN in the core's auxiliary vector")
	}
	lo := execfn - min(execfn, maxEnvironSearch)
	// Read back from the name a page at a time until the vector appears.
	var region []byte
	start := execfn
	for start > lo {
		from := max(lo, (start-1)&^4095)
		page := make([]byte, start-from)
		if _, err := mem.ReadAt(page, from); err != nil {
			break
		}
		region = append(page, region...)
		start = from
		if at := bytes.LastIndex(region, auxv[:32]); at >= 0 {
			return envFrom(mem, start+uint64(at))
		}
	}
	return nil, errors.New("the first stack's auxiliary vector is not in the core")
}

// envFrom reads envp[], which ends (NULL) just below the auxiliary vector
// at auxvAt, and the strings it points at.
func envFrom(mem *memory, auxvAt uint64) ([]byte, error) {
	var ptrs []uint64
	var w [8]byte
	at := auxvAt - 8
	if _, err := mem.ReadAt(w[:], at); err != nil || binary.LittleEndian.Uint64(w[:]) != 0 {
		return nil, fmt.Errorf("no NULL below the auxiliary vector at %#x", auxvAt)
	}
	for i := 0; i < maxEnviron; i++ {
		at -= 8
		if _, err := mem.ReadAt(w[:], at); err != nil {
			return nil, err
		}
		p := binary.LittleEndian.Uint64(w[:])
		if p == 0 {
			break // argv's NULL
		}
		ptrs = append(ptrs, p)
	}
	var out []byte
	for i := len(ptrs) - 1; i >= 0; i-- {
		s, err := cString(mem, ptrs[i])
		if err != nil {
			return nil, err
		}
		out = append(append(out, s...), 0)
	}
	return out, nil
}

// cString reads a NUL-terminated string of at most 128 KiB.
func cString(mem *memory, addr uint64) ([]byte, error) {
	var out []byte
	buf := make([]byte, 256)
	for len(out) < 128<<10 {
		n, err := mem.ReadAt(buf, addr+uint64(len(out)))
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return append(out, buf[:i]...), nil
		}
		out = append(out, buf[:n]...)
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("string at %#x: no end within 128 KiB", addr)
}
