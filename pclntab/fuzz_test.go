package pclntab_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gi-debug/gi/elfbin"
	"github.com/gi-debug/gi/internal/targets"
	"github.com/gi-debug/gi/pclntab"
)

// FuzzPclntab decodes arbitrary bytes as a pclntab (header, function table,
// lines, frame sizes), without the ELF around it.
func FuzzPclntab(f *testing.F) {
	for _, tc := range []string{"go1.20.14", "local"} {
		b, err := elfbin.Open(targets.Build(f, "tracee", targets.BuildOptions{Toolchain: tc, Stripped: true}))
		if err != nil {
			f.Fatal(err)
		}
		data, _, err := b.Pclntab()
		b.Close()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := pclntab.ParseHeader(data, binary.LittleEndian)
		if err != nil {
			return
		}
		lt, err := pclntab.Decode(data, binary.LittleEndian, h, pclntab.Module{TextStart: 0x401000, GoFuncErr: errNoGofunc})
		if err != nil {
			return
		}
		for i, fn := range lt.Funcs() {
			if i >= 256 {
				break
			}
			lt.FileLine(fn, fn.Entry)
			lt.SPDelta(fn, fn.Entry)
			lt.Frames(fn, fn.Entry)
		}
	})
}

var errNoGofunc = errors.New("no go:func.* in a bare pclntab")
