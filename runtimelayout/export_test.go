package runtimelayout

import (
	"debug/dwarf"
	"debug/elf"
	"maps"

	"github.com/gi-debug/gi/internal/dwarfload"
)

// DebugIndex is what a Debug indexed, for tests.
type DebugIndex struct {
	Types     map[string]dwarf.Offset
	Variables map[string]uint64
	Constants map[string]int64
}

// IndexOf returns what d indexed.
func IndexOf(d *Debug) DebugIndex {
	x := DebugIndex{Types: maps.Clone(d.types), Variables: map[string]uint64{}, Constants: maps.Clone(d.constants)}
	for name, v := range d.variables {
		x.Variables[name] = v.addr
	}
	return x
}

// LoadDebugEveryUnit reads the whole DWARF of f and indexes every unit,
// as LoadDebug does when the runtime's unit lacks the types.
func LoadDebugEveryUnit(f *elf.File) (*Debug, error) {
	return loadEveryUnit(dwarfload.NewLoader(f))
}

// Resolve is resolve, for tests.
var Resolve = resolve

// LeaTargets is leaTargets, for tests.
var LeaTargets = leaTargets

// InfoBytes returns how much of .debug_info d was built from.
func InfoBytes(d *Debug) int {
	n := 0
	r := d.data.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return n
		}
		n = int(e.Offset)
		r.SkipChildren()
	}
}

// DeclaredIn returns the names of the variables and constants that are
// top-level entries of the units called unit.
func DeclaredIn(d *Debug, unit string) map[string]bool {
	out := map[string]bool{}
	r := d.data.Reader()
	in := false
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return out
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			name, _ := e.Val(dwarf.AttrName).(string)
			in = name == unit
			continue
		case dwarf.TagVariable, dwarf.TagConstant:
			if name, _ := e.Val(dwarf.AttrName).(string); in {
				out[name] = true
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}
