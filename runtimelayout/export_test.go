package runtimelayout

import (
	"debug/dwarf"
	"maps"
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

// IndexAllUnits re-indexes d from every compilation unit, as LoadDebug
// does when the runtime's unit lacks the types.
func IndexAllUnits(d *Debug) error {
	return d.index(func(string) bool { return true })
}

// LeaTargets is leaTargets, for tests.
var LeaTargets = leaTargets
