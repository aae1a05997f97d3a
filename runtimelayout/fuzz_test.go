package runtimelayout

import (
	"encoding/binary"
	"os"
	"testing"
)

// sliceReader is an address space made of one byte slice at base.
type sliceReader struct {
	base uint64
	data []byte
}

func (r sliceReader) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < r.base || addr-r.base > uint64(len(r.data)) || uint64(len(p)) > uint64(len(r.data))-(addr-r.base) {
		return 0, os.ErrNotExist
	}
	return copy(p, r.data[addr-r.base:]), nil
}

// FuzzReadStringArray reads [n]string arrays from arbitrary memory.
func FuzzReadStringArray(f *testing.F) {
	seed := make([]byte, 64)
	binary.LittleEndian.PutUint64(seed[0:], 0x1000+32)
	binary.LittleEndian.PutUint64(seed[8:], 5)
	copy(seed[32:], "hello")
	f.Add(seed, int64(1))
	f.Fuzz(func(t *testing.T, data []byte, n int64) {
		ss, err := ReadStringArray(sliceReader{0x1000, data}, 0x1000, n, 1<<12)
		if err == nil && int64(len(ss)) != n {
			t.Fatalf("%d strings for n=%d", len(ss), n)
		}
	})
}
