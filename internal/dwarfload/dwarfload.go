// Package dwarfload opens the DWARF of an ELF binary reading only the
// sections a reader needs, each decompressed on its own goroutine: on a big
// Go binary the line and frame tables and the location lists are as large
// as the rest, and elf.File.DWARF decompresses them all, one after another.
package dwarfload

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"sync"

	"github.com/go-delve/delve/pkg/dwarf/godwarf"
)

// Types are the sections debug/dwarf reads entries and types from (DWARF 4
// and 5), without the line table: enough to walk units, types and
// variables.
var Types = []string{"abbrev", "info", "str", "ranges", "rnglists", "addr", "str_offsets", "line_str"}

// Sections reads the sections of f named (without ".debug_"), plain or
// compressed (SHF_COMPRESSED or .zdebug_), in parallel; a section f lacks
// is absent from the map.
func Sections(f *elf.File, names ...string) (map[string][]byte, error) {
	data := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if f.Section(".debug_"+name) == nil && f.Section(".zdebug_"+name) == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data[i], errs[i] = godwarf.GetDebugSectionElf(f, name)
		}()
	}
	wg.Wait()
	out := make(map[string][]byte, len(names))
	for i, name := range names {
		if errs[i] != nil {
			return nil, fmt.Errorf("read DWARF: .debug_%s: %w", name, errs[i])
		}
		if data[i] != nil {
			out[name] = data[i]
		}
	}
	return out, nil
}

// Open returns the DWARF of f built from the Types sections, and every
// section read (those named in extra too).
func Open(f *elf.File, extra ...string) (*dwarf.Data, map[string][]byte, error) {
	sec, err := Sections(f, append(append([]string(nil), Types...), extra...)...)
	if err != nil {
		return nil, nil, err
	}
	d, err := dwarf.New(sec["abbrev"], nil, nil, sec["info"], nil, nil, sec["ranges"], sec["str"])
	if err != nil {
		return nil, nil, fmt.Errorf("read DWARF: %w", err)
	}
	for _, name := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if b := sec[name]; b != nil {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, nil, fmt.Errorf("read DWARF: .debug_%s: %w", name, err)
			}
		}
	}
	return d, sec, nil
}
