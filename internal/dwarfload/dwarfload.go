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

// Loader reads the DWARF sections of one binary, each at most once: a
// section is decompressed the first time a reader asks for it, and shared
// by the readers after (the runtime's layouts and the arguments of traced
// functions both need .debug_info). Safe for concurrent use.
type Loader struct {
	f        *elf.File
	mu       sync.Mutex
	sections map[string]*section
}

// section is one section, read once.
type section struct {
	once sync.Once
	data []byte
	err  error
}

// NewLoader returns the Loader of f.
func NewLoader(f *elf.File) *Loader {
	return &Loader{f: f, sections: map[string]*section{}}
}

// File returns the binary the Loader reads.
func (l *Loader) File() *elf.File { return l.f }

// Sections returns the sections named (without ".debug_"), plain or
// compressed (SHF_COMPRESSED or .zdebug_), those not read yet read in
// parallel; a section the binary lacks is absent from the map.
func (l *Loader) Sections(names ...string) (map[string][]byte, error) {
	secs := make([]*section, len(names))
	l.mu.Lock()
	for i, name := range names {
		if l.sections[name] == nil {
			l.sections[name] = &section{}
		}
		secs[i] = l.sections[name]
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for i, name := range names {
		if l.f.Section(".debug_"+name) == nil && l.f.Section(".zdebug_"+name) == nil {
			continue
		}
		wg.Go(func() {
			secs[i].once.Do(func() { secs[i].data, secs[i].err = godwarf.GetDebugSectionElf(l.f, name) })
		})
	}
	wg.Wait()
	out := make(map[string][]byte, len(names))
	for i, name := range names {
		if secs[i].err != nil {
			return nil, fmt.Errorf("read DWARF: .debug_%s: %w", name, secs[i].err)
		}
		if secs[i].data != nil {
			out[name] = secs[i].data
		}
	}
	return out, nil
}

// Open returns the DWARF built from the Types sections, and every section
// read (those named in extra too).
func (l *Loader) Open(extra ...string) (*dwarf.Data, map[string][]byte, error) {
	sec, err := l.Sections(append(append([]string(nil), Types...), extra...)...)
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

// Open opens the DWARF of f, as Loader.Open does, with nothing shared.
func Open(f *elf.File, extra ...string) (*dwarf.Data, map[string][]byte, error) {
	return NewLoader(f).Open(extra...)
}
